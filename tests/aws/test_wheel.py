"""The timing wheel (#51): an hourly job waits for its next visit on a key that does not move, so a visit writes
its cursor and nothing on an index. The hard cases: an outage longer than the wheel's hour, a visit that fails, a
pause and a resume, a job too sparse for the wheel, and a dispatcher that stops reading it (the heartbeat pages)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.adapters.aws.dynamo import from_item, to_item
from jobsched.core.names import JobsKeys, wheel_slot
from jobsched.core.records import due_shard
from jobsched.core.runs import RunStatus, parse_instant
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.worker import heartbeat_checker
from jobsched.registry.jobs import pause_job, resume_job
from tests.aws.harness import Clock, Stack
from tests.aws.test_audit_messages import operate as run_minutes
from tests.aws.test_pipeline import job
from tests.aws.test_worker_specs import from_worker

MINUTE = timedelta(minutes=1)
HOURLY = "payments/hourly"


def state_item(stack: Stack, key: str = HOURLY) -> dict[str, Any]:
    response = stack.dynamodb.get_item(TableName=stack.jobs_table, Key=to_item({"pk": key, "sk": JobsKeys.STATE}))
    return from_item(response["Item"])


def count_state_reads(stack: Stack, key: str = HOURLY) -> dict[str, int]:
    """Reads of the job's STATE item from here on, by who asked, and of its spec."""
    reads: dict[str, int] = {}

    def count(params: dict[str, Any], **_: Any) -> None:
        request = params["RequestItems"].get(stack.jobs_table, {})
        keys = [(k["pk"]["S"], k["sk"]["S"]) for k in request.get("Keys", [])]
        who = "worker" if from_worker() else "dispatcher"
        if (key, JobsKeys.STATE) in keys:
            reads[who] = reads.get(who, 0) + 1
        if (key, JobsKeys.SPEC) in keys:  # the spec each plans or runs by
            reads[f"{who} spec"] = reads.get(f"{who} spec", 0) + 1

    stack.dynamodb.meta.events.register("provide-client-params.dynamodb.BatchGetItem", count)
    return reads


def operate(stack: Stack, minutes: int) -> int:
    """``minutes`` of operation as deployed; the cursor moves made."""
    return run_minutes(stack, minutes)[0]


def instants(stack: Stack, key: str = HOURLY) -> list[tuple[str, RunStatus]]:
    return [(run.run_id, run.status) for run in stack.run_list(key)]


def hours(*numbers: int) -> list[str]:
    return [f"20270104T{hour:02d}0000Z" for hour in numbers]


def test_an_hourly_job_waits_on_one_wheel_slot_and_runs_every_instant_once(stack: Stack, clock: Clock) -> None:
    stack.register(job("hourly", "0 * * * *"))
    clock.set("2027-01-04T08:45:00Z")
    assert operate(stack, 20) == 1  # 08:52: 09:00 sent, the job placed on the wheel for 09:52
    item = state_item(stack)
    slot = wheel_slot(due_shard(HOURLY), 52)
    assert item[JobsKeys.WHEEL_SLOT] == slot and JobsKeys.DUE_SHARD not in item
    assert item[JobsKeys.NEXT_VISIT_AT] == "2027-01-04T09:52:00Z"
    state_reads = count_state_reads(stack)
    assert operate(stack, 4 * 60) == 4  # one visit a run, each found on the same slot
    assert state_item(stack)[JobsKeys.WHEEL_SLOT] == slot
    # Its STATE item read twice a run: by the visit that finds it on the wheel (the audit mark read with it, not
    # again to plan) and by the worker's batch. Its spec by neither: each keeps the spec of the version the STATE
    # item names from its first read (the dispatcher read it at each visit before, the worker at each run: 8 reads).
    assert state_reads == {"dispatcher": 4, "worker": 4}, state_reads
    assert instants(stack) == [(run_id, RunStatus.SUCCEEDED) for run_id in hours(9, 10, 11, 12, 13)]
    assert len(stack.lambdas.executions("echo")) == 5


def test_after_an_outage_longer_than_the_wheels_hour_every_slot_is_read(stack: Stack, clock: Clock) -> None:
    """No tick for 2 h 30 min: the next reads all sixty minutes of each shard, and the catch-up policy (default:
    the latest missed instant runs, the others are recorded MISSED) accounts for every instant."""
    stack.register(job("hourly", "0 * * * *"))
    clock.set("2027-01-04T08:45:00Z")
    operate(stack, 20)  # 09:00 sent; on the wheel for 09:52
    clock.set("2027-01-04T09:30:00Z")
    stack.pump()  # 09:00 runs
    clock.set("2027-01-04T12:00:00Z")  # the dispatcher was down: 10:00 and 11:00 were never sent
    operate(stack, 60)
    found = dict(instants(stack))
    assert found[hours(9)[0]] is RunStatus.SUCCEEDED
    assert set(found) >= set(hours(9, 10, 11, 12))  # every instant has its record
    assert all(status in (RunStatus.SUCCEEDED, RunStatus.MISSED) for status in found.values())
    executions = stack.lambdas.executions("echo")
    assert len(executions) == len(set(executions))  # none twice


