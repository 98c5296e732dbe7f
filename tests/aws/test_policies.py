"""Overlap policies, max_running, team quotas, retries and their delays, catch-up, pause."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobsched.core.runs import RunStatus
from jobsched.pipeline.worker import heartbeat_checker
from jobsched.registry.jobs import pause_job, resume_job
from tests.aws.harness import Clock, Stack

MINUTE = timedelta(minutes=1)


def callback_job(name: str, overlap: str, max_running: int = 1, expression: str = "* * * * *") -> dict[str, Any]:
    """A job whose runs stay RUNNING until completed: a long run, for overlap tests."""
    return {
        "name": name,
        "team": "ops",
        "schedule": {"expression": expression},
        "target": {"type": "callback", "timeout": "1h"},
        "concurrency": {"max_running": max_running, "overlap": overlap},
    }


def echo_job(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "team": "ops",
        "schedule": {"expression": "* * * * *"},
        "target": {"type": "lambda", "function": "echo"},
    }


def statuses(stack: Stack, job: str) -> list[tuple[str, str]]:
    return [(r.run_id[9:13], r.status.value) for r in stack.run_list(job)]


def complete(stack: Stack, clock: Clock, job: str, run_id: str) -> None:
    """What the callback API (issue #4) does: finish the run. Its slot is freed lazily: the next run's
    acquire sees that the holder's run has ended and evicts it in the same write."""
    run = stack.runs.get(job, run_id)
    assert run is not None
    stack.runs.finish(job, run_id, attempt=run.attempt, status=RunStatus.SUCCEEDED, now=clock())


def test_overlap_skip_records_skipped_runs_with_the_reason(stack: Stack, clock: Clock) -> None:
    stack.register(callback_job("long", "skip"))
    stack.minutes(3)
    assert statuses(stack, "ops/long") == [("0900", "RUNNING"), ("0901", "SKIPPED"), ("0902", "SKIPPED")]
    skipped = stack.runs.get("ops/long", "20270104T090100Z")
    assert skipped is not None and skipped.reason == "overlap: skip (still running: 20270104T090000Z)"
    complete(stack, clock, "ops/long", "20270104T090000Z")
    stack.minutes(1)
    assert statuses(stack, "ops/long")[-1] == ("0903", "RUNNING")


def test_overlap_queue_waits_and_runs_when_the_slot_frees(stack: Stack, clock: Clock) -> None:
    stack.register(callback_job("queued", "queue"))
    stack.minutes(2)
    # The waiting run is visible: a SCHEDULED record saying why and since when (#14).
    assert statuses(stack, "ops/queued") == [("0900", "RUNNING"), ("0901", "SCHEDULED")]
    waiting = stack.runs.get("ops/queued", "20270104T090100Z")
    assert (
        waiting is not None
        and waiting.reason == "waiting since 2027-01-04T09:01:00Z: max_running 1 reached (20270104T090000Z)"
    )
    assert {m.run_id for m in stack.pending()} >= {"20270104T090100Z"}, "the waiting run's message is kept"
    assert all(m.waiting_since for m in stack.pending() if m.run_id == "20270104T090100Z"), "written once"
    complete(stack, clock, "ops/queued", "20270104T090000Z")
    clock.advance(timedelta(seconds=30))
    stack.pump()
    assert statuses(stack, "ops/queued") == [("0900", "SUCCEEDED"), ("0901", "RUNNING")]
    started = stack.runs.get("ops/queued", "20270104T090100Z")
    assert started is not None and started.reason is None and started.lateness_ms == 30_000  # it waited 30 s


def test_max_running_two_with_allow(stack: Stack, clock: Clock) -> None:
    stack.register(callback_job("pair", "allow", max_running=2))
    stack.minutes(3)
    assert statuses(stack, "ops/pair") == [("0900", "RUNNING"), ("0901", "RUNNING"), ("0902", "SCHEDULED")]
    assert len(stack.jobs.slot_holders("ops/pair", "STATE")) == 2


def test_overlap_replace_cancels_the_running_run_and_refuses_its_late_result(stack: Stack, clock: Clock) -> None:
    stack.register(callback_job("fresh", "replace"))
    stack.minutes(2)
    assert statuses(stack, "ops/fresh") == [("0900", "CANCELLED"), ("0901", "RUNNING")]
    from jobsched.core.run_records import StaleAttempt

    try:
        stack.runs.finish("ops/fresh", "20270104T090000Z", attempt=1, status=RunStatus.SUCCEEDED, now=clock())
        raise AssertionError("a cancelled run accepted a late result")
    except StaleAttempt:
        pass
    assert stack.jobs.slot_holders("ops/fresh", "STATE").keys() == {"20270104T090100Z"}


def test_team_quota_holds_runs_back_and_never_drops_them(stack: Stack, clock: Clock) -> None:
    stack.jobs.set_team_limits("ops", {"max_running": 1})
    clock.set("2027-01-04T09:59:30Z")
    stack.register(callback_job("first", "allow", max_running=5, expression="0 * * * *"))
    stack.register(callback_job("second", "allow", max_running=5, expression="0 * * * *"))
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    running = sorted(s for job in ("ops/first", "ops/second") for s in statuses(stack, job))
    assert running == [("1000", "RUNNING"), ("1000", "SCHEDULED")], "the held run is visible, waiting"
    waiting = [m.job for m in stack.pending()]
    assert len(waiting) == 1
    first_ran = statuses(stack, "ops/first") == [("1000", "RUNNING")]
    complete(stack, clock, "ops/first" if first_ran else "ops/second", "20270104T100000Z")
    team_key = "TEAM#ops"
    holder = next(iter(stack.jobs.slot_holders(team_key, "QUOTA")))
    stack.jobs.release_slot(team_key, "QUOTA", holder=holder)
    clock.advance(timedelta(seconds=30))
    stack.pump()
    both = sorted(s for job in ("ops/first", "ops/second") for s in statuses(stack, job))
    assert both == [("1000", "RUNNING"), ("1000", "SUCCEEDED")]


def test_retries_follow_the_backoff_bounds_then_fail_and_escalate(stack: Stack, clock: Clock) -> None:
    stack.lambdas.functions["broken"] = lambda event: (_ for _ in ()).throw(RuntimeError("database down"))
    clock.set("2027-01-04T09:59:30Z")
    stack.register(
        {
            "name": "doomed",
            "team": "ops",
            "owner": "ops@example.com",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "broken"},
            "retry": {
                "max_attempts": 4,
                "backoff": {"initial": "10s", "multiplier": 3, "max": "60s", "jitter": "full"},
            },
            "escalation": {"sns_topic": "arn:aws:sns:us-east-1:123456789012:ops"},
        }
    )
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    for _ in range(10):
        stack.pump()
        clock.advance(timedelta(seconds=20))
    [run] = stack.run_list("ops/doomed")
    assert run.status is RunStatus.FAILED and run.attempt == 4 and "database down" in (run.error or "")
    retry_delays = [delay for key, delay in stack.queues.requested_delays if not key.endswith("#1")]
    # full jitter: attempt n waits within [1s, min(max, initial * multiplier^(n-1))]
    assert len(retry_delays) == 3
    for delay, ceiling in zip(retry_delays, (10, 30, 60), strict=True):
        assert 1 <= delay <= ceiling
    [event] = stack.escalations()
    assert event["kind"] == "run_failed" and event["attempt"] == 4 and event["subject"] == event["job"]
    assert "database down" in event["error"]  # where it goes is the escalation handler's (test_escalation.py)


