"""Reruns: an instant run again with its own date (Airflow's clear, ``kubectl create job --from``).

A rerun keeps the run id and ``scheduled_at``: the target sees the original instant. It is a new attempt,
fenced like any attempt, so late results of the old one stay refused. Order of writes, and what a crash
between them leaves:
1. the run record: finished -> RETRYING at its attempt, due now, on the wakeups index (``RunsPort.reopen``,
   conditional on the status and attempt read: of two concurrent reruns one wins, the other gets 409);
2. the next attempt's message; a crash before it is covered by the wakeups index: the dispatcher's next
   tick sends it;
3. off the wakeups index (a crash before leaves one more message, which the claim turns into a no-op).
The retry policy counts attempts again from the rerun (``Run.policy_attempt``): a rerun gets its retries.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from jobsched.core.records import JobNotFound, Run, StoredJob
from jobsched.core.runs import TERMINAL, RunStatus
from jobsched.ports import JobsPort, RunsPort, WorkQueuesPort

NEVER_RAN = frozenset({RunStatus.MISSED, RunStatus.SKIPPED})  # what a backfill without a status filter reruns


class RunNotFound(LookupError):
    pass


class RunInFlight(Exception):
    """The run has not finished: it cannot be run again until it has (409)."""


class RerunRefused(Exception):
    """The run may not be rerun as asked (409): SUCCEEDED without force."""


class RerunUnsupported(ValueError):
    """DAG runs are not rerun: their task records belong to the execution that ran (422)."""


def rerun_run(
    jobs: JobsPort,
    runs: RunsPort,
    queues: WorkQueuesPort,
    job: str,
    run_id: str,
    *,
    now: datetime,
    principal: str,
    force: bool = False,
    downstream: bool = False,
) -> Run:
    """Run a finished run again with its own instant; returns the run as reopened (RETRYING). ``downstream``:
    when this rerun finishes, the runs of the same instant of the jobs after it run again too (and theirs)."""
    stored = jobs.get(job)
    if stored is None:
        raise JobNotFound(job)
    run = runs.get(job, run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id} of {job}")
    check_rerunnable(stored, run, force=force)
    reason = f"rerun requested by {principal}" + (" with its downstreams" if downstream else "")
    reopened = reopen_and_send(stored, run, runs, queues, now=now, reason=reason, downstream=downstream)
    details = {
        "run_id": run_id,
        "attempt": reopened.attempt + 1,
        "was": run.status.value,
        "force": force,
        "downstream": downstream,
    }
    jobs.record_action(job, version=stored.version, now=now, principal=principal, action="rerun", details=details)
    return reopened


def check_rerunnable(stored: StoredJob, run: Run, *, force: bool) -> None:
    """A run that ended may be rerun (FAILED, TIMED_OUT, MISSED, SKIPPED, CANCELLED); SUCCEEDED only with
    ``force``; one still in flight (SCHEDULED, RUNNING, RETRYING) not at all."""
    if stored.spec.dag is not None:
        raise RerunUnsupported(f"{stored.key} is a DAG job: run it again with a trigger or a backfill")
    if run.status not in TERMINAL:
        raise RunInFlight(f"{run.job} {run.run_id} is {run.status.value}: wait until it finishes, or cancel it")
    if run.status is RunStatus.SUCCEEDED and not force:
        raise RerunRefused(f"{run.job} {run.run_id} SUCCEEDED; rerun it anyway with force")


def reopen_and_send(
    stored: StoredJob,
    run: Run,
    runs: RunsPort,
    queues: WorkQueuesPort,
    *,
    now: datetime,
    reason: str,
    downstream: bool = False,
) -> Run:
    """Steps 1-3 above, for one run whose status was read as ``run.status``."""
    reopened = runs.reopen(
        run.job,
        run.run_id,
        expected_status=run.status,
        attempt=run.attempt,
        now=now,
        retention=stored.spec.run_retention,
        reason=f"{reason} (attempt {run.attempt} was {run.status.value})",
        downstream=downstream,
    )
    message = reopened.to_message(attempt=reopened.attempt + 1, fire_at=now)
    queues.send(stored.spec.priority, [(message, timedelta(0))])
    runs.clear_wake(run.job, run.run_id, attempt=reopened.attempt)
    return reopened
