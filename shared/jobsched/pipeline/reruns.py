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

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.records import JobNotFound, StoredJob
from jobsched.core.run_records import Run
from jobsched.core.runs import TERMINAL, RunStatus, TaskStatus
from jobsched.dag.definition import descendants, graph_from_values, graph_of
from jobsched.ports import JobsPort, RunsPort, TaskRunsPort, WorkQueuesPort

NEVER_RAN = frozenset({RunStatus.MISSED, RunStatus.SKIPPED})  # what a backfill without a status filter reruns


class RunNotFound(LookupError):
    pass


class RunInFlight(Exception):
    """The run has not finished: it cannot be run again until it has (409)."""


class RerunRefused(Exception):
    """The run may not be rerun as asked (409): SUCCEEDED without force."""


class RerunUnsupported(ValueError):
    """A rerun asked for what this run cannot do (422): ``from_failure`` or ``tasks`` of a job without a DAG,
    or ``tasks`` naming no task of the DAG; ``field`` is the request's field at fault."""

    def __init__(self, message: str, field: str = "tasks") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class TaskSelection:
    """What a DAG run's re-execution runs again: the failed tasks and what depends on them (``from_failure``),
    or named ``tasks`` (with their ``downstream`` tasks); neither: every task."""

    from_failure: bool = False
    tasks: tuple[str, ...] = ()
    downstream: bool = False

    @property
    def partial(self) -> bool:
        return self.from_failure or bool(self.tasks)


def rerun_run(
    jobs: JobsPort,
    runs: TaskRunsPort,
    queues: WorkQueuesPort,
    job: str,
    run_id: str,
    *,
    now: datetime,
    principal: str,
    force: bool = False,
    downstream: bool = False,
    selection: TaskSelection = TaskSelection(),
) -> Run:
    """Run a finished run again with its own instant; returns the run as reopened (RETRYING). ``downstream``:
    when this rerun finishes, the runs of the same instant of the jobs after it run again too (and theirs).
    A DAG run is re-executed: a new execution runs ``selection``'s tasks again and keeps the others' outcomes
    and outputs (with ``selection.tasks``, ``downstream`` means the named tasks' downstream tasks)."""
    stored = jobs.get(job)
    if stored is None:
        raise JobNotFound(job)
    run = runs.get(job, run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id} of {job}")
    check_rerunnable(stored, run, force=force or selection.partial)
    again = tasks_to_rerun(stored, run, selection, runs) if stored.spec.dag is not None else None
    if again is None and selection.partial:
        field = "from_failure" if selection.from_failure else "tasks"
        raise RerunUnsupported(f"{stored.key} is not a DAG job: {field} applies to DAG runs", field)
    downstream_jobs = downstream and not selection.tasks
    what = "" if again is None else f" of tasks {', '.join(sorted(again))}" if selection.partial else " of every task"
    reason = f"rerun{what} requested by {principal}" + (" with its downstreams" if downstream else "")
    reopened = reopen_and_send(
        stored, run, runs, queues, now=now, reason=reason, downstream=downstream_jobs, rerun_tasks=again
    )
    details: dict[str, Any] = {
        "run_id": run_id,
        "attempt": reopened.attempt + 1,
        "was": run.status.value,
        "force": force,
        "downstream": downstream,
    }
    if again is not None:
        details |= {"from_failure": selection.from_failure, "tasks": sorted(again)}
    jobs.record_action(job, version=stored.version, now=now, principal=principal, action="rerun", details=details)
    return reopened


def tasks_to_rerun(stored: StoredJob, run: Run, selection: TaskSelection, runs: TaskRunsPort) -> list[str]:
    """The tasks a DAG run's re-execution runs again. The job's DAG must still be the run's: a new execution
    runs today's state machine, and tasks added or removed since would not match the run's records."""
    assert stored.spec.dag is not None
    graph = graph_of(stored.spec.dag)
    if run.graph is None or graph_from_values(run.graph) != graph:
        raise RerunRefused(f"{run.job}'s DAG changed since run {run.run_id}: trigger a new run instead")
    if selection.tasks:
        unknown = sorted(set(selection.tasks) - set(graph))
        if unknown:
            raise RerunUnsupported(f"no task {', '.join(unknown)} in {run.job}; its tasks: {', '.join(graph)}")
        named = set(selection.tasks)
        again = descendants(graph, named) if selection.downstream else named
    elif selection.from_failure:
        if run.status is RunStatus.SUCCEEDED:
            raise RerunRefused(f"{run.job} {run.run_id} SUCCEEDED: no task failed (name tasks to run again)")
        statuses = {name: state.status for name, state in runs.tasks(run.job, run.run_id).items()}
        failed = {name for name in graph if statuses.get(name) is not TaskStatus.SUCCEEDED}
        again = descendants(graph, failed)
    else:
        again = set(graph)
    return [name for name in graph if name in again]


def check_rerunnable(stored: StoredJob, run: Run, *, force: bool) -> None:
    """A run that ended may be rerun (FAILED, TIMED_OUT, MISSED, SKIPPED, CANCELLED); SUCCEEDED only with
    ``force`` (or a DAG run's named tasks); one still in flight (SCHEDULED, RUNNING, RETRYING) not at all."""
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
    rerun_tasks: list[str] | None = None,
) -> Run:
    """Steps 1-3 above, for one run whose status was read as ``run.status``. A DAG run is re-executed: by
    default every task of the job's DAG as it is now."""
    if rerun_tasks is None and stored.spec.dag is not None:
        rerun_tasks = [task.name for task in stored.spec.dag.tasks]
    reopened = runs.reopen(
        run.job,
        run.run_id,
        expected_status=run.status,
        attempt=run.attempt,
        now=now,
        retention=stored.spec.run_retention,
        reason=f"{reason} (attempt {run.attempt} was {run.status.value})",
        downstream=downstream,
        rerun_tasks=rerun_tasks,
    )
    message = reopened.to_message(attempt=reopened.attempt + 1, fire_at=now)
    queues.send(stored.spec.priority, [(message, timedelta(0))])
    runs.clear_wake(run.job, run.run_id, attempt=reopened.attempt)
    return reopened