def test_a_retry_longer_than_sqs_can_delay_comes_back_through_the_wakeups_index(stack: Stack, clock: Clock) -> None:
    calls: list[int] = []

    def once_broken(event: dict[str, Any]) -> str:
        calls.append(event["jobsched"]["attempt"])
        if len(calls) == 1:
            raise RuntimeError("try again later")
        return "ok"

    stack.lambdas.functions["slow-retry"] = once_broken
    clock.set("2027-01-04T09:59:30Z")
    stack.register(
        {
            "name": "patient",
            "team": "ops",
            "schedule": {"expression": "0 9 * * *"},
            "target": {"type": "lambda", "function": "slow-retry"},
            "retry": {"max_attempts": 2, "backoff": {"initial": "2h", "max": "2h", "jitter": "none"}},
        }
    )
    clock.set("2027-01-05T08:59:30Z")
    stack.tick()
    clock.set("2027-01-05T09:00:00Z")
    stack.pump()
    [run] = stack.run_list("ops/patient")
    assert run.status is RunStatus.RETRYING and run.next_attempt_at is not None
    assert stack.pending() == [], "nothing parked on SQS for two hours"
    wake = stack.dynamodb.scan(TableName=stack.runs_table, IndexName="wakeups")["Items"]
    assert [item["wake_at"]["S"] for item in wake] == ["2027-01-05T11:00:00Z"]
    clock.set("2027-01-05T10:50:00Z")
    assert stack.tick().retries_woken == 1
    clock.set("2027-01-05T11:00:00Z")
    stack.pump()
    [run] = stack.run_list("ops/patient")
    assert run.status is RunStatus.SUCCEEDED and run.attempt == 2 and calls == [1, 2]
    assert stack.dynamodb.scan(TableName=stack.runs_table, IndexName="wakeups")["Items"] == []


