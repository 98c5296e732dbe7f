"""Circuit breakers (#13, #46): only failures that say a target is unwell (timeouts, throttles, 5xx, refused
connections) open one; a job's own errors never do. Per team, or per job, or off; a held run says so on its
record; a team lists its open breakers and what they hold; an admin closes one by hand, audited."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.names import TARGET_PREFIX
from jobsched.core.runs import RunStatus
from jobsched.watch.breaker import COOL_DOWN, FAILURES_TO_OPEN
from tests.aws.api_client import ADMIN, ApiClient, cli_as, team_role
from tests.aws.harness import Clock, LambdaTimedOut, Stack


def every_minute(stack: Stack, name: str, function: str, *, team: str = "ops", **extra: Any) -> None:
    stack.register(
        {
            "name": name,
            "team": team,
            "schedule": {"expression": "* * * * *"},
            "target": {"type": "lambda", "function": function},
            "retry": {"max_attempts": 1},
            **extra,
        }
    )


def timing_out(event: dict[str, Any]) -> Any:
    raise LambdaTimedOut


def test_a_target_failing_across_jobs_opens_its_circuit_then_closes(stack: Stack, clock: Clock) -> None:
    calls: list[str] = []

    def shared_db(event: dict[str, Any]) -> Any:
        calls.append(event["jobsched"]["job"])
        raise LambdaTimedOut

    stack.lambdas.functions["shared-db"] = shared_db
    for name in ("a", "b", "c"):
        every_minute(stack, name, "shared-db")
    stack.minutes(2)  # 6 runs fail: the fifth opens the circuit
    assert len(calls) == FAILURES_TO_OPEN
    held = [message for message in stack.pending() if message.job.startswith("ops/")]
    assert held, "runs wait for the cool-down: they are not dropped"
    stack.minutes(3)
    assert len(calls) == FAILURES_TO_OPEN, "nothing calls the target while the circuit is open"
    stack.handle_escalations()
    pages = stack.pages()
    [opened] = [page for page in pages if page["attributes"]["kind"] == "circuit_open"]
    assert sorted(page["attributes"]["kind"] for page in pages) == ["circuit_open"] + ["run_failed"] * 3  # a job each
    assert opened["subject"] == "[jobsched] TARGET#ops:lambda:shared-db: target circuit open (5 in a row)"
    assert opened["attributes"]["team"] == "ops"
    assert "Task timed out after" in opened["message"]

    def recovered(event: dict[str, Any]) -> Any:
        calls.append(event["jobsched"]["job"])
        return {"ok": True}

    stack.lambdas.functions["shared-db"] = recovered
    clock.advance(COOL_DOWN)
    stack.minutes(2)
    assert len(calls) > FAILURES_TO_OPEN
    waited = [run for name in "abc" for run in stack.run_list(f"ops/{name}") if run.status is RunStatus.SUCCEEDED]
    held_back = [run for run in waited if (run.lateness_ms or 0) >= 60_000]
    assert held_back, "runs held by the open circuit ran after the cool-down"
    for name in "abc":  # nothing dropped: every instant so far has its run
        ids = [run.run_id for run in stack.run_list(f"ops/{name}")]
        assert ids == sorted(ids) and len(ids) == len(set(ids))
        assert {run.status for run in stack.run_list(f"ops/{name}")} <= {RunStatus.FAILED, RunStatus.SUCCEEDED}
    stack.handle_escalations()
    resolved = stack.pages()
    assert {page["attributes"]["notice"] for page in resolved} == {"resolved"}
    [closed] = [page for page in resolved if page["attributes"]["kind"] == "circuit_closed"]
    assert closed["subject"].startswith("[jobsched, resolved] TARGET#ops:lambda:shared-db")
    assert stack.jobs.breaker("ops:lambda:shared-db").failures == 0


def test_a_breaker_opened_by_one_team_leaves_another_teams_runs_alone(stack: Stack, clock: Clock) -> None:
    """Team A pointing failing jobs at a shared endpoint opens A's breaker only (#13)."""
    calls: list[str] = []

    def shared_saas(event: dict[str, Any]) -> Any:
        calls.append(event["jobsched"]["team"])
        if event["jobsched"]["team"] == "ops":
            raise LambdaTimedOut  # ops's calls hang (its own large requests, say)
        return {"ok": True}

    stack.lambdas.functions["shared-saas"] = shared_saas
    for name in ("a", "b", "c"):
        every_minute(stack, name, "shared-saas")
    stack.register(
        {
            "name": "steady",
            "team": "billing",
            "schedule": {"expression": "* * * * *"},
            "target": {"type": "lambda", "function": "shared-saas"},
        }
    )
    stack.minutes(5)
    assert stack.jobs.breaker("ops:lambda:shared-saas").holds(clock())
    assert not stack.jobs.breaker("billing:lambda:shared-saas").holds(clock())
    steady = stack.run_list("billing/steady")
    assert len(steady) == 5 and all(r.status is RunStatus.SUCCEEDED and (r.lateness_ms or 0) < 60_000 for r in steady)


