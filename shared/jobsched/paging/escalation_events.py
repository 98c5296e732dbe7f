"""The events of the page path: what the pipeline, the dispatcher and the heartbeat checker tell the escalation
handler (a run failed, timed out, missed its deadline, succeeded while its job has an open incident, a circuit
opened...). One event each; the handler pages once per incident (``paging.rules``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from jobsched.core.checks import CheckResult
from jobsched.core.checks import warned as warned_checks
from jobsched.core.records import IncidentClass
from jobsched.core.run_records import Run
from jobsched.core.runs import RunStatus, instant_text
from jobsched.core.spec import JobSpec
from jobsched.ports import EscalationsPort, JobsPort

SYSTEM = "SYSTEM"  # the subject of events about the scheduler itself
EventKind = Literal[
    "run_failed",
    "run_timed_out",
    "missed_schedule",
    "deadline_missed",
    "circuit_open",
    "dispatcher_stalled",
    "job_quarantined",
    "run_succeeded",
    "circuit_closed",
    "dispatcher_recovered",
    "checks_warned",
    "approval_requested",
    "approval_decided",
    "job_stale",  # no successful run by the job's freshness deadline (or within its max age)
    "job_fresh",  # a success made a stale job fresh again
    "run_anomalous",  # a run far outside the job's learned baseline (the job asked to be paged for it)
    "run_usual",  # a later run within the baseline again
    "budget_warning",  # a team's (or a job's) month-to-date cost crossed a warning threshold of its budget
    "budget_exceeded",  # ... its hard threshold: non-critical jobs paused until an admin resumes them
    "resolved_by_hand",  # a person resolved an open incident (``incident_class``), with a reason (``detail``)
]


class EscalationEvent(BaseModel):
    """What producers put on the escalation queue."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: EventKind
    subject: str  # "team/name", "TARGET#<target>" or "SYSTEM"
    occurred_at: str
    team: str | None = None
    job: str | None = None
    run_id: str | None = None
    scheduled_at: str | None = None
    attempt: int | None = None
    error: str | None = None
    lateness_seconds: float | None = None
    on_time: bool | None = None  # run_succeeded: within its deadline (resolves a ``late`` incident)
    warned: bool | None = None  # run_succeeded: a warning check failed (the ``quality`` incident stays open)
    target: str | None = None
    count: int = 1  # missed_schedule: instants missed; dispatcher_stalled: overdue jobs
    detail: str | None = None
    incident_class: IncidentClass | None = None  # resolved_by_hand: which incident

    @classmethod
    def about_run(cls, kind: EventKind, run: Run, now: datetime, **details: Any) -> EscalationEvent:
        """An event about one run: its job is the subject, and the run names itself (job, run id, instant)."""
        return cls(
            kind=kind,
            subject=run.job,
            occurred_at=instant_text(now),
            team=run.team,
            job=run.job,
            run_id=run.run_id,
            scheduled_at=instant_text(run.scheduled_at),
            **details,
        )

    @property
    def event_id(self) -> str:
        return ":".join(str(part) for part in (self.kind, self.subject, self.run_id, self.attempt, self.scheduled_at))

    def resolves(self) -> tuple[IncidentClass, ...]:
        if self.kind == "run_succeeded":
            resolved: tuple[IncidentClass, ...] = ("failing", "late") if self.on_time is not False else ("failing",)
            return resolved if self.warned else (*resolved, "quality")
        if self.kind == "circuit_closed":
            return ("circuit",)
        if self.kind == "dispatcher_recovered":
            return ("dispatcher",)
        if self.kind == "approval_decided":
            return ("approval",)
        if self.kind == "job_fresh":
            return ("stale",)
        if self.kind == "run_usual":
            return ("anomaly",)
        if self.kind == "resolved_by_hand" and self.incident_class is not None:
            return (self.incident_class,)
        return ()


