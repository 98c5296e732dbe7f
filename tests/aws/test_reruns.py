"""Reruns with the logical instant (#17): one run again, a range by status, and a backfill over MISSED."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.run_records import Run, StaleAttempt
from jobsched.core.runs import RunStatus, instant_text
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.manual_runs import cancel_backfill, get_backfill, start_backfill
from jobsched.pipeline.reruns import RerunRefused, RunInFlight, rerun_run
from tests.aws.api_client import ApiClient, cli_as, team_role
from tests.aws.harness import Clock, FakeLambdas, Stack, at

HOURLY = {
    "name": "report",
    "team": "ops",
    "schedule": {"expression": "0 * * * *"},
    "target": {"type": "lambda", "function": "flaky"},
    "retry": {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}},
}


@pytest.fixture
def lambdas() -> FakeLambdas:
    healthy = {"on": False}

    def flaky(event: dict[str, Any]) -> Any:
        if not healthy["on"]:
            raise RuntimeError("downstream is down")
        return {"scheduled_at": event["jobsched"]["scheduled_at"]}

    fake = FakeLambdas(functions={"flaky": flaky, "echo": lambda event: {}})
    fake.healthy = healthy  # type: ignore[attr-defined]
    return fake


def fail_the_nine_oclock_run(stack: Stack, clock: Clock) -> str:
    stack.register(HOURLY)
    clock.set("2027-01-04T09:00:00Z")
    stack.tick()
    for _ in range(3):
        stack.pump()
        clock.advance(timedelta(seconds=2))
    [run] = stack.run_list("ops/report")
    assert run.status is RunStatus.FAILED and run.attempt == 2
    return run.run_id


def test_a_failed_run_is_rerun_with_its_own_instant_and_gets_its_retries(
    stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    run_id = fail_the_nine_oclock_run(stack, clock)
    clock.set("2027-01-04T11:30:00Z")
    lambdas.healthy["on"] = True  # type: ignore[attr-defined]
    reopened = rerun_run(stack.jobs, stack.runs, stack.queues, "ops/report", run_id, now=clock(), principal="alice")
    assert reopened.status is RunStatus.RETRYING and reopened.attempt == 2 and "alice" in (reopened.reason or "")
    stack.pump()
    done = stack.runs.get("ops/report", run_id)
    assert done is not None and done.status is RunStatus.SUCCEEDED and done.attempt == 3
    assert done.scheduled_at == at("2027-01-04T09:00:00Z"), "the same run and instant"
    last = lambdas.calls[-1][1]["jobsched"]
    assert last["scheduled_at"] == "2027-01-04T09:00:00Z" and last["attempt"] == 3 and last["run_id"] == run_id


def test_a_rerun_that_fails_is_retried_by_its_policy_again(stack: Stack, clock: Clock, lambdas: FakeLambdas) -> None:
    run_id = fail_the_nine_oclock_run(stack, clock)
    rerun_run(stack.jobs, stack.runs, stack.queues, "ops/report", run_id, now=clock(), principal="alice")
    for _ in range(3):
        stack.pump()
        clock.advance(timedelta(seconds=2))
    done = stack.runs.get("ops/report", run_id)
    assert done is not None and done.status is RunStatus.FAILED and done.attempt == 4, "attempts 3 and 4"


def callback_run_waiting(stack: Stack, clock: Clock) -> Run:
    """The 09:00 run of a callback job (no retries), RUNNING while it waits for its result."""
    stack.register(
        {
            "name": "cb",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "callback", "timeout": "1h"},
            "retry": {"max_attempts": 1},
        }
    )
    clock.set("2027-01-04T09:00:00Z")
    stack.tick()
    stack.pump()
    [run] = stack.run_list("ops/cb")
    return run


def test_the_old_attempts_late_result_is_refused(stack: Stack, clock: Clock) -> None:
    run = callback_run_waiting(stack, clock)
    stack.worker.ends.complete(AttemptRef("ops/cb", run.run_id, 1), Reported(succeeded=False, error="bad input"))
    rerun_run(stack.jobs, stack.runs, stack.queues, "ops/cb", run.run_id, now=clock(), principal="alice")
    stack.pump()
    with pytest.raises(StaleAttempt):
        stack.worker.ends.complete(AttemptRef("ops/cb", run.run_id, 1), Reported(succeeded=True))
    current = stack.runs.get("ops/cb", run.run_id)
    assert current is not None and current.status is RunStatus.RUNNING and current.attempt == 2


def test_a_run_in_flight_or_succeeded_is_refused_unless_forced(stack: Stack, clock: Clock) -> None:
    run = callback_run_waiting(stack, clock)
    with pytest.raises(RunInFlight):
        rerun_run(stack.jobs, stack.runs, stack.queues, "ops/cb", run.run_id, now=clock(), principal="a")
    stack.worker.ends.complete(AttemptRef("ops/cb", run.run_id, 1), Reported(succeeded=True))
    with pytest.raises(RerunRefused):
        rerun_run(stack.jobs, stack.runs, stack.queues, "ops/cb", run.run_id, now=clock(), principal="a")
    forced = rerun_run(
        stack.jobs, stack.runs, stack.queues, "ops/cb", run.run_id, now=clock(), principal="a", force=True
    )
    assert forced.status is RunStatus.RETRYING


def test_two_concurrent_reruns_start_one_attempt(stack: Stack, clock: Clock, lambdas: FakeLambdas) -> None:
    run_id = fail_the_nine_oclock_run(stack, clock)
    stale = stack.runs.get("ops/report", run_id)
    assert stale is not None
    rerun_run(stack.jobs, stack.runs, stack.queues, "ops/report", run_id, now=clock(), principal="first")
    with pytest.raises(StaleAttempt):  # the second read FAILED too, but its conditional write loses
        stack.runs.reopen(
            "ops/report",
            run_id,
            expected_status=stale.status,
            attempt=stale.attempt,
            now=clock(),
            retention=timedelta(days=1),
            reason="second",
        )


def test_a_crash_between_the_reopen_and_the_message_is_recovered_by_the_next_tick(
    stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    run_id = fail_the_nine_oclock_run(stack, clock)
    stored = stack.jobs.get("ops/report")
    run = stack.runs.get("ops/report", run_id)
    assert stored is not None and run is not None
    lambdas.healthy["on"] = True  # type: ignore[attr-defined]
    # The API process dies right after step 1: the run is RETRYING, no message was sent.
    stack.runs.reopen(
        run.job,
        run_id,
        expected_status=run.status,
        attempt=run.attempt,
        now=clock(),
        retention=stored.spec.run_retention,
        reason="rerun requested by alice",
    )
    stack.pump()
    still = stack.runs.get("ops/report", run_id)
    assert still is not None and still.status is RunStatus.RETRYING
    clock.advance(timedelta(seconds=30))
    assert stack.tick().retries_woken == 1, "the wakeups index brought it back"
    stack.pump()
    done = stack.runs.get("ops/report", run_id)
    assert done is not None and done.status is RunStatus.SUCCEEDED and done.attempt == 3


def outage(stack: Stack, clock: Clock) -> None:
    """Three hourly instants recorded MISSED: the dispatcher was down past the catch-up window."""
    stack.register(
        {
            **HOURLY,
            "target": {"type": "lambda", "function": "echo"},
            "schedule": {"expression": "0 * * * *", "catchup": {"policy": "none"}},
        }
    )
    clock.set("2027-01-04T09:00:00Z")
    stack.tick()
    stack.pump()
    clock.set("2027-01-04T12:30:00Z")
    stack.tick()
    missed = [r for r in stack.run_list("ops/report") if r.status is RunStatus.MISSED]
    assert [instant_text(r.scheduled_at) for r in missed] == [
        "2027-01-04T10:00:00Z",
        "2027-01-04T11:00:00Z",
        "2027-01-04T12:00:00Z",
    ]


def test_a_backfill_over_missed_instants_runs_them_and_skips_the_one_that_ran(stack: Stack, clock: Clock) -> None:
    outage(stack, clock)
    progress = start_backfill(
        stack.jobs,
        "ops/report",
        start=at("2027-01-04T09:00:00Z"),
        end=at("2027-01-04T12:00:00Z"),
        max_in_flight=5,
        now=clock(),
        principal="alice",
    )
    for _ in range(3):
        stack.tick()
        stack.pump()
    final = get_backfill(stack.jobs, "ops/report", progress.backfill_id)
    assert final.state == "DONE" and final.finished == {"SUCCEEDED": 4} and final.rerun == 3
    runs = {instant_text(r.scheduled_at): r for r in stack.run_list("ops/report")}
    assert all(r.status is RunStatus.SUCCEEDED for r in runs.values())
    assert runs["2027-01-04T09:00:00Z"].attempt == 1, "the 09:00 run had run: not run again"
    assert runs["2027-01-04T10:00:00Z"].attempt == 2


def test_a_range_rerun_by_status_paces_itself_and_can_be_cancelled(
    stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    stack.register({**HOURLY, "retry": {"max_attempts": 1}})
    for hour in range(9, 13):
        clock.set(f"2027-01-04T{hour:02d}:00:00Z")
        stack.tick()
        stack.pump()
    assert {r.status for r in stack.run_list("ops/report")} == {RunStatus.FAILED}
    lambdas.healthy["on"] = True  # type: ignore[attr-defined]
    clock.set("2027-01-04T12:10:00Z")
    progress = start_backfill(
        stack.jobs,
        "ops/report",
        start=at("2027-01-04T09:00:00Z"),
        end=at("2027-01-04T12:00:00Z"),
        max_in_flight=10,
        rate_per_minute=1,
        now=clock(),
        principal="alice",
        statuses=frozenset({RunStatus.FAILED}),
    )
    stack.tick()
    stack.pump()
    first = get_backfill(stack.jobs, "ops/report", progress.backfill_id)
    assert first.sent == 1 and first.rerun == 1, "one a minute"
    cancelled = cancel_backfill(stack.jobs, "ops/report", progress.backfill_id, now=clock(), principal="alice")
    assert cancelled.state == "CANCELLED"
    clock.advance(timedelta(minutes=1))
    stack.tick()
    stack.pump()
    statuses = sorted(r.status.value for r in stack.run_list("ops/report"))
    assert statuses == ["FAILED", "FAILED", "FAILED", "SUCCEEDED"], "nothing more after the cancel"
    assert get_backfill(stack.jobs, "ops/report", progress.backfill_id).state == "CANCELLED"


def test_the_api_reruns_a_run_and_a_range_and_refuses_what_it_must(
    stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    run_id = fail_the_nine_oclock_run(stack, clock)
    api = ApiClient(stack)
    path = f"/teams/ops/jobs/report/runs/{run_id}/rerun"
    assert api.call("POST", path, principal=team_role("payments")).status == 403
    answered = api.call("POST", path, principal=team_role("ops"))
    assert answered.status == 202 and answered.body["status"] == "RETRYING"
    assert answered.body["scheduled_at"] == "2027-01-04T09:00:00Z"
    busy = api.call("POST", path, principal=team_role("ops"))
    assert busy.status == 409 and busy.body["error"]["code"] == "run_in_flight"
    assert api.call("POST", "/teams/ops/jobs/report/runs/nope/rerun").status == 404
    ranged = api.call(
        "POST",
        "/teams/ops/jobs/report/reruns",
        {"from": "2027-01-04T08:00:00Z", "to": "2027-01-04T09:00:00Z", "status": ["FAILED"], "rate_per_minute": 10},
    )
    assert ranged.status == 202 and ranged.body["status"] == ["FAILED"] and ranged.body["rate_per_minute"] == 10
    no_status = api.call(
        "POST", "/teams/ops/jobs/report/reruns", {"from": "2027-01-04T08:00:00Z", "to": "2027-01-04T09:00:00Z"}
    )
    assert no_status.status == 422 and no_status.body["error"]["field"] == "status"
    high = api.call(
        "POST",
        "/teams/ops/jobs/report/backfill",
        {"from": "2027-01-04T08:00:00Z", "to": "2027-01-04T09:00:00Z", "priority": "high"},
        principal=team_role("ops"),
    )
    assert high.status == 422 and high.body["error"]["field"] == "priority"
    gone = api.call("DELETE", f"/teams/ops/jobs/report/backfills/{ranged.body['backfill_id']}")
    assert gone.status == 200 and gone.body["state"] in ("CANCELLED", "DONE")


def test_jobsched_rerun_reruns_one_run_a_range_and_cancels(
    stack: Stack, clock: Clock, lambdas: FakeLambdas, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = fail_the_nine_oclock_run(stack, clock)
    api = ApiClient(stack)
    run = cli_as(api, team_role("ops"), monkeypatch)

    code, output = run("rerun", "ops/report", run_id)
    assert code == 0 and "RETRYING" in output, output
    code, output = run("rerun", "ops/report", run_id)
    assert code == 1 and "RETRYING" in output, "in flight: refused with the API's message"
    code, output = run("rerun", "ops/report", "--from", "2027-01-04T08:00:00Z", "--to", "2027-01-04T09:00:00Z")
    assert code == 2 and "--status" in output
    code, output = run(
        "rerun",
        "ops/report",
        "--from",
        "2027-01-04T08:00:00Z",
        "--to",
        "2027-01-04T09:00:00Z",
        "--status",
        "failed,nope",
    )
    assert code == 2 and "NOPE" in output
    code, output = run(
        "rerun",
        "ops/report",
        "--from",
        "2027-01-04T08:00:00Z",
        "--to",
        "2027-01-04T09:00:00Z",
        "--status",
        "FAILED,MISSED",
        "--rate",
        "5",
        "-o",
        "json",
    )
    assert code == 0, output
    backfill_id = json.loads(output)["backfill_id"]
    code, output = run("rerun", "ops/report", "--cancel", backfill_id)
    assert code == 0 and backfill_id in output