def test_a_visit_that_fails_holds_its_minute_and_is_read_again_the_next_tick(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.register(job("hourly", "0 * * * *"))
    clock.set("2027-01-04T08:45:00Z")
    operate(stack, 20)  # on the wheel for 09:52
    clock.set("2027-01-04T09:51:00Z")
    finish = Dispatcher._finish
    failures: list[str] = []

    def failing_once(self: Dispatcher, plan: Any, now: Any, report: Any) -> None:
        if not failures:
            failures.append(plan.stored.key)
            raise RuntimeError("DynamoDB throttled the cursor write")
        finish(self, plan, now, report)

    monkeypatch.setattr(Dispatcher, "_finish", failing_once)
    report = stack.tick()  # 09:51 reads through 09:53: 10:00 sent, its cursor write fails
    assert failures == [HOURLY] and report.job_errors == 1 and report.advanced == 0
    shard = due_shard(HOURLY)
    assert stack.jobs.wheel_marks()[shard] == parse_instant("2027-01-04T09:51:00Z")  # held before 09:52
    clock.advance(MINUTE)
    assert stack.tick().advanced == 1  # read again, sent again (a duplicate the worker drops), advanced
    assert stack.jobs.wheel_marks()[shard] == parse_instant("2027-01-04T09:54:00Z")
    clock.set("2027-01-04T10:05:00Z")
    stack.pump()
    assert instants(stack) == [(run_id, RunStatus.SUCCEEDED) for run_id in hours(9, 10)]
    assert len(stack.lambdas.executions("echo")) == 2


def test_a_paused_job_leaves_the_wheel_and_a_resumed_one_is_found_on_the_due_index(stack: Stack, clock: Clock) -> None:
    stack.register(job("hourly", "0 * * * *"))
    clock.set("2027-01-04T08:45:00Z")
    operate(stack, 20)
    pause_job(stack.jobs, HOURLY, now=clock(), principal="test", reason="maintenance")
    assert JobsKeys.WHEEL_SLOT not in state_item(stack)
    assert stack.jobs.wheel(wheel_slot(due_shard(HOURLY), 52)) == []
    clock.set("2027-01-04T10:30:00Z")
    resume_job(stack.jobs, HOURLY, now=clock(), principal="test")
    item = state_item(stack)
    assert JobsKeys.DUE_SHARD in item and JobsKeys.WHEEL_SLOT not in item
    operate(stack, 60)  # 11:00 sent from the due index, then back on the wheel
    assert state_item(stack)[JobsKeys.WHEEL_SLOT] == wheel_slot(due_shard(HOURLY), 52)
    assert [run_id for run_id, _ in instants(stack)] == hours(9, 11)


def test_a_daily_job_stays_on_the_due_index(stack: Stack, clock: Clock) -> None:
    """Twenty-four reads of its slot a day would cost more than the two index writes its visit makes."""
    stack.register(job("daily", "0 9 * * *"))
    clock.set("2027-01-04T08:45:00Z")
    operate(stack, 20)
    item = state_item(stack, "payments/daily")
    assert JobsKeys.WHEEL_SLOT not in item and JobsKeys.DUE_SHARD in item


def test_a_dispatcher_that_stops_reading_the_wheel_is_paged_as_stalled(stack: Stack, clock: Clock) -> None:
    """Wheel jobs are on no due index: the heartbeat checker reads the slots a stale mark left unread, and a job
    due on them is overdue; with none due there, nothing is (an idle wheel pages nobody)."""
    stack.register(job("hourly", "0 * * * *"))
    clock.set("2027-01-04T08:45:00Z")
    operate(stack, 20)  # the last tick at 09:04: the job waits on the wheel for 09:52
    stack.escalations()
    checker = heartbeat_checker(stack.runs, stack.worker)
    clock.set("2027-01-04T09:30:00Z")  # no tick since, but nothing due yet
    assert checker.check(clock()).overdue_jobs == 0
    clock.set("2027-01-04T10:00:00Z")  # 09:52 passed unread
    assert checker.check(clock()).overdue_jobs == 1
    [event] = [event for event in stack.escalations() if event["kind"] == "dispatcher_stalled"]
    assert event["count"] == 1 and "2027-01-04T09:52:00Z" in event["error"]
