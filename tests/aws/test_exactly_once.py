"""Exactly one run per (job, instant): concurrent dispatchers, redelivery, crashes between any two writes."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.run_records import StaleAttempt
from jobsched.core.runs import RunStatus
from jobsched.pipeline.dispatch import Dispatcher
from tests.aws.harness import Clock, Crash, Stack
from tests.aws.test_pipeline import job

MINUTE = timedelta(minutes=1)


def serialize_moto_calls(stack: Stack) -> None:
    """DynamoDB makes each conditional write atomic; moto in-process does not lock between threads.
    One lock per API call models the service faithfully: calls interleave, a single write never does."""
    lock = threading.RLock()
    for boto_client in (stack.dynamodb, stack.sqs):
        original = boto_client._make_api_call

        def locked(operation: str, params: Any, _original: Any = original) -> Any:
            with lock:
                return _original(operation, params)

        boto_client._make_api_call = locked


JOBS = 100


@pytest.mark.in_memory_queues
def test_eight_concurrent_dispatchers_over_100_due_jobs_make_one_run_per_instant(stack: Stack, clock: Clock) -> None:
    serialize_moto_calls(stack)
    # 100 jobs: each is raced by all eight; more only costs CI time (moto copies a table per transaction).
    clock.set("2027-01-04T09:59:00Z")
    for index in range(JOBS):
        stack.register(job(f"job-{index:03d}", "0 * * * *"))
    clock.set("2027-01-04T09:59:30Z")
    dispatchers = [Dispatcher(stack.jobs, stack.runs, stack.queues) for _ in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        reports = list(pool.map(lambda d: d.tick(clock()), dispatchers))
    assert sum(r.advanced for r in reports) == JOBS  # each job's cursor moved exactly once
    sent = sum(r.messages_sent for r in reports)
    assert sent >= JOBS
    clock.advance(MINUTE)
    stack.pump(rounds=50)
    runs = [run for index in range(JOBS) for run in stack.run_list(f"payments/job-{index:03d}")]
    assert len(runs) == JOBS and {r.run_id for r in runs} == {"20270104T100000Z"}
    assert all(r.status is RunStatus.SUCCEEDED for r in runs)
    executions = Counter(stack.lambdas.executions("echo"))
    assert len(executions) == JOBS and max(executions.values()) == 1, f"{sent} messages for {JOBS} instants"


def test_every_message_delivered_three_times_executes_once_per_attempt(stack: Stack, clock: Clock) -> None:
    stack.lambdas.functions["flaky"] = _flaky(failures=1)
    stack.register(job("flaky", "*/5 * * * *") | {"target": {"type": "lambda", "function": "flaky"}})
    for _ in range(12):
        stack.tick()
        clock.advance(MINUTE)
        stack.pump(deliveries=3)
    clock.advance(timedelta(minutes=30))
    stack.pump(deliveries=3)
    runs = stack.run_list("payments/flaky")
    assert [r.run_id for r in runs] == ["20270104T090000Z", "20270104T090500Z", "20270104T091000Z"]
    assert all(r.status is RunStatus.SUCCEEDED for r in runs)
    executions = Counter(stack.lambdas.executions("flaky"))
    assert max(executions.values()) == 1
    assert sorted(executions) == sorted((r.job, r.run_id, a) for r in runs for a in (1, 2))


@pytest.mark.parametrize("step", ["slots", "claim", "execute", "record", "retrying"])
def test_a_worker_crash_after_any_write_is_completed_by_redelivery(stack: Stack, clock: Clock, step: str) -> None:
    stack.lambdas.functions["flaky"] = _flaky(failures=1)
    clock.set("2027-01-04T09:59:30Z")
    stack.register(job("crashy", "0 * * * *") | {"target": {"type": "lambda", "function": "flaky"}})
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    crashed: list[str] = []

    def crash_once(at_step: str) -> None:
        if at_step == step and not crashed:
            crashed.append(at_step)
            raise Crash(at_step)

    stack.worker.after_step = crash_once
    stack.pump()
    # Redelivery after the visibility timeout; leases of a dead worker expire with time.
    for _ in range(6):
        clock.advance(timedelta(minutes=7))
        stack.pump()
    assert crashed == [step] and stack.crashes == 1
    [run] = stack.run_list("payments/crashy")
    assert run.status is RunStatus.SUCCEEDED
    executions = Counter(stack.lambdas.executions("flaky"))
    assert max(executions.values()) == 1, "no attempt executed twice"
    assert stack.live_slot_holders("payments/crashy", "STATE") == {}, "no slot leaked"


@pytest.mark.parametrize("step", ["send", "missed"])
def test_a_dispatcher_crash_after_any_write_duplicates_and_loses_nothing(stack: Stack, clock: Clock, step: str) -> None:
    stack.register(
        job("steady", "* * * * *") | {"schedule": {"expression": "* * * * *", "catchup": {"policy": "latest"}}}
    )
    clock.advance(timedelta(minutes=5))  # an outage until 09:04: 09:00 is missed, 09:01 caught up (latest)

    def crash(at_step: str, _job: str) -> None:
        if at_step == step:
            raise Crash(at_step)

    stack.dispatcher.after_step = crash
    with pytest.raises(Crash):
        stack.tick()
    stack.dispatcher.after_step = None
    stack.tick()  # the same decisions again: same run ids, conditional creates
    for _ in range(16):
        clock.advance(MINUTE)
        stack.tick()
        stack.pump()
    runs = stack.run_list("payments/steady")
    run_ids = [r.run_id for r in runs]
    assert run_ids == sorted(set(run_ids)) and run_ids[0] == "20270104T090000Z" and run_ids[-1] == "20270104T092000Z"
    assert len(run_ids) == 21, "every instant has exactly one run record"
    skipped = [r.run_id[9:13] for r in runs if r.status is RunStatus.MISSED]
    assert skipped == ["0900"]
    assert all(r.status is RunStatus.SUCCEEDED for r in runs if r.run_id[9:13] not in skipped)
    assert max(Counter(stack.lambdas.executions("echo")).values()) == 1


def test_an_old_attempts_late_result_is_refused(stack: Stack, clock: Clock) -> None:
    stack.lambdas.functions["flaky"] = _flaky(failures=1)
    clock.set("2027-01-04T09:59:30Z")
    stack.register(job("fenced", "0 * * * *") | {"target": {"type": "lambda", "function": "flaky"}})
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    clock.advance(timedelta(minutes=5))
    stack.pump()
    [run] = stack.run_list("payments/fenced")
    assert run.status is RunStatus.SUCCEEDED and run.attempt == 2
    with pytest.raises(StaleAttempt):
        stack.runs.finish(run.job, run.run_id, attempt=1, status=RunStatus.FAILED, now=clock(), error="late")
    assert stack.runs.get(run.job, run.run_id) == run


def _flaky(failures: int) -> Any:
    """A function that fails the first ``failures`` attempts of each run id, then succeeds."""
    seen: Counter[str] = Counter()

    def handler(event: dict[str, Any]) -> dict[str, Any]:
        run_id = event["jobsched"]["run_id"]
        seen[run_id] += 1
        if seen[run_id] <= failures:
            raise RuntimeError(f"flaky failure {seen[run_id]} of {run_id}")
        return {"ok": run_id}

    return handler


def test_an_attempt_recorded_twice_is_told_apart_from_a_superseded_one(stack: Stack, clock: Clock) -> None:
    """M5's tripwire: the claim makes two executions of one attempt impossible, so if a second result of
    the same attempt ever arrives after the run ended at that attempt, it is counted as
    duplicate_execution (alarmed), not as an ordinary superseded result."""
    from jobsched.core.run_records import TargetResult

    clock.set("2027-01-04T09:59:30Z")
    stack.register(job("once", "0 * * * *"))
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    [outcome] = stack.pump()
    assert outcome.action == "succeeded" and outcome.run is not None
    stored = stack.jobs.get("payments/once")
    assert stored is not None
    claimed = replace(outcome.run, status=RunStatus.RUNNING)
    again = stack.worker.records.result(claimed.to_message(), stored, claimed, TargetResult("succeeded"), timedelta(0))
    assert again.action == "duplicate_execution" and "ran twice" in again.detail
    later = replace(claimed, attempt=2)  # a result of an attempt the run never ended at: superseded
    assert stack.worker.records.result(
        later.to_message(), stored, later, TargetResult("succeeded"), timedelta(0)
    ).action == ("superseded")