def test_a_jobs_own_errors_never_open_the_breaker_that_holds_its_neighbours(stack: Stack, clock: Clock) -> None:
    """The demo's case: ``failing`` raises on every attempt of a function ``flaky`` and ``pipeline`` share.
    Its errors are its own; the function answers; the others keep running on time."""

    def example(event: dict[str, Any]) -> Any:
        if event["jobsched"]["job"] == "examples/failing":
            raise RuntimeError("fails on purpose")
        return {"ok": True}

    stack.lambdas.functions["example"] = example
    every_minute(stack, "failing", "example", team="examples")
    every_minute(stack, "flaky", "example", team="examples")
    stack.minutes(3 * FAILURES_TO_OPEN)
    failed = stack.run_list("examples/failing")
    assert len(failed) >= 2 * FAILURES_TO_OPEN and {run.status for run in failed} == {RunStatus.FAILED}
    assert stack.jobs.breaker("examples:lambda:example").failures == 0, "an application error is not counted"
    flaky = stack.run_list("examples/flaky")
    assert len(flaky) == len(failed) and all(r.status is RunStatus.SUCCEEDED for r in flaky)
    assert all((r.lateness_ms or 0) < 60_000 for r in flaky), "nothing was held"
    assert stack.jobs.open_breakers("examples") == {}


def test_a_job_may_keep_a_breaker_of_its_own_or_none(stack: Stack, clock: Clock) -> None:
    """``circuit_breaker: job``: its timeouts open its own breaker and hold only its own runs; ``off``: no
    breaker counts or holds it, its runs call the target every time."""
    stack.lambdas.functions["slow-api"] = timing_out
    stack.lambdas.functions["fine"] = lambda event: {"ok": True}
    every_minute(stack, "own", "slow-api", circuit_breaker="job")
    every_minute(stack, "unguarded", "slow-api", circuit_breaker="off")
    stack.minutes(FAILURES_TO_OPEN + 3)
    own = stack.jobs.breaker("ops/own:lambda:slow-api")
    assert own.holds(clock()) and own.failures == FAILURES_TO_OPEN
    assert stack.jobs.breaker("ops:lambda:slow-api").failures == 0, "the team's breaker counted nothing"
    calls = [job for job, _, _ in stack.lambdas.executions("slow-api")]
    assert calls.count("ops/own") == FAILURES_TO_OPEN, "held after its own breaker opened"
    assert calls.count("ops/unguarded") == FAILURES_TO_OPEN + 3, "never held"
    assert list(stack.jobs.open_breakers("ops")) == ["ops/own:lambda:slow-api"]


def test_a_held_run_says_why_and_until_when_the_team_lists_it_and_an_admin_closes_the_breaker(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.lambdas.functions["flapping"] = timing_out
    every_minute(stack, "poller", "flapping")
    stack.minutes(FAILURES_TO_OPEN)
    key = "ops:lambda:flapping"
    assert stack.jobs.breaker(key).holds(clock())
    # A manual run's record exists from its trigger (no reason yet): the hold writes why, and until when.
    run_id = stack.register_and_trigger(
        {
            "name": "manual",
            "team": "ops",
            "target": {"type": "lambda", "function": "flapping"},
            "retry": {"max_attempts": 1},
        }
    )
    [held] = [run for run in stack.run_list("ops/manual") if run.run_id == run_id]
    until = stack.jobs.breaker(key).open_until
    assert held.status is RunStatus.SCHEDULED and held.reason is not None
    assert f"held: circuit open until {until:%Y-%m-%dT%H:%M:%SZ} (lambda:flapping)" in held.reason

    api = ApiClient(stack)
    listed = api.call("GET", "/teams/ops/breakers", principal=team_role("ops"))
    assert listed.status == 200
    [view] = listed.body["breakers"]
    assert view["breaker"] == key and view["target"] == "lambda:flapping" and view["scope"] == "team"
    assert view["state"] == "open" and view["failures"] == FAILURES_TO_OPEN
    assert f"ops/manual/{run_id}" in view["held"]
    assert api.call("GET", "/teams/ops/breakers", principal=team_role("billing")).status == 403

    refused = api.call("POST", "/teams/ops/breakers/close", {"breaker": key, "reason": "x"}, principal=team_role("ops"))
    assert refused.status == 403 and stack.jobs.breaker(key).holds(clock()), "members cannot close it"
    other = api.call("POST", "/teams/billing/breakers/close", {"breaker": key, "reason": "x"})
    assert other.status == 422 and other.body["error"]["code"] == "breaker_not_of_team"

    run = cli_as(api, ADMIN, monkeypatch)
    code, output = run("breakers", "ops")
    assert code == 0 and "lambda:flapping" in output and f"ops/manual/{run_id}" in output, output
    code, output = run("breakers", "ops", "--close", key)
    assert code == 2 and "--reason" in output
    code, output = run("breakers", "ops", "--close", key, "--reason", "the vendor fixed it")
    assert code == 0 and f"closed {key}" in output and "runs sent now: 1" in output, output
    stack.lambdas.functions["flapping"] = lambda event: {"ok": True}
    assert not stack.jobs.breaker(key).holds(clock()) and stack.jobs.open_breakers("ops") == {}
    [audit] = stack.jobs.audit_trail(TARGET_PREFIX + key)
    assert audit["action"] == "close_breaker" and audit["principal"] == ADMIN
    assert audit["reason"] == "the vendor fixed it"
    stack.handle_escalations()
    closed = [page for page in stack.pages() if page["attributes"]["kind"] == "circuit_closed"]
    assert closed and f"closed by {ADMIN}: the vendor fixed it" in closed[0]["message"]
    again = api.call("POST", "/teams/ops/breakers/close", {"breaker": key, "reason": "twice"})
    assert again.status == 404 and again.body["error"]["code"] == "breaker_not_open"
    clock.advance(timedelta(seconds=30))
    stack.pump()
    [ran] = [run for run in stack.run_list("ops/manual") if run.run_id == run_id]
    assert timedelta(seconds=30) < COOL_DOWN
    assert ran.status is RunStatus.SUCCEEDED, "sent when the breaker closed, not after the cool-down"
