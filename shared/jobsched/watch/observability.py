"""Logger and tracer for every handler, made in one place, and the metrics a run or an escalation emits.

Metrics are defined in ``jobsched.watch.signals`` (names, units, exact dimension sets) and printed as EMF by
its ``emit``. Dimensions are bounded: team, priority, outcome, destination. Job and run ids go into
structured logs (and the runs table), never into dimensions.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from jobsched.core.messages import AuditMessage, DagTaskFailure, DagTaskMessage
from jobsched.core.traces import trace_id
from jobsched.watch.signals import NAMESPACE, emit

if TYPE_CHECKING:
    from jobsched.core.messages import WorkMessage
    from jobsched.core.outcome import Outcome
    from jobsched.core.run_records import Run

__all__ = [
    "NAMESPACE",
    "emit_escalation",
    "emit_event_received",
    "emit_run_outcome",
    "make_logger",
    "make_tracer",
    "run_finished",
    "run_retried",
]


RUN_LOG = logging.getLogger("jobsched.runs")


def run_kind(run: Run) -> str:
    """How the run's work ran: a DAG, work started outside (a container's task), or an attempt the worker ran."""
    if run.graph is not None:
        return "dag"
    if run.work:
        return "container"
    return "attempt"


def make_logger(service: str) -> Logger:
    return Logger(service=f"jobsched-{service}")


def make_tracer(service: str) -> Tracer:
    return Tracer(service=f"jobsched-{service}")


def trace_annotations(message: Any) -> dict[str, str]:
    """What a record's X-Ray subsegment is annotated with: the run's trace (``core.traces``), job and run id."""
    job, run_id, scheduled_at = (getattr(message, name, None) for name in ("job", "run_id", "scheduled_at"))
    if not (job and run_id and scheduled_at):
        return {}
    return {
        "jobsched_trace": trace_id(str(job), str(run_id), str(scheduled_at)),
        "job": str(job),
        "run_id": str(run_id),
    }


def emit_run_outcome(
    *, team: str, priority: str, action: str, lateness_seconds: float | None, started_by_event: bool = False
) -> None:
    """One data point per processed run message: the SLIs success rate, lateness, duplicates, retries. A run
    started by an event has no scheduled instant to be late for: its lateness is its event-to-start latency."""
    emit("RunOutcome", 1, team=team, priority=priority, outcome=action)
    # The same count by outcome alone: alarms cannot sum across teams, the SLO alarms read this one.
    emit("RunsByOutcome", 1, outcome=action)
    if lateness_seconds is not None and started_by_event:
        emit("EventStartLatencySeconds", lateness_seconds)
    elif lateness_seconds is not None:
        emit("FireLatenessSeconds", lateness_seconds, priority=priority)


def message_keys(message: WorkMessage | DagTaskFailure) -> dict[str, Any]:
    """The keys a run message's log lines carry: its job, team and run, its task, its attempt and correlation."""
    keys: dict[str, Any] = {"job": message.job, "team": message.team, "run_id": message.run_id}
    if isinstance(message, DagTaskMessage | DagTaskFailure):
        keys["task"] = message.task
    if not isinstance(message, DagTaskFailure):
        keys |= {"attempt": message.attempt, "correlation_id": message.correlation_id or message.run_id}
    return keys


def run_message_handled(logger: Logger, message: WorkMessage | DagTaskFailure, outcome: Outcome) -> None:
    """A run message's SLIs (``emit_run_outcome``) and its "run message" log line. An audit message is no run's
    outcome: it is logged only (a lost instant it found is counted as ``LostRunMessages`` where it is found)."""
    if isinstance(message, AuditMessage):
        logger.info("audit message", extra={"outcome": outcome.action, "detail": outcome.detail})
        return
    lateness = outcome.lateness.total_seconds() if outcome.lateness is not None else None
    emit_run_outcome(
        team=message.team,
        priority=outcome.priority,
        action=outcome.action,
        lateness_seconds=lateness,
        started_by_event=getattr(message, "trigger", None) == "event",
    )
    logger.info("run message", extra={"outcome": outcome.action, "detail": outcome.detail, "lateness_s": lateness})


def emit_event_received(action: str, *, reason: str | None = None, matched: bool = False) -> None:
    """One event off the intake queue and what became of it (``jobsched.pipeline.intake.Received``)."""
    emit("EventsReceived", 1)
    if matched:
        emit("EventsMatched", 1)
    if action in ("duplicate", "resent"):
        emit("EventsDeduplicated", 1)
    elif action == "dropped":
        emit("EventsDropped", 1, reason=reason or "unknown")


def wait_ended(kind: str, waited: timedelta) -> None:
    """Waits for data: one begun, met (with how long it took) or timed out (alarmed: WaitTimeouts)."""
    if kind == "begun":
        emit("WaitsBegun", 1)
        return
    emit("WaitSeconds", waited.total_seconds())
    if kind == "timed_out":
        emit("WaitTimeouts", 1)


def emit_escalation(*, team: str, kind: str, pages: int, paused: bool) -> None:
    """Escalation SLIs: events by kind (timeouts, missed instants, deadline misses, circuits) and the pages
    they caused, so "100 failures, 1 page" is visible on the dashboard."""
    emit("EscalationEvents", 1, team=team, outcome=kind)
    emit("Pages", pages, outcome=kind)
    if paused:
        emit("AutoPauses", 1, team=team)


def run_finished(run: Run) -> None:
    """M1 and M3: the run reached its terminal status (told once, by the runs store), and its log line: the one
    line every run's end has, whoever ended it (the worker, a DAG's last task, a container's state change, a
    callback, the heartbeat checker, a cancel)."""
    emit("RunsFinished", 1, outcome=run.status.value.lower())
    took = (run.finished_at - run.started_at).total_seconds() if run.started_at and run.finished_at else None
    fields = {
        "run_id": run.run_id,
        "job": run.job,
        "team": run.team,
        "status": run.status.value,
        "attempt": run.attempt,
        "kind": run_kind(run),
        "took_s": round(took, 3) if took is not None else None,
        "lateness_s": run.lateness_ms / 1000 if run.lateness_ms is not None else None,
        "error": (run.error or run.reason or "")[:300] or None,
    }
    RUN_LOG.info("run finished", extra=fields)
    for check in run.checks or ():
        if not check.get("passed"):
            emit("ChecksFailed", 1, severity=str(check.get("severity")))
    if run.started_at is not None and run.finished_at is not None:
        emit("RunDurationSeconds", max(0.0, (run.finished_at - run.started_at).total_seconds()))


def run_retried(run: Run) -> None:
    """M4: an attempt failed and another one is planned."""
    emit("RunsRetried", 1)