@dataclass
class Alerts:
    escalations: EscalationsPort
    jobs: JobsPort  # open incidents: a success resolves them only if there are any
    clock: Callable[[], datetime]

    def publish(self, event: EscalationEvent) -> None:
        self.escalations.publish(event.model_dump(mode="json", exclude_none=True))

    def run_ended_badly(self, run: Run, summary: str) -> None:
        """A run failed or timed out."""
        kind: Literal["run_failed", "run_timed_out"] = (
            "run_timed_out" if run.status is RunStatus.TIMED_OUT else "run_failed"
        )
        self.publish(
            EscalationEvent.about_run(
                kind,
                run,
                self.clock(),
                attempt=run.attempt,
                error=run.error,
                lateness_seconds=run.lateness_ms / 1000 if run.lateness_ms is not None else None,
                detail=summary,
            )
        )

    def succeeded(
        self,
        before: Run,
        finished: Run,
        spec: JobSpec,
        *,
        open_incidents: set[str] | None = None,
        checks: Sequence[CheckResult] = (),
        already_warned: bool = False,
    ) -> None:
        """After a success: report a deadline it missed and warning checks that failed, and resolve the job's
        open incidents (if it has any: one eventually consistent read, so healthy jobs send no event;
        ``open_incidents`` when a worker batch read them before the run: one opened while it ran is resolved by
        the job's next success). A success with a failed warning check (``already_warned``: one a DAG task
        paged for) leaves its ``quality`` incident open."""
        missed = self._check_deadline(before, spec)
        warned = self.checks_warned(finished, checks) or already_warned
        incidents = open_incidents if open_incidents is not None else self.jobs.open_incidents(finished.job)
        if not incidents:
            return
        self.publish(
            EscalationEvent.about_run(
                "run_succeeded", finished, self.clock(), attempt=finished.attempt, on_time=not missed, warned=warned
            )
        )

    def approval_requested(self, run: Run, task: str, message: str) -> None:
        """A DAG run waits for a person: the team's channel is paged with the question and a link to the run."""
        detail = f"task {task} waits for approval" + (f": {message}" if message else "")
        self.publish(EscalationEvent.about_run("approval_requested", run, self.clock(), detail=detail[:1000]))

    def approval_decided(self, run: Run, task: str, decision: str) -> None:
        """Approved, rejected or timed out: the approval's page is resolved."""
        self.publish(
            EscalationEvent.about_run("approval_decided", run, self.clock(), detail=f"task {task}: {decision}")
        )

    def checks_warned(self, run: Run, checks: Sequence[CheckResult], *, task: str | None = None) -> bool:
        """Page at warning severity when warning checks failed (a ``quality`` incident); True if any did."""
        failed = warned_checks(checks)
        if not failed:
            return False
        where = f"task {task}: " if task else ""
        self.publish(
            EscalationEvent.about_run(
                "checks_warned",
                run,
                self.clock(),
                attempt=run.attempt,
                count=len(failed),
                error=(where + "; ".join(f"check {c.name}: {c.message}" for c in failed))[:1000],
                detail=f"{where}{len(failed)} warning check(s) failed",
            )
        )
        return True

    def _check_deadline(self, run: Run, spec: JobSpec) -> bool:
        """True if the run finished after its SLA deadline. Reported here unless the checker already did."""
        if spec.deadline is None:
            return False
        deadline = run.scheduled_at + spec.deadline
        now = self.clock()
        if now <= deadline:
            return False
        if run.deadline_at is not None:  # still on the index: the heartbeat checker has not reported it
            self.publish(deadline_event(run, spec, now))
        return True


def deadline_event(run: Run, spec: JobSpec, now: datetime) -> EscalationEvent:
    """One per run (its id has no attempt): the checker and the worker may both report it."""
    assert spec.deadline is not None
    return EscalationEvent.about_run(
        "deadline_missed",
        run,
        now,
        lateness_seconds=round((now - run.scheduled_at - spec.deadline).total_seconds(), 3),
        detail=f"not SUCCEEDED within its deadline of {spec.deadline} after {instant_text(run.scheduled_at)}"
        + f" (status {run.status.value})",
    )
