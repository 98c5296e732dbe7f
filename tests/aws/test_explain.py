"""`jobsched explain TEAM/JOB INSTANT` (#46): one answer to "why did / didn't this run?" for any instant, past or
future: a run that ran, one skipped by a calendar, one held by a breaker, one lost and recorded MISSED, one in a
DST gap, one in the future, one the schedule never names, one while the job was paused."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.registry.jobs import pause_job
from jobsched.watch.breaker import FAILURES_TO_OPEN
from tests.aws.api_client import ApiClient, cli_as, team_role
from tests.aws.harness import Clock, LambdaTimedOut, Stack
from tests.aws.test_lost_messages import lost_counts, take_message
from tests.aws.test_pipeline import job


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


def ask(api: ApiClient, name: str, at: str, team: str = "payments") -> dict[str, Any]:
    response = api.call("GET", f"/teams/{team}/jobs/{name}/explain?at={at}", principal=team_role(team))
    assert response.status == 200, response.body
    body: dict[str, Any] = response.body
    return body


def test_a_run_that_ran_and_one_whose_message_was_lost(stack: Stack, clock: Clock, api: ApiClient) -> None:
    stack.register(job())
    stack.tick()
    take_message(stack, "20270104T090500Z")
    assert lost_counts(stack, 30) == 1
    [ran] = ask(api, "hello", "2027-01-04T09:04:00Z")["answers"]
    assert ran["verdict"] == "ran" and ran["run"]["run_id"] == "20270104T090400Z"
    assert ran["why"][0] == "run 20270104T090400Z: SUCCEEDED, attempt 1 of 3"
    assert any(line.startswith("started 2027-01-04T09:04:00Z (") for line in ran["why"])
    [lost] = ask(api, "hello", "2027-01-04T09:05:00Z")["answers"]
    assert lost["verdict"] == "missed" and lost["run"]["status"] == "MISSED"
    assert "its message was lost" in lost["why"][-1] and "lost-message audit" in lost["why"][-1]


def test_a_calendar_skip_a_dst_gap_the_future_and_an_instant_the_schedule_never_names(
    stack: Stack, clock: Clock, api: ApiClient
) -> None:
    calendar = {"exclude_dates": ["2027-01-05"]}
    stack.register(job("daily", "0 9 * * *") | {"schedule": {"expression": "0 9 * * *", "calendar": calendar}})
    [skipped] = ask(api, "daily", "2027-01-05T09:00:00Z")["answers"]
    assert skipped["verdict"] == "skipped" and "excluded date" in skipped["why"][0], skipped
    [future] = ask(api, "daily", "2027-01-06T09:00")["answers"]  # a wall time: the job's zone is UTC
    assert future["verdict"] == "will-fire" and future["why"] == ["fires at 2027-01-06T09:00:00Z"]
    [never] = ask(api, "daily", "2027-01-06T10:00:00Z")["answers"]
    assert never["verdict"] == "not-scheduled"
    assert never["why"] == [
        "the schedule (0 9 * * *, UTC) names no instant at 2027-01-06T10:00:00Z",
        "the fire before it: 2027-01-06T09:00:00Z",
        "the fire after it: 2027-01-07T09:00:00Z",
    ]

    berlin = {"expression": "30 2 * * *", "timezone": "Europe/Berlin"}
    stack.register(job("night", "30 2 * * *") | {"schedule": berlin})
    stack.register(job("strict", "30 2 * * *") | {"schedule": berlin | {"dst": {"gap": "skip"}}})
    shifted = ask(api, "night", "2027-03-28T02:30")
    assert shifted["notes"] == [
        "2027-03-28 02:30 does not exist in Europe/Berlin: the clocks skip it (DST gap); the first instant after"
        " the gap is used"
    ]
    [moved] = shifted["answers"]
    assert moved["at"] == "2027-03-28T01:00:00Z" and moved["wall"] == "2027-03-28 03:00:00 Europe/Berlin"
    assert moved["verdict"] == "will-fire"
    assert "02:30 does not exist on 2027-03-28 in Europe/Berlin (DST gap): shifted to 03:00" in moved["why"][0]
    [gap] = ask(api, "strict", "2027-03-28T02:30")["answers"]
    assert gap["verdict"] == "skipped" and "(DST gap; gap: skip)" in gap["why"][0]
    folded = ask(api, "night", "2027-10-31T02:30")
    assert [answer["at"] for answer in folded["answers"]] == ["2027-10-31T00:30:00Z", "2027-10-31T01:30:00Z"]
    assert "occurs twice" in folded["notes"][0]
    assert [answer["verdict"] for answer in folded["answers"]] == ["will-fire", "skipped"]  # fold: first (default)


def test_a_run_held_by_a_breaker_and_instants_of_a_paused_job(
    stack: Stack, clock: Clock, api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def timing_out(event: dict[str, Any]) -> Any:
        raise LambdaTimedOut

    stack.lambdas.functions["slow"] = timing_out
    stack.register(job("poll") | {"target": {"type": "lambda", "function": "slow"}, "retry": {"max_attempts": 1}})
    stack.minutes(FAILURES_TO_OPEN + 1)
    [held] = ask(api, "poll", f"2027-01-04T09:0{FAILURES_TO_OPEN}:00Z")["answers"]
    assert held["verdict"] == "held" and held["run"]["status"] == "SCHEDULED"
    assert held["why"][-1].startswith("held by its target's circuit breaker: waiting since ")
    assert "held: circuit open until" in held["why"][-1]

    pause_job(stack.jobs, "payments/poll", now=clock(), principal="ops@example.com", reason="vendor outage")
    upcoming = ask(api, "poll", "2027-01-04T12:00:00Z")
    [paused] = upcoming["answers"]
    assert paused["verdict"] == "will-not-fire" and "the job is paused" in paused["why"][0]
    assert "vendor outage" in paused["why"][0] and upcoming["next_fire"] is None

    run = cli_as(api, team_role("payments"), monkeypatch)
    code, output = run("explain", "payments/poll", f"2027-01-04T09:0{FAILURES_TO_OPEN}:00Z")
    assert code == 0, output
    assert f"2027-01-04T09:0{FAILURES_TO_OPEN}:00Z (2027-01-04 09:0{FAILURES_TO_OPEN}:00 UTC): HELD" in output
    assert "circuit breaker" in output and "next fire: -" in output
    code, output = run("explain", "payments/poll", "last tuesday at nine")
    assert code == 1 and "is not an instant" in output
