"""The worker's decisions, as pure functions over domain types: what a delivery means, when an attempt is
claimed, retried, recorded or timed out. ``pipeline.worker`` carries them out against the stores; these
read nothing and write nothing, so every branch is testable without a store or a clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from jobsched.core.durations import format_duration
from jobsched.core.records import StoredJob
from jobsched.core.run_records import LOST_PREFIX, Run, TargetResult
from jobsched.core.runs import LEASE_MARGIN, TERMINAL, RunMessage, RunStatus, attempts_left, parse_instant
from jobsched.core.spec import CONTAINER_TARGETS, EXTERNAL_TARGETS, CallbackTarget, JobSpec
from jobsched.dag.definition import run_budget


@dataclass(frozen=True)
class Verdict:
    action: str
    detail: str = ""


def target_of(spec: JobSpec) -> Any:
    if spec.target is None:
        raise ValueError(f"{spec.key} has no single target (DAG jobs are not registered, see jobs.put_job)")
    return spec.target


def is_external(spec: JobSpec) -> bool:
    """Runs whose result arrives from outside (callbacks, DAG executions) are watched through leases."""
    return spec.dag is not None or isinstance(spec.target, EXTERNAL_TARGETS)


def run_timeout(spec: JobSpec) -> timedelta:
    """How long one attempt may take: the DAG's whole budget, or the target's timeout (a callback's
    heartbeat timeout when shorter)."""
    if spec.dag is not None:
        return run_budget(spec)
    target = target_of(spec)
    timeout: timedelta = target.timeout
    if isinstance(target, CallbackTarget) and spec.heartbeat_timeout:
        return min(timeout, spec.heartbeat_timeout)
    return timeout


def lease_until(spec: JobSpec, start: datetime) -> datetime:
    """The one lease formula: an attempt started (or resumed, or waiting for a retry) at ``start`` holds
    its run and its slots until then; past it, the attempt is lost. A container's is its timeout exactly: no
    worker's life is at stake (the task runs apart), and the task is stopped when the timeout is reached."""
    if spec.dag is None and isinstance(spec.target, CONTAINER_TARGETS):
        return start + run_timeout(spec)
    return start + run_timeout(spec) + LEASE_MARGIN


def before_claim(message: RunMessage, stored: StoredJob) -> Verdict | None:
    """A delivery the job's state settles before any run is touched: paused, or replaced by a newer
    version. ``skip`` is recorded as a SKIPPED run; ``superseded`` leaves nothing (sent again if it still
    exists). None: go on to claim."""
    if message.trigger == "schedule" and stored.state == "PAUSED":
        # Instants sent before the pause are recorded, so the run history shows why they did not run.
        return Verdict("skip", f"job paused: {stored.paused_reason or 'no reason given'}")
    if message.trigger == "schedule" and message.attempt == 1 and stored.version > message.spec_version:
        if parse_instant(message.scheduled_at) > stored.updated_at:
            # Dispatch restarted under the new version and sends this instant again if it still exists.
            return Verdict("superseded", f"spec version {message.spec_version} replaced by {stored.version}")
        # At or before the change: not sent again, so recorded (a waiting record ends here too).
        # Retries (attempt > 1) of a run that started go on under the current spec.
        return Verdict("skip", f"superseded: version {message.spec_version} was replaced before it started")
    return None


def already_settled(existing: Run | None, message: RunMessage) -> bool:
    """A retry's delivery for a run that already ended or moved past this attempt."""
    return existing is not None and (existing.status in TERMINAL or existing.attempt >= message.attempt)


def claim_transition(existing: Run, message: RunMessage) -> Literal["first", "retry"] | None:
    """Which existing record this delivery may start: a first attempt waiting (SCHEDULED, WAITING) or recorded
    lost by the audit while its message was only late; or the next attempt of a RETRYING run."""
    if message.attempt == 1 and (
        existing.status in (RunStatus.SCHEDULED, RunStatus.WAITING)
        or (existing.status is RunStatus.MISSED and (existing.reason or "").startswith(LOST_PREFIX))
    ):
        return "first"
    if existing.status is RunStatus.RETRYING and existing.attempt == message.attempt - 1:
        return "retry"
    return None


