"""The run's side of a task's end: parked tasks released, and the DAG run finished once every task has.

``advance`` runs after every recorded end of a task (not of one map item: its map task is judged once every
item has ended), and again on a redelivery (a crash may have come between the record and the advance). Both of
its writes are idempotent: a released task's message finds it claimed or recorded; the run's finish is
conditional on its attempt, so of two tasks ending at once one finishes the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.core.checks import CheckResult
from jobsched.core.messages import DagTaskMessage
from jobsched.core.outcome import Outcome
from jobsched.core.records import StoredJob
from jobsched.core.run_records import Run, StaleAttempt, TargetResult, TaskState
from jobsched.core.runs import RunStatus, TaskStatus, instant_text
from jobsched.core.spec import ApprovalTarget, JobSpec
from jobsched.dag.definition import Graph, decide, graph_from_values, run_result
from jobsched.paging.escalation_events import Alerts
from jobsched.pipeline.dag.recording import TaskRecords
from jobsched.pipeline.dag.turn import TaskTurn, statuses, task_of
from jobsched.ports import TaskRunsPort, WorkQueuesPort

MAX_RUN_CHECKS = 20  # failed task checks copied to a DAG run's record (each task's own are on its item)
REJECTED_BY = "rejected by "  # how an approval's rejection begins its error (approvals.decide writes it)


@dataclass(frozen=True)
class RunEnd:
    runs: TaskRunsPort
    queues: WorkQueuesPort
    alerts: Alerts
    clock: Callable[[], datetime]
    records: TaskRecords

    def task_ended(self, turn: TaskTurn, result: TargetResult) -> Outcome:
        """An attempt's outcome recorded and reported; once the task (not one map item) has ended, what waits on
        it is released and the run finishes if every task has."""
        outcome = self.records.outcome(turn, result)
        if outcome.action in ("succeeded", "failed") and not turn.is_item:
            self.advance(turn.run, turn.stored)
        return outcome

    def advance(self, run: Run, stored: StoredJob) -> None:
        """Release parked tasks that can now start; finish the run once every task has finished."""
        assert run.graph is not None
        graph = graph_from_values(run.graph)
        tasks = self.runs.tasks(run.job, run.run_id)
        now_statuses = statuses(tasks)
        released = [
            (released_message(run, state), timedelta(0))
            for name, state in tasks.items()
            if state.status is TaskStatus.WAITING and name in graph and decide(graph[name], now_statuses) != "wait"
        ]
        if released:
            self.queues.send(stored.spec.priority, released)
        result = run_result(graph, now_statuses)
        if result is not None:
            self._finish_run(run, stored, RunTasks(graph, tasks, result))

    def _finish_run(self, run: Run, stored: StoredJob, ended: RunTasks) -> None:
        graph, tasks, result = ended.graph, ended.tasks, ended.result
        counts: dict[str, int] = {}
        for state in (tasks[name] for name in graph if name in tasks):  # the tasks, not a map task's items
            counts[state.status.value.lower()] = counts.get(state.status.value.lower(), 0) + 1
        summary = f"{len(graph)} tasks: " + ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
        failing = next(
            (
                tasks[name]
                for name in graph
                if tasks[name].status in (TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.CANCELLED)
            ),
            None,
        )
        status = RunStatus.SUCCEEDED if result is TaskStatus.SUCCEEDED else RunStatus.FAILED
        failed_checks = tasks_failed_checks(graph, tasks)
        error = None
        if failing is not None:
            error = f"task {failing.name} {failing.status.value.lower()}: {failing.error or 'no detail'}"
        if failing is not None and rejected_quietly(stored.spec, failing):
            # A person decided the rest should not run: a decision, not a failure (#46). No page.
            status, error = RunStatus.CANCELLED, f"task {failing.name} {failing.error}"
        try:
            finished = self.runs.finish(
                run.job,
                run.run_id,
                attempt=run.attempt,
                status=status,
                now=self.clock(),
                output=summary,
                error=error,
                checks=failed_checks,
            )
        except StaleAttempt:
            return  # finished by a concurrent task or a redelivery
        if status is RunStatus.FAILED:
            self.alerts.run_ended_badly(finished, f"DAG run failed: {error}")
        elif status is RunStatus.SUCCEEDED:
            # Each task's warnings were paged as it finished: the run's success only keeps the incident open.
            warned = any(check.severity == "warn" for check in failed_checks)
            self.alerts.succeeded(run, finished, stored.spec, already_warned=warned)


@dataclass(frozen=True)
class RunTasks:
    """A run's graph and its task records, read together, and the result they make."""

    graph: Graph
    tasks: dict[str, TaskState]
    result: TaskStatus


def released_message(run: Run, state: TaskState) -> DagTaskMessage:
    """The message that starts a parked task again, with the token its state waits on."""
    assert state.token is not None
    return DagTaskMessage(
        job=run.job,
        team=run.team,
        run_id=run.run_id,
        scheduled_at=instant_text(run.scheduled_at),
        correlation_id=run.correlation_id,
        task=state.name,
        retry_count=state.attempt - 1,
        token=state.token,
    )


def rejected_quietly(spec: JobSpec, failing: TaskState) -> bool:
    """The run's failing task is an approval a person rejected, and the job did not ask to be paged for it."""
    task = task_of(spec, failing.name)
    return (
        task is not None
        and isinstance(task.target, ApprovalTarget)
        and not task.target.page_on_reject
        and failing.status is TaskStatus.FAILED
        and (failing.error or "").startswith(REJECTED_BY)
    )


def tasks_failed_checks(graph: Graph, tasks: dict[str, TaskState]) -> list[CheckResult]:
    """The checks its tasks failed, for the run record (named task: check), at most MAX_RUN_CHECKS."""
    failed = [
        CheckResult(f"{name}: {check['name']}", check["severity"], False, check.get("message", ""))
        for name in graph
        if name in tasks
        for check in tasks[name].checks or []
        if not check["passed"]
    ]
    return failed[:MAX_RUN_CHECKS]