def test_catch_up_after_a_three_hour_outage_is_bounded(stack: Stack, clock: Clock) -> None:
    clock.set("2027-01-04T08:59:00Z")
    stack.register(
        {
            "name": "quarter",
            "team": "ops",
            "schedule": {"expression": "*/15 * * * *", "catchup": {"policy": "all", "window": "1h", "max_runs": 2}},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    clock.set("2027-01-04T12:00:30Z")  # the dispatcher was down from 08:59 to 12:00
    report = stack.tick()
    stack.pump()
    runs = {r.run_id[9:13]: r for r in stack.run_list("ops/quarter")}
    ran = sorted(k for k, r in runs.items() if r.status is RunStatus.SUCCEEDED)
    assert ran == ["1130", "1145", "1200"], "two caught up within the window, then on time"
    missed = sorted(k for k, r in runs.items() if r.status is RunStatus.MISSED)
    before_window = ["0900", "0915", "0930", "0945", "1000", "1015", "1030", "1045"]
    assert missed == [*before_window, "1100", "1115"], "every instant that did not run is recorded MISSED"
    assert report.missed == 10
    assert "at most 2" in (runs["1115"].reason or "")
    assert "catch-up window (1:00:00)" in (runs["0915"].reason or ""), "outside the window: not even attempted"


def test_paused_jobs_are_not_read_and_resume_without_running_what_was_missed(stack: Stack, clock: Clock) -> None:
    stack.register(
        {
            "name": "pausable",
            "team": "ops",
            "schedule": {"expression": "* * * * *"},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    pause_job(stack.jobs, "ops/pausable", now=clock(), principal="alice", reason="maintenance")
    for _ in range(3):
        report = stack.tick()
        assert report.due_jobs == 0
        clock.advance(MINUTE)
        stack.pump()
    assert stack.run_list("ops/pausable") == []
    resume_job(stack.jobs, "ops/pausable", now=clock(), principal="alice")
    stack.minutes(2)
    # Resumed at 09:02: instants strictly after it run; nothing from the pause is caught up.
    assert [r.run_id[9:13] for r in stack.run_list("ops/pausable")] == ["0903", "0904"]
    trail = [(a["action"], a["principal"]) for a in stack.jobs.audit_trail("ops/pausable")]
    assert trail[0] == ("create", "test") and ("pause", "alice") in trail and ("resume", "alice") in trail


def test_pausing_stops_instants_already_sent(stack: Stack, clock: Clock) -> None:
    stack.register(
        {
            "name": "inflight",
            "team": "ops",
            "schedule": {"expression": "* * * * *"},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    stack.tick()  # sends 14 minutes ahead
    pause_job(stack.jobs, "ops/inflight", now=clock(), principal="alice", reason="bad data")
    clock.advance(timedelta(minutes=5))
    stack.pump()
    runs = stack.run_list("ops/inflight")
    assert runs and all(r.status is RunStatus.SKIPPED and "paused" in (r.reason or "") for r in runs)
    assert stack.lambdas.executions("echo") == []


def test_a_waiting_runs_deadline_applies_while_it_waits(stack: Stack, clock: Clock) -> None:
    """A run held back by max_running has its record, so its SLA deadline is reported while it waits."""

    stack.register(callback_job("slow", "queue") | {"deadline": "2m"})
    stack.minutes(2)  # 09:00 runs and holds the slot; 09:01 waits
    clock.advance(timedelta(minutes=2))
    report = heartbeat_checker(stack.runs, stack.worker).check(clock())
    assert report.deadline_misses >= 1
    late = [e for e in stack.escalations() if e["kind"] == "deadline_missed"]
    assert "20270104T090100Z" in {e.get("run_id") for e in late}


def test_a_run_waiting_when_its_job_is_paused_ends_skipped_with_the_reason(stack: Stack, clock: Clock) -> None:
    stack.register(callback_job("held", "queue"))
    stack.minutes(2)
    assert statuses(stack, "ops/held") == [("0900", "RUNNING"), ("0901", "SCHEDULED")]
    pause_job(stack.jobs, "ops/held", now=clock(), principal="test", reason="maintenance")
    clock.advance(timedelta(seconds=30))
    stack.pump()
    waited = stack.runs.get("ops/held", "20270104T090100Z")
    assert waited is not None and waited.status is RunStatus.SKIPPED
    assert waited.reason == "job paused: maintenance" and waited.finished_at is not None


def test_slots_are_released_lazily_one_write_per_run_and_never_while_the_holder_runs(
    stack: Stack, clock: Clock
) -> None:
    """Ending a run writes nothing to the slots; the next acquire evicts ended holders in the same write that
    takes the slot. A team full of ended holders admits the next run; a live holder is never evicted."""
    stack.register(echo_job("steady"))
    writes: list[str] = []

    def count(model: Any, params: Any, **_: Any) -> None:
        if model.name == "UpdateItem" and "slots." in params.get("UpdateExpression", ""):
            writes.append(params["Key"]["pk"]["S"])

    stack.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", count)
    stack.minutes(5)
    assert statuses(stack, "ops/steady") == [(f"090{m}", "SUCCEEDED") for m in range(5)]
    # One slot write per run for the job and one for the team: no release writes. (The team's first call is
    # refused before its slot map exists: a validation error, which consumes no capacity.)
    assert writes.count("ops/steady") == 5 and writes.count("TEAM#ops") == 5 + 1
    assert stack.jobs.slot_holders("ops/steady", "STATE").keys() == {"20270104T090400Z"}  # ended, left lazily
    assert stack.live_slot_holders("ops/steady", "STATE") == {}

    stack.jobs.set_team_limits("ops", {"max_running": 2})
    stack.register(callback_job("held", "allow", max_running=5))
    stack.minutes(3)  # two callback runs hold the team's two slots; the third waits
    held = statuses(stack, "ops/held")
    assert [status for _, status in held].count("RUNNING") == 2
    for run_id in [r.run_id for r in stack.run_list("ops/held") if r.status is RunStatus.RUNNING]:
        complete(stack, clock, "ops/held", run_id)
    stack.minutes(2)
    # The ended holders were evicted by the next acquires: new runs got the team's slots.
    assert [status for _, status in statuses(stack, "ops/held")].count("RUNNING") == 2
    assert len(stack.live_slot_holders("TEAM#ops", "QUOTA")) == 2