def on_existing(existing: Run, message: RunMessage, spec: JobSpec, now: datetime) -> Verdict:
    """A message for a run that already exists: a duplicate, a crash to recover, or a retry to resend.

    ``resend_retry``: we failed this attempt before and the retry message may not have been sent;
    ``start_dag``: a crash may have come between the claim and the execution's start (starting again is
    harmless); ``in_flight``: keep this message as a watchdog until the other lease ends;
    ``recover``: the lease expired, the attempt is lost."""
    if existing.status in TERMINAL or existing.attempt > message.attempt:
        return Verdict("duplicate", f"run is {existing.status.value} at attempt {existing.attempt}")
    if existing.status is RunStatus.RETRYING and existing.attempt == message.attempt:
        return Verdict("resend_retry", "retry message re-sent")
    if existing.status is RunStatus.RUNNING and existing.attempt == message.attempt:
        if existing.lease_until and existing.lease_until > now:
            if spec.dag is not None:
                return Verdict("start_dag")
            if isinstance(target_of(spec), CONTAINER_TARGETS):
                # Its timeout watch (sent when the task started) came back early: wait for the timeout.
                return Verdict("in_flight", "a container's timeout watch")
            if isinstance(target_of(spec), EXTERNAL_TARGETS):
                return Verdict("duplicate", "its result comes from outside (a callback, a container)")
            return Verdict("in_flight", "attempt in flight elsewhere")
        return Verdict("recover")
    return Verdict("duplicate", f"run is {existing.status.value} at attempt {existing.attempt}")


def on_lost_attempt(spec: JobSpec, run: Run) -> tuple[bool, str]:
    """An attempt whose lease expired: (final, error). Final: TIMED_OUT (a DAG run's budget, or no
    attempts left); otherwise retried like any failure."""
    if spec.dag is not None:
        return True, f"DAG run still unfinished after its time budget ({run_budget(spec)})"
    return not attempts_left(spec.retry, run.policy_attempt), lost_attempt_error(spec, run)


def lost_attempt_error(spec: JobSpec, run: Run) -> str:
    """Why an attempt's lease ran out, in the words of what happened: a container or a callback that reached
    its timeout, a callback whose heartbeats stopped, or a worker that died mid-attempt."""
    target = spec.target
    if isinstance(target, CONTAINER_TARGETS):
        return f"timed out after {format_duration(target.timeout)}: the task was stopped"
    if isinstance(target, CallbackTarget):
        started = run.started_at
        if spec.heartbeat_timeout and started and run.lease_until and run.lease_until < started + target.timeout:
            return f"no heartbeat for {format_duration(spec.heartbeat_timeout)}: the attempt is taken as failed"
        return f"timed out after {format_duration(target.timeout)} with no result"
    return f"attempt {run.attempt} lost: no result before its lease expired (its worker stopped)"


def on_result(result: TargetResult, spec: JobSpec, attempt: int) -> Literal["pending", "succeeded", "retry", "fail"]:
    """A target's result: wait for the callback, record success, retry (retryable, attempts left), or fail.
    ``attempt`` as the retry policy counts it (``Run.policy_attempt``: a rerun starts again at 1)."""
    if result.outcome == "pending":
        return "pending"
    if result.outcome == "succeeded":
        return "succeeded"
    if result.retryable and attempts_left(spec.retry, attempt):
        return "retry"
    return "fail"


def ran_twice(stored: Run | None, attempt: int) -> bool:
    """Our result was refused and the run ended at this very attempt (not cancelled): the attempt was
    executed twice. The claim makes that impossible; it is counted apart, as a tripwire (M5)."""
    return (
        stored is not None
        and stored.attempt == attempt
        and stored.status in TERMINAL
        and stored.status is not RunStatus.CANCELLED
    )


def overlap_policy(message: RunMessage, spec: JobSpec) -> str:
    """What a run does when its job is at max_running. A backfill waits: skipping would silently leave
    holes in the range it was asked to fill."""
    return "queue" if message.trigger == "backfill" else spec.concurrency.overlap
