"""No silent gaps (#14): an instant the dispatcher sent whose message never reached a worker is found by the
audit (the schedule recomputed, the run records read), recorded MISSED with the reason, counted and paged
once per job; a message that was only late still runs."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from jobsched.core.run_records import LOST_PREFIX
from jobsched.core.runs import TERMINAL, RunStatus
from jobsched.pipeline.lost_audit import LOST_AFTER
from jobsched.pipeline.recovery import recover_lost_queues
from jobsched.registry.jobs import pause_job, resume_job
from tests.aws.harness import Clock, Crash, Stack
from tests.aws.test_exactly_once import _flaky
from tests.aws.test_pipeline import job

MINUTE = timedelta(minutes=1)


def take_message(stack: Stack, run_id: str) -> dict[str, Any]:
    """Remove a sent run message from the queue (as if SQS lost it); returns it."""
    stack.pending()
    held = stack._held["normal"]
    [message_id] = [key for key, raw in held.items() if json.loads(raw["Body"]).get("run_id") == run_id]
    return held.pop(message_id)


def lost_counts(stack: Stack, minutes: int) -> int:
    """Run ``minutes`` of normal operation; the number of instants the audit recorded lost."""
    lost = 0
    for _ in range(minutes):
        lost += stack.tick().lost
        stack.clock.advance(MINUTE)
        stack.pump()
    return lost


def test_a_deleted_run_message_is_recorded_missed_counted_and_paged_once(stack: Stack, clock: Clock) -> None:
    stack.register(job())
    stack.tick()  # 09:00..09:13 sent ahead, delayed to their instants
    take_message(stack, "20270104T090500Z")
    take_message(stack, "20270104T090600Z")
    stack.escalations()
    assert lost_counts(stack, 45) == 2
    runs = {run.run_id: run for run in stack.run_list("payments/hello")}
    assert len(runs) == 45
    lost = [run for run in runs.values() if run.status is RunStatus.MISSED]
    assert [run.run_id for run in lost] == ["20270104T090500Z", "20270104T090600Z"]
    assert all((run.reason or "").startswith(LOST_PREFIX) and "message was lost" in (run.reason or "") for run in lost)
    assert all(run.status is RunStatus.SUCCEEDED for run in runs.values() if run not in lost)
    # Found within the grace and a tick of the visit that audits it, not at some later sweep.
    assert lost[0].finished_at is not None and lost[0].finished_at - lost[0].fire_at <= LOST_AFTER + 13 * MINUTE
    events = [event for event in stack.escalations() if event["kind"] == "missed_schedule"]
    assert len(events) == 1 and events[0]["count"] == 2 and events[0]["run_id"] == "20270104T090500Z"
    assert "message was lost" in events[0]["error"]


def test_a_message_that_is_only_late_still_runs_after_the_audit_recorded_it_lost(stack: Stack, clock: Clock) -> None:
    stack.register(job())
    stack.tick()
    late = take_message(stack, "20270104T090200Z")
    lost_counts(stack, 30)
    [run] = [r for r in stack.run_list("payments/hello") if r.run_id == "20270104T090200Z"]
    assert run.status is RunStatus.MISSED
    stack._held["normal"][late["MessageId"]] = late  # the workers were only that far behind
    stack.pump()
    [run] = [r for r in stack.run_list("payments/hello") if r.run_id == "20270104T090200Z"]
    assert run.status is RunStatus.SUCCEEDED and run.attempt == 1 and run.reason is None
    assert run.lateness_ms is not None and run.lateness_ms >= 20 * 60_000
    assert [e for e in stack.lambdas.executions("echo") if e[1] == run.run_id] == [("payments/hello", run.run_id, 1)]


def test_healthy_waiting_and_paused_instants_are_never_called_lost(stack: Stack, clock: Clock) -> None:
    """Runs held back by max_running have waiting records; instants a pause kept from being sent are not
    the dispatcher's to account for; nothing healthy is flagged."""
    stack.register(job("steady"))
    slow = job("slow", "*/10 * * * *") | {"concurrency": {"max_running": 1, "overlap": "queue"}}
    slow["target"] = {"type": "callback", "timeout": "2h"}
    stack.register(slow)
    stack.register(job("paused"))
    assert lost_counts(stack, 5) == 0
    pause_job(stack.jobs, "payments/paused", now=clock(), principal="test", reason="maintenance")
    assert lost_counts(stack, 20) == 0
    resume_job(stack.jobs, "payments/paused", now=clock(), principal="test")
    assert lost_counts(stack, 35) == 0
    slow_runs = stack.run_list("payments/slow")
    assert {run.status for run in slow_runs} == {RunStatus.RUNNING, RunStatus.SCHEDULED}
    assert all(run.status is RunStatus.SUCCEEDED for run in stack.run_list("payments/steady"))
    assert not [e for e in stack.escalations() if e["kind"] == "missed_schedule"]


