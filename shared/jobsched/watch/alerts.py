"""What the pipeline tells the escalation handler: a run failed, timed out, missed its deadline, or
succeeded while its job has an open incident. One event each; the handler pages once per incident."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from jobsched.core.records import Run
from jobsched.core.runs import RunStatus, instant_text
from jobsched.core.spec import JobSpec
from jobsched.ports import EscalationsPort, JobsPort
from jobsched.watch.escalation import EscalationEvent


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
            EscalationEvent(
                kind=kind,
                subject=run.job,
                occurred_at=instant_text(self.clock()),
                team=run.team,
                job=run.job,
                run_id=run.run_id,
                scheduled_at=instant_text(run.scheduled_at),
                attempt=run.attempt,
                error=run.error,
                lateness_seconds=run.lateness_ms / 1000 if run.lateness_ms is not None else None,
                detail=summary,
            )
        )

    def succeeded(self, before: Run, finished: Run, spec: JobSpec) -> None:
        """After a success: report a deadline it missed, and resolve the job's open incidents (if it has any:
        one eventually consistent read, so healthy jobs send no event)."""
        missed = self._check_deadline(before, spec)
        if not self.jobs.open_incidents(finished.job):
            return
        self.publish(
            EscalationEvent(
                kind="run_succeeded",
                subject=finished.job,
                occurred_at=instant_text(self.clock()),
                team=finished.team,
                job=finished.job,
                run_id=finished.run_id,
                scheduled_at=instant_text(finished.scheduled_at),
                attempt=finished.attempt,
                on_time=not missed,
            )
        )

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
    return EscalationEvent(
        kind="deadline_missed",
        subject=run.job,
        occurred_at=instant_text(now),
        team=run.team,
        job=run.job,
        run_id=run.run_id,
        scheduled_at=instant_text(run.scheduled_at),
        lateness_seconds=round((now - run.scheduled_at - spec.deadline).total_seconds(), 3),
        detail=f"not SUCCEEDED within its deadline of {spec.deadline} after {instant_text(run.scheduled_at)}"
        + f" (status {run.status.value})",
    )
