"""Recovery after the work queues' contents were lost, with the tables intact.

SQS in AWS does not lose messages; the local runtime's queues live in the moto process and are gone after
a restart, a crash or ``kill -9``. Everything needed to rebuild them is in the tables:
- every job's dispatch goes back to its audit mark (``audited_to``: every instant up to it has a run
  record), so the dispatcher decides again every instant it had sent ahead: each one runs, is caught up
  by the job's catch-up policy or is recorded MISSED with the reason; instants whose run record exists
  are dropped by the worker's conditional create as duplicates;
- every unfinished run gets its message again: a run waiting for a slot, a retry due within the 15
  minutes SQS can delay (longer ones come back from the wake index), a DAG run whose execution must be
  started again. A plain run that was executing when the process died has its lease ended first (its
  worker is gone), so the worker counts that attempt lost and retries it or times it out. Callback runs
  keep their lease: their result comes from outside, and the heartbeat checker watches the lease.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.core.run_records import Run, StaleAttempt
from jobsched.core.runs import RunMessage, RunStatus, instant_text
from jobsched.core.spec import EXTERNAL_TARGETS, JobSpec
from jobsched.pipeline.worker import Worker
from jobsched.ports import JobsPort
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.fires import next_fire


@dataclass
class RecoveryReport:
    rewound: int = 0  # jobs whose dispatch went back to their audit mark
    resent: int = 0  # unfinished runs whose message was sent again
    leases_ended: int = 0  # plain runs whose worker died with the process


def recover_lost_queues(
    worker: Worker, *, job_keys: Iterable[str], unfinished: Iterable[Run], now: datetime
) -> RecoveryReport:
    """``job_keys``: every job; ``unfinished``: every run not yet terminal (the caller has read the tables)."""
    report = RecoveryReport()
    for key in job_keys:
        if _rewind(worker.jobs, key):
            report.rewound += 1
    unfinished = list(unfinished)
    specs = worker.jobs.get_many(sorted({run.job for run in unfinished}))
    for run in unfinished:
        stored = specs.get(run.job)
        if stored is not None:
            _restart(worker, run, stored.spec, now, report)
    return report


def _restart(worker: Worker, run: Run, spec: JobSpec, now: datetime, report: RecoveryReport) -> None:
    """Put an unfinished run's next step back on its queue: the claim and the fencing keep it to one."""
    message: RunMessage | None = None
    if run.status is RunStatus.SCHEDULED:
        message = run.to_message(attempt=1).model_copy(update={"waiting_since": instant_text(now)})
    elif run.status is RunStatus.WAITING:
        message = run.to_message(attempt=1)  # its wait goes on from its record: checked, then polled again
    elif run.status is RunStatus.RETRYING:
        report.resent += worker.send_retry(run.to_message(), spec, run)
    elif run.status is RunStatus.RUNNING and spec.dag is not None:
        message = run.to_message()  # the worker starts its execution again (same name: harmless if alive)
    elif run.status is RunStatus.RUNNING and not isinstance(spec.target, EXTERNAL_TARGETS):
        try:
            worker.runs.end_lease(run.job, run.run_id, attempt=run.attempt, now=now)
        except StaleAttempt:
            return  # it finished meanwhile
        report.leases_ended += 1
        message = run.to_message()
    if message is not None:
        worker.queues.send(spec.priority, [(message, timedelta(0))])
        report.resent += 1


def _rewind(jobs: JobsPort, key: str) -> bool:
    """Dispatch of an active job restarts after its audit mark."""
    stored = jobs.get(key)
    state = jobs.get_state(key)
    if stored is None or state is None or stored.state != "ACTIVE" or stored.spec.schedule is None:
        return False
    if state.next_visit_at is None or state.audited_to is None or state.audited_to >= state.cursor:
        return False
    mark, cursor = state.audited_to, state.cursor
    return jobs.advance(
        key,
        spec_version=state.spec_version,
        old_cursor=cursor,
        cursor=mark,
        next_visit_at=next_fire(stored, mark, CompanySettings.read(jobs)),
        audited_to=mark,
    )
