"""Heartbeat checks: callback runs that stop reporting are timed out, retried, then TIMED_OUT and escalated."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.core.run_records import StaleAttempt
from jobsched.core.runs import RunStatus
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.worker import heartbeat_checker
from jobsched.watch.heartbeat import HeartbeatChecker
from tests.aws.harness import Clock, Stack

RUN = "20270104T100000Z"


@pytest.fixture
def checker(stack: Stack) -> HeartbeatChecker:
    return heartbeat_checker(stack.runs, stack.worker)


def start_callback(stack: Stack, clock: Clock, attempts: int = 2) -> None:
    clock.set("2027-01-04T09:59:30Z")
    stack.register(
        {
            "name": "external",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "callback", "timeout": "1h"},
            "heartbeat_timeout": "1m",
            "retry": {"max_attempts": attempts, "backoff": {"initial": "10s", "max": "10s", "jitter": "none"}},
        }
    )
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()


def status(stack: Stack) -> tuple[RunStatus, int]:
    run = stack.runs.get("ops/external", RUN)
    assert run is not None
    return run.status, run.attempt


def test_a_silent_callback_run_is_retried_then_timed_out_with_one_escalation(
    stack: Stack, clock: Clock, checker: HeartbeatChecker
) -> None:
    start_callback(stack, clock)
    assert status(stack) == (RunStatus.RUNNING, 1)
    clock.set("2027-01-04T10:01:30Z")
    assert checker.check(clock()).expired == 0, "the lease (heartbeat timeout + margin) has not run out"
    clock.set("2027-01-04T10:02:30Z")
    assert checker.check(clock()).retried == 1
    assert status(stack) == (RunStatus.RETRYING, 1)
    clock.advance(timedelta(seconds=15))
    stack.pump()
    assert status(stack) == (RunStatus.RUNNING, 2)
    with pytest.raises(StaleAttempt):
        stack.worker.ends.heartbeat(AttemptRef("ops/external", RUN, 1))  # the timed-out attempt's late heartbeat
    with pytest.raises(StaleAttempt):
        stack.worker.ends.complete(AttemptRef("ops/external", RUN, 1), Reported(succeeded=True))  # and its late result
    clock.advance(timedelta(minutes=3))
    report = checker.check(clock())
    assert report.timed_out == 1
    assert status(stack) == (RunStatus.TIMED_OUT, 2)
    [escalation] = stack.escalations()
    assert escalation["kind"] == "run_timed_out" and escalation["run_id"] == RUN and escalation["attempt"] == 2
    assert checker.check(clock() + timedelta(hours=1)).expired == 0, "a finished run leaves the lease index"
    assert stack.live_slot_holders("ops/external", "STATE") == {}


def test_heartbeats_keep_a_run_alive(stack: Stack, clock: Clock, checker: HeartbeatChecker) -> None:
    start_callback(stack, clock)
    for _ in range(5):
        clock.advance(timedelta(seconds=50))
        stack.worker.ends.heartbeat(AttemptRef("ops/external", RUN, 1))
        assert checker.check(clock()).expired == 0
    assert status(stack) == (RunStatus.RUNNING, 1)


def test_the_checker_reads_only_sparse_indexes(stack: Stack, clock: Clock, checker: HeartbeatChecker) -> None:
    start_callback(stack, clock)
    operations: list[str] = []
    stack.dynamodb.meta.events.register(
        "before-parameter-build.dynamodb",
        lambda model, params, **_: operations.append(f"{model.name}:{params.get('IndexName')}"),
    )
    checker.check(clock())
    # Waiting runs, runs past a deadline, overdue due entries; and whether a dispatcher incident is open.
    assert set(operations) == {"Query:leases", "Query:deadlines", "Query:due", "GetItem:None"}
