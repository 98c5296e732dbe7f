"""A run's ends from outside (``ends``): a callback's or a container's result, a heartbeat with what the
attempt reported, a cancel; and the time-out of an attempt whose lease ran out (the heartbeat checker's).

Each goes through the same recording as a target's own result (``recording.Records``), fenced by the attempt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from jobsched.core.durations import format_duration
from jobsched.core.names import JobsKeys
from jobsched.core.outcome import Outcome
from jobsched.core.records import StoredJob
from jobsched.core.run_records import Progress, ProgressReport, Run, StaleAttempt, TargetResult
from jobsched.core.runs import TERMINAL, RunStatus
from jobsched.core.spec import CONTAINER_TARGETS, JobSpec
from jobsched.pipeline.attempts import judge
from jobsched.pipeline.containers import reconcile, stop_started_task
from jobsched.pipeline.decisions import lease_until
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.recording import Records
from jobsched.ports import ContainersPort, JobsPort, RunsPort

ENDED = ("succeeded", "failed")  # outcomes that end a run, freeing its slots
CANCELLED_BY_REQUEST = "cancelled by request"


@dataclass(frozen=True)
class RunEnds:
    jobs: JobsPort
    runs: RunsPort
    records: Records
    containers: ContainersPort | None
    stop_dag: Callable[[Run, JobSpec, str], None]  # a DAG run's execution stopped with it
    clock: Callable[[], datetime]

    def complete(self, ref: AttemptRef, reported: Reported) -> Run:
        """A callback's or a container's result: the same outcome rules as a target's (retry, fail, escalate,
        release)."""
        stored, run = self._running(ref)
        failed = TargetResult("failed", error=reported.error, retryable=reported.retryable)
        # A callback's output passes the job's checks like a target's answer (containers have none: refused at PUT).
        succeeded = TargetResult("succeeded", output=reported.output)
        result = judge(succeeded, stored.spec.checks) if reported.succeeded else failed
        lateness = (run.started_at or self.clock()) - run.fire_at
        outcome = self.records.result(run.to_message(), stored, run, result, lateness)
        if outcome.action == "superseded" or outcome.run is None:
            raise StaleAttempt(outcome.detail or f"{ref.job} {ref.run_id} attempt {ref.attempt} is no longer running")
        if outcome.action in ENDED:  # long runs (callbacks, containers): whether others wait is not known here
            self.records.wake_next(stored.spec.team)
        return outcome.run

    def heartbeat(self, ref: AttemptRef, report: ProgressReport | None = None) -> Run:
        """A callback or container attempt is alive, with what it reported (progress, a checkpoint its run's
        next attempt resumes from). A callback's lease moves on by its heartbeat timeout (or target timeout); a
        container's never does (its timeout counts from its start), so a task that heartbeats forever still
        times out."""
        stored, run = self._running(ref)
        now = self.clock()  # once: the lease and the slot's expiry judgement use the same instant
        progress = report.at(now, run.attempt) if report is not None else None
        if isinstance(stored.spec.target, CONTAINER_TARGETS):
            return self.runs.heartbeat(
                run.job,
                run.run_id,
                attempt=run.attempt,
                lease_until=None,
                progress=progress or Progress(now, run.attempt),
            )
        lease = lease_until(stored.spec, now)
        updated = self.runs.heartbeat(run.job, run.run_id, attempt=run.attempt, lease_until=lease, progress=progress)
        self.jobs.acquire_slot(
            run.job,
            JobsKeys.STATE,
            holder=run.run_id,
            lease_until=lease,
            limit=stored.spec.concurrency.max_running,
            now=now,
            attempt=run.attempt,
        )
        return updated

    def stop(self, ref: AttemptRef, cause: str = CANCELLED_BY_REQUEST) -> Run:
        """Cancel a run that has not finished (its work stopped: a container's task, a DAG's execution);
        StaleAttempt if it already has."""
        run = self.runs.get(ref.job, ref.run_id)
        stored = self.jobs.get(ref.job)
        if run is None or run.status in TERMINAL or (ref.attempt is not None and run.attempt != ref.attempt):
            raise StaleAttempt(f"{ref.job} {ref.run_id} is not running")
        cancelled = self.runs.finish(
            run.job,
            run.run_id,
            attempt=run.attempt,
            status=RunStatus.CANCELLED,
            now=self.clock(),
            error=cause,
            from_status=run.status,
        )
        if stored is not None and stored.spec.dag is not None:
            self.stop_dag(cancelled, stored.spec, cause)
        if stored is not None and isinstance(stored.spec.target, CONTAINER_TARGETS):
            stop_started_task(self.containers, run, "jobsched: cancelled")
        if stored is not None and run.status is RunStatus.RUNNING:
            self.records.wake_next(stored.spec.team)
        return cancelled

    def stop_holders(self, job: str) -> list[Run]:
        """Cancel every run of ``job`` that holds a running slot (a pause with --cancel-running), as a cancel of
        each would. A run that finishes meanwhile is left as it finished."""
        cancelled = []
        for run_id in sorted(self.jobs.slot_holders(job, JobsKeys.STATE)):
            try:
                cancelled.append(self.stop(AttemptRef(job, run_id)))
            except StaleAttempt:
                continue
        return cancelled

    def time_out(self, run: Run) -> Outcome:
        """A waiting run whose lease ran out (no heartbeat or result in time): retried by policy, or
        TIMED_OUT with an escalation. Reports from the timed-out attempt are refused by its fencing."""
        now = self.clock()
        stored = self.jobs.get(run.job)
        if stored is None or run.status is not RunStatus.RUNNING or not run.lease_until or run.lease_until > now:
            return Outcome("duplicate", "not an expired lease")
        if self.containers is not None and isinstance(stored.spec.target, CONTAINER_TARGETS):
            timeout = format_duration(stored.spec.target.timeout)
            reason = f"jobsched: the run timed out after {timeout}"
            result = reconcile(run, stored.spec.target, self.containers, reason=reason)
            if result is not None:  # it stopped and its state change never came: recorded as that would have been
                return self.records.result(run.to_message(), stored, run, result, None)
        return self.records.lost_attempt(run, run.to_message(), stored, now)

    def _running(self, ref: AttemptRef) -> tuple[StoredJob, Run]:
        stored = self.jobs.get(ref.job)
        run = self.runs.get(ref.job, ref.run_id)
        moved_on = run is not None and ref.attempt is not None and run.attempt != ref.attempt
        if stored is None or run is None or run.status is not RunStatus.RUNNING or moved_on:
            state = f"{run.status.value} at attempt {run.attempt}" if run else "unknown"
            raise StaleAttempt(f"{ref.job} {ref.run_id} attempt {ref.attempt} is not running (run is {state})")
        return stored, run
