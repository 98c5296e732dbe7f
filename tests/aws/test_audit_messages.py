"""A sparse job's sent instant is audited by a message on its work queue, not by a visit of the dispatcher of its
own (#51: that visit moved the job's cursor item and its due key twice more, three write units a run). The lost
instant is still found at its fire time + ``LOST_AFTER``, counted and paged once; a redelivered audit records
nothing twice; a changed job's instant is not the audit's to judge; a message that was only late still runs."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from jobsched.core.messages import AuditMessage
from jobsched.core.outcome import Outcome
from jobsched.core.run_records import LOST_PREFIX
from jobsched.core.runs import RunStatus
from jobsched.pipeline.lost_audit import LOST_AFTER
from jobsched.registry.jobs import pause_job
from tests.aws.harness import Clock, Stack
from tests.aws.test_lost_messages import take_message
from tests.aws.test_pipeline import job

MINUTE = timedelta(minutes=1)


def operate(stack: Stack, minutes: int, *, deliveries: int = 1) -> tuple[int, list[Outcome]]:
    """``minutes`` of operation as deployed (a tick a minute); the visits that moved a cursor, and the audits'
    outcomes."""
    advanced, audits = 0, []
    for _ in range(minutes):
        advanced += stack.tick().advanced
        stack.clock.advance(MINUTE)

        def heard(message: Any, outcome: Outcome) -> None:
            if isinstance(message, AuditMessage):
                audits.append(outcome)

        stack.pump(deliveries=deliveries, on_outcome=heard)
    return advanced, audits


def audits_queued(stack: Stack) -> list[dict[str, Any]]:
    stack.pending()
    bodies = [json.loads(raw["Body"]) for raw in stack._held["normal"].values()]
    return [body for body in bodies if body.get("kind") == "audit"]


def test_a_daily_jobs_lost_message_is_found_by_its_audit_the_same_day_with_no_visit_of_its_own(
    stack: Stack, clock: Clock
) -> None:
    stack.register(job("daily", "5 9 * * *"))
    clock.set("2027-01-04T09:04:00Z")
    assert stack.tick().audits_sent == 1  # the visit at 09:04 sends 09:05's run message and its audit
    [audit] = audits_queued(stack)
    assert audit["run"]["run_id"] == "20270104T090500Z" and audit["priority"] == "normal"
    assert stack.queues.not_before[json.dumps(audit, separators=(",", ":"))] == clock() + 15 * MINUTE
    take_message(stack, "20270104T090500Z")
    advanced, audits = operate(stack, 40)
    [run] = stack.run_list("payments/daily")
    assert run.status is RunStatus.MISSED and (run.reason or "").startswith(LOST_PREFIX)
    assert run.finished_at is not None and run.finished_at - run.fire_at <= LOST_AFTER + MINUTE
    assert advanced == 0  # no visit of its own: the next is tomorrow's
    assert [outcome.action for outcome in audits] == ["waiting", "lost"]  # looked at 09:19, judged at 09:20
    state = stack.jobs.get_state("payments/daily")
    assert state is not None and state.next_visit_at is not None and state.next_visit_at.day == 5
    [event] = [event for event in stack.escalations() if event["kind"] == "missed_schedule"]
    assert event["run_id"] == "20270104T090500Z" and event["count"] == 1 and "message was lost" in event["error"]


def test_an_hourly_jobs_runs_cost_one_visit_each_with_quick_audits_as_deployed(stack: Stack, clock: Clock) -> None:
    """With its class quiet the dispatcher audits quickly: for an hourly job that was a second visit a run."""
    stack.dispatcher.backlogs = stack.queues
    stack.register(job("hourly", "0 * * * *"))
    clock.set("2027-01-04T08:45:00Z")
    advanced, audits = operate(stack, 3 * 60)
    runs = stack.run_list("payments/hourly")
    assert [run.run_id for run in runs] == [f"20270104T{hour:02d}0000Z" for hour in (9, 10, 11)]
    assert all(run.status is RunStatus.SUCCEEDED for run in runs)
    assert advanced == 3  # one visit a run (four and more before: one to send, one or more to audit)
    assert [outcome.action for outcome in audits] == ["audited"] * 3


def test_a_redelivered_audit_records_the_lost_instant_once_and_pages_once(stack: Stack, clock: Clock) -> None:
    stack.register(job("daily", "5 9 * * *"))
    clock.set("2027-01-04T09:04:00Z")
    stack.tick()
    take_message(stack, "20270104T090500Z")
    _, audits = operate(stack, 30, deliveries=2)  # SQS delivers at least once
    actions = [outcome.action for outcome in audits]
    assert actions.count("lost") == 1 and set(actions) == {"waiting", "lost", "audited"}  # the rest find its record
    [run] = stack.run_list("payments/daily")
    assert run.status is RunStatus.MISSED
    assert len([event for event in stack.escalations() if event["kind"] == "missed_schedule"]) == 1


def test_an_audit_judges_nothing_for_a_job_paused_since_its_instant_was_sent(stack: Stack, clock: Clock) -> None:
    stack.register(job("daily", "5 9 * * *"))
    clock.set("2027-01-04T09:04:00Z")
    stack.tick()
    take_message(stack, "20270104T090500Z")
    pause_job(stack.jobs, "payments/daily", now=clock(), principal="test", reason="maintenance")
    _, audits = operate(stack, 30)
    assert [outcome.action for outcome in audits] == ["waiting", "audited"]
    assert stack.run_list("payments/daily") == []
    assert not [event for event in stack.escalations() if event["kind"] == "missed_schedule"]


def test_a_run_message_only_late_still_runs_after_its_audit_recorded_it_lost(stack: Stack, clock: Clock) -> None:
    stack.register(job("daily", "5 9 * * *"))
    clock.set("2027-01-04T09:04:00Z")
    stack.tick()
    late = take_message(stack, "20270104T090500Z")
    operate(stack, 30)
    assert stack.run_list("payments/daily")[0].status is RunStatus.MISSED
    stack._held["normal"][late["MessageId"]] = late  # the workers were only that far behind
    stack.pump()
    [run] = stack.run_list("payments/daily")
    assert run.status is RunStatus.SUCCEEDED and run.attempt == 1 and run.reason is None


def test_an_audit_finds_the_record_a_healthy_run_wrote_and_the_next_visit_moves_the_mark(
    stack: Stack, clock: Clock
) -> None:
    stack.register(job("daily", "5 9 * * *"))
    clock.set("2027-01-04T09:04:00Z")
    _, audits = operate(stack, 30)
    assert [outcome.action for outcome in audits] == ["audited"]
    [run] = stack.run_list("payments/daily")
    assert run.status is RunStatus.SUCCEEDED
    clock.set("2027-01-05T09:04:00Z")
    operate(stack, 1)  # tomorrow's visit audits today's instant: it has its record
    state = stack.jobs.get_state("payments/daily")
    assert state is not None and state.audited_to is not None and state.audited_to >= run.fire_at
