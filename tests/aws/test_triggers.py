"""Manual triggers (idempotency keys, payload override) and backfills (capped, deduped, progress)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.runs import RunStatus
from jobsched.pipeline.manual_runs import BackfillLimit, BackfillTooLarge, get_backfill, start_backfill, trigger_run
from tests.aws.harness import Clock, Stack, at


def register_hourly(stack: Stack) -> None:
    stack.register(
        {
            "name": "report",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "echo", "payload": {"kind": "scheduled"}},
            "concurrency": {"max_running": 1, "overlap": "skip"},
        }
    )


def test_trigger_now_with_a_payload_override(stack: Stack, clock: Clock) -> None:
    register_hourly(stack)
    run = trigger_run(
        stack.jobs, stack.runs, stack.queues, "ops/report", now=clock(), principal="alice", payload={"kind": "manual"}
    )
    assert run.status is RunStatus.SCHEDULED and run.trigger == "manual" and "-m-" in run.run_id
    stack.pump()
    done = stack.runs.get("ops/report", run.run_id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert stack.lambdas.calls[-1][1]["payload"] == {"kind": "manual"}


def test_the_same_idempotency_key_gives_the_same_run_once(stack: Stack, clock: Clock) -> None:
    register_hourly(stack)
    first = trigger_run(
        stack.jobs, stack.runs, stack.queues, "ops/report", now=clock(), principal="a", idempotency_key="k-1"
    )
    clock.advance(timedelta(seconds=5))
    again = trigger_run(
        stack.jobs, stack.runs, stack.queues, "ops/report", now=clock(), principal="a", idempotency_key="k-1"
    )
    other = trigger_run(
        stack.jobs, stack.runs, stack.queues, "ops/report", now=clock(), principal="a", idempotency_key="k-2"
    )
    assert first.run_id == again.run_id != other.run_id
    stack.pump()
    clock.advance(timedelta(minutes=1))
    stack.pump()
    late = trigger_run(
        stack.jobs, stack.runs, stack.queues, "ops/report", now=clock(), principal="a", idempotency_key="k-1"
    )
    assert late.run_id == first.run_id and late.status is RunStatus.SUCCEEDED
    stack.pump()
    executed = [run_id for _, run_id, _ in stack.lambdas.executions("echo")]
    assert executed.count(first.run_id) == 1 and executed.count(other.run_id) == 1


def test_backfill_runs_each_instant_once_capped_and_reports_progress(stack: Stack, clock: Clock) -> None:
    clock.set("2027-01-04T12:30:00Z")
    register_hourly(stack)
    stack.tick()
    clock.set("2027-01-04T13:00:00Z")
    stack.pump()  # 13:00 ran as scheduled
    progress = start_backfill(
        stack.jobs,
        "ops/report",
        start=at("2027-01-04T06:00:00Z"),
        end=at("2027-01-04T13:00:00Z"),
        max_in_flight=3,
        now=clock(),
        principal="alice",
    )
    assert progress.total == 8 and progress.state == "RUNNING"
    peak = 0
    for _ in range(10):
        stack.tick()
        current = get_backfill(stack.jobs, "ops/report", progress.backfill_id)
        peak = max(peak, len(current.in_flight))
        stack.pump()
        clock.advance(timedelta(minutes=1))
    final = get_backfill(stack.jobs, "ops/report", progress.backfill_id)
    assert final.state == "DONE" and final.sent == 8 and sum(final.finished.values()) == 8
    assert peak <= 3
    runs = {r.run_id[9:13]: r.status for r in stack.run_list("ops/report")}
    assert runs == {f"{h:02d}00": RunStatus.SUCCEEDED for h in range(6, 14)}
    executed = [run_id for _, run_id, _ in stack.lambdas.executions("echo")]
    assert executed.count("20270104T130000Z") == 1, "the backfilled instant that already ran is not run again"
    due = stack.dynamodb.scan(TableName=stack.jobs_table, IndexName="due")["Items"]
    assert not [item for item in due if item["sk"]["S"].startswith("BACKFILL#")], "the backfill left the index"
    waiting = due + stack.dynamodb.scan(TableName=stack.jobs_table, IndexName="wheel")["Items"]
    assert [item["pk"]["S"] for item in waiting] == ["ops/report"]  # the job itself: on the due index or the wheel


def test_backfill_refuses_an_unbounded_range(stack: Stack, clock: Clock) -> None:
    stack.register(
        {"name": "minutely", "team": "ops", "schedule": {"expression": "* * * * *"}, "target": {"type": "callback"}}
    )
    try:
        start_backfill(
            stack.jobs,
            "ops/minutely",
            start=at("2026-01-01T00:00:00Z"),
            end=at("2026-12-31T00:00:00Z"),
            max_in_flight=5,
            now=clock(),
            principal="alice",
        )
        raise AssertionError("a year of minutes was accepted")
    except BackfillTooLarge as error:
        assert "more than 10000 instants" in str(error)


def test_backfills_are_capped_per_job_and_per_team(stack: Stack, clock: Clock) -> None:
    """No team floods the work queues with backfills (#13): one running per job, five per team."""
    clock.set("2027-01-04T12:30:00Z")
    for index in range(7):
        stack.register(
            {
                "name": f"r{index}",
                "team": "ops",
                "schedule": {"expression": "0 * * * *"},
                "target": {"type": "lambda", "function": "echo"},
            }
        )
    stack.register(
        {"name": "other", "team": "billing", "schedule": {"expression": "0 * * * *"}, "target": {"type": "callback"}}
    )

    def backfill(job: str) -> str:
        return early_morning_backfill(stack, clock, job)

    first = backfill("ops/r0")
    with pytest.raises(BackfillLimit, match="ops/r0 already has a backfill running"):
        backfill("ops/r0")
    for index in range(1, 5):
        backfill(f"ops/r{index}")
    with pytest.raises(BackfillLimit, match="team ops already has 5 backfills running"):
        backfill("ops/r5")
    assert stack.jobs.slot_holders("ops/r5", "BACKFILLS") == {}, "the job's slot was given back"
    backfill("billing/other")  # another team is not held by ops's backfills

    for _ in range(10):  # the first backfill runs to its end (each run succeeds)
        stack.tick()
        stack.pump()
        clock.advance(timedelta(minutes=1))
    assert get_backfill(stack.jobs, "ops/r0", first).state == "DONE"
    backfill("ops/r5")  # its slots are free again


def test_an_error_in_one_backfill_leaves_the_others_advancing(stack: Stack, clock: Clock) -> None:
    clock.set("2027-01-04T12:30:00Z")
    for name in ("broken", "fine"):
        stack.register(
            {"name": name, "team": "ops", "schedule": {"expression": "0 * * * *"}, "target": {"type": "callback"}}
        )
    ids = {name: early_morning_backfill(stack, clock, f"ops/{name}") for name in ("broken", "fine")}
    original = stack.jobs.get_backfill

    def failing(job: str, backfill_id: str) -> Any:
        if job == "ops/broken":
            raise RuntimeError("a bug only this backfill triggers")
        return original(job, backfill_id)

    stack.jobs.get_backfill = failing  # type: ignore[method-assign]
    report = stack.tick()
    stack.jobs.get_backfill = original  # type: ignore[method-assign]
    assert report.job_errors == 1 and report.backfills_advanced == 1
    assert get_backfill(stack.jobs, "ops/fine", ids["fine"]).sent == 1


def early_morning_backfill(stack: Stack, clock: Clock, job: str) -> str:
    """A backfill of 06:00-08:00 on 2027-01-04, one run at a time; its id."""
    return start_backfill(
        stack.jobs,
        job,
        start=at("2027-01-04T06:00:00Z"),
        end=at("2027-01-04T08:00:00Z"),
        max_in_flight=1,
        now=clock(),
        principal="alice",
    ).backfill_id
