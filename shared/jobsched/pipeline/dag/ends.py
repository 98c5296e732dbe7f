"""A DAG task's ends from outside (``pipeline.ends``): a callback task's result, an approval's answer, a
heartbeat, a stop; and the parked task's heartbeat and the run's execution stopped when the run is.

Each goes through the same recording and run end as a task the worker executed, fenced by the attempt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from jobsched.core.run_records import ParkedTask, ProgressReport, Run, StaleAttempt, TargetResult
from jobsched.core.runs import TaskStatus
from jobsched.core.spec import ApprovalTarget, JobSpec
from jobsched.pipeline.attempts import judge
from jobsched.pipeline.dag.recording import PARKED_HEARTBEAT_LEAD, TaskRecords
from jobsched.pipeline.dag.run_end import RunEnd
from jobsched.pipeline.dag.turn import TaskTurn, task_of
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.ports import JobsPort, TaskRunsPort, WorkflowsPort

STOPPED = "jobsched.Stopped"


@dataclass(frozen=True)
class TaskEnds:
    jobs: JobsPort
    runs: TaskRunsPort
    workflows: WorkflowsPort
    records: TaskRecords
    run_end: RunEnd
    clock: Callable[[], datetime]

    def complete(self, ref: AttemptRef, reported: Reported) -> Run:
        """A callback task's result, or (``decision``) an approval task's answer."""
        turn = self._running(ref)
        if isinstance(turn.task.target, ApprovalTarget) != reported.decision:
            wanted = (
                "completed by its callback" if reported.decision else "approved or rejected by a member of the team"
            )
            raise StaleAttempt(f"{ref.job} {ref.run_id} task {ref.task} is {wanted}")
        failed = TargetResult("failed", error=reported.error, retryable=not reported.decision)
        succeeded = TargetResult("succeeded", output=reported.output)
        result = judge(succeeded, turn.task.checks) if reported.succeeded else failed
        self.run_end.task_ended(turn, result)
        return self.runs.get(ref.job, ref.run_id) or turn.run

    def heartbeat(self, ref: AttemptRef, report: ProgressReport | None = None) -> Run:
        """A callback task is alive: its state's HeartbeatSeconds start again (tasks keep no progress)."""
        turn = self._running(ref)
        if turn.task.heartbeat_timeout is None:
            return turn.run  # the state has no HeartbeatSeconds: nothing to extend, the attempt is still current
        if not self.workflows.heartbeat(turn.token):
            raise StaleAttempt(f"{ref.job} {ref.run_id} task {ref.task} attempt {ref.attempt} is no longer waited for")
        return turn.run

    def stop(self, ref: AttemptRef, cause: str) -> Run:
        """The task's running attempt ends CANCELLED, never retried; its downstream tasks go by their trigger
        rules, and the run ends as they decide."""
        turn = self._running(ref)
        stopped = self.runs.finish_task(
            ref.job, ref.run_id, turn.record, status=TaskStatus.CANCELLED, now=turn.now, expires_at=turn.expires_at,
            attempt=turn.attempt, error=cause,
        )  # fmt: skip
        if not stopped:
            raise StaleAttempt(f"{ref.job} {ref.run_id} task {ref.task} attempt {turn.attempt} ended meanwhile")
        self.workflows.fail(turn.token, STOPPED, cause)
        self.run_end.advance(turn.run, turn.stored)
        return self.runs.get(ref.job, ref.run_id) or turn.run

    def heartbeat_parked(self, parked: ParkedTask) -> bool:
        """Keep a parked task's state alive while it waits for its dependencies; False if it stopped waiting."""
        stored = self.jobs.get(parked.job, consistent=False)
        task = task_of(stored.spec if stored else None, parked.task.name)
        state = parked.task
        if task is None or task.heartbeat_timeout is None or state.status is not TaskStatus.WAITING or not state.token:
            return False
        if not self.workflows.heartbeat(state.token):
            return False
        next_at = self.clock() + task.heartbeat_timeout - PARKED_HEARTBEAT_LEAD
        return self.runs.parked_heartbeat_sent(
            parked.job, parked.run_id, state.name, attempt=state.attempt, next_at=next_at
        )

    def stop_execution(self, run: Run, spec: JobSpec, cause: str) -> None:
        """After the run was marked CANCELLED or TIMED_OUT: stop its execution, cancel unfinished tasks."""
        if run.execution_arn:
            self.workflows.stop(run.execution_arn, cause=cause)
        self.records.cancel_unfinished(run, spec, cause=cause, now=self.clock())

    def _running(self, ref: AttemptRef) -> TaskTurn:
        """The task's running attempt ``ref`` names (any running attempt when it names none), or StaleAttempt."""
        assert ref.task is not None
        stored = self.jobs.get(ref.job)
        run = self.runs.get(ref.job, ref.run_id)
        state = self.runs.tasks(ref.job, ref.run_id).get(ref.task) if run else None
        task = task_of(stored.spec if stored else None, ref.task)
        if (
            stored is None
            or run is None
            or task is None
            or state is None
            or state.status is not TaskStatus.RUNNING
            or (ref.attempt is not None and state.attempt != ref.attempt)
            or state.token is None
        ):
            now = f"{state.status.value} at attempt {state.attempt}" if state else "unknown"
            raise StaleAttempt(
                f"{ref.job} {ref.run_id} task {ref.task} attempt {ref.attempt} is not running (task is {now})"
            )
        return TaskTurn(stored, run, task, ref.task, state.attempt, state.token, self.clock())