def test_queues_lost_with_the_tables_intact_are_rebuilt_and_every_instant_runs_once(stack: Stack, clock: Clock) -> None:
    """What the local runtime does after kill -9 (its queues die with moto): dispatch goes back to each job's
    audit mark, unfinished runs get their message again, a run whose worker died is retried."""
    stack.register(job())
    crashed: list[str] = []

    def boom(event: dict[str, Any]) -> dict[str, Any]:
        if not crashed:
            crashed.append(event["jobsched"]["run_id"])
            raise Crash("the process dies while the target runs")  # RUNNING, its lease in the future
        return {}

    stack.lambdas.functions["boom"] = boom
    stack.register(job("crashy", "*/5 * * * *") | {"target": {"type": "lambda", "function": "boom"}})
    stack.minutes(3)  # 09:00..09:02 run (crashy's 09:00 dies in flight); 09:03..09:13 sent ahead
    assert crashed == ["20270104T090000Z"] and stack.run_list("payments/crashy")[0].status is RunStatus.RUNNING
    stack._held.clear()  # the queues' contents are gone; the tables are not
    stack.pending()
    assert not stack._held["normal"]

    report = recover_lost_queues(
        stack.worker,
        job_keys=["payments/hello", "payments/crashy"],
        unfinished=[
            run
            for key in ("payments/hello", "payments/crashy")
            for run in stack.run_list(key)
            if run.status not in TERMINAL
        ],
        now=clock(),
    )
    assert report.rewound == 2 and report.leases_ended == 1 and report.resent == 1
    stack.minutes(20)
    hello = stack.run_list("payments/hello")
    assert [run.run_id for run in hello] == [f"20270104T09{m:02d}00Z" for m in range(23)]
    assert [run.status for run in hello] == [RunStatus.SUCCEEDED] * 23
    crashy = stack.run_list("payments/crashy")
    assert crashy[0].status is RunStatus.SUCCEEDED and crashy[0].attempt == 2
    # 09:05 may find 09:00's retry still holding the job's one slot: skipped by the overlap policy, as always.
    assert all(run.status is RunStatus.SUCCEEDED or "overlap" in (run.reason or "") for run in crashy[1:])
    assert len(crashy) == 5
    for function in ("echo", "boom"):
        executions = stack.lambdas.executions(function)
        assert len(executions) == len(set(executions))  # nothing executed twice at the same attempt


def test_a_spec_change_ends_waiting_runs_with_the_reason_and_lets_a_started_run_retry(
    stack: Stack, clock: Clock
) -> None:
    """Instants at or before a spec change are not sent again under the new version: a run waiting for a
    slot then ends SKIPPED with the reason instead of waiting forever; a run already retrying goes on."""
    stack.lambdas.functions["flaky"] = _flaky(failures=1)
    slow = job("slow") | {"concurrency": {"max_running": 1, "overlap": "queue"}}
    slow["target"] = {"type": "callback", "timeout": "2h"}
    stack.register(slow)
    retried = job("retried", "0 * * * *") | {"target": {"type": "lambda", "function": "flaky"}}
    retried["retry"] = {"max_attempts": 3, "backoff": {"initial": "5m", "max": "5m", "jitter": "none"}}
    clock.set("2027-01-04T09:59:00Z")
    stack.register(retried)
    stack.minutes(3)  # slow: 10:00 running, 10:01 waiting; retried: 10:00 failed once, retry at 10:05
    waiting = [run for run in stack.run_list("payments/slow") if run.status is RunStatus.SCHEDULED]
    assert waiting and stack.run_list("payments/retried")[0].status is RunStatus.RETRYING
    for document in (slow, retried):
        stack.register(document | {"description": "changed"})
    stack.minutes(10)
    after = {run.run_id: run for run in stack.run_list("payments/slow")}
    for run in waiting:
        assert after[run.run_id].status is RunStatus.SKIPPED
        assert "superseded: version 1 was replaced" in (after[run.run_id].reason or "")
    [run] = stack.run_list("payments/retried")
    assert run.status is RunStatus.SUCCEEDED and run.attempt == 2


def test_a_classes_backlog_counts_its_visible_messages_over_every_queue_and_never_delayed_ones(stack: Stack) -> None:
    """What the quick audit asks SQS (GetQueueAttributes): the messages waiting to be taken now."""
    from jobsched.adapters.aws.queues import WorkQueues
    from jobsched.core.runs import RunMessage, parse_instant

    queues = WorkQueues(stack.queue_urls, stack.sqs)
    at = parse_instant("2027-01-04T09:00:00Z")
    due = [
        (RunMessage.scheduled(job="ops/a", team="ops", at=at + n * MINUTE, fire_at=at, spec_version=1), timedelta(0))
        for n in range(3)
    ]
    later = (RunMessage.scheduled(job="ops/b", team="ops", at=at, fire_at=at, spec_version=1), timedelta(minutes=10))
    queues.send("normal", [*due, later])
    assert queues.backlog("normal") == 3  # the delayed one is not waiting yet
    assert queues.backlog("low") == 0
