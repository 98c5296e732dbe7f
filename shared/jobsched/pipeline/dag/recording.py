"""Recording: a task's writes, each conditional on the record's status and attempt, and each outcome reported to
its Step Functions task token after it is recorded (a crash in between: the redelivery reports it again).

Order of writes for an outcome: the output a downstream task reads (before the success, so a reader that sees
the success finds it); the outcome (conditional on RUNNING at this attempt: a late result of an old attempt is
refused); then the report to the token. What the outcome releases is the conductor's (``run_end.advance``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.core.messages import TASK_TERMINAL
from jobsched.core.outcome import Outcome
from jobsched.core.references import MAX_TASK_OUTPUT
from jobsched.core.run_records import Run, TargetResult, TaskState
from jobsched.core.runs import TaskStatus
from jobsched.core.spec import JobSpec
from jobsched.dag.definition import TASK_FAILED, graph_from_values, task_retry
from jobsched.paging.escalation_events import Alerts
from jobsched.pipeline.dag.turn import TaskTurn, expiry
from jobsched.ports import TaskRunsPort, WorkflowsPort

TASK_FAILED_PERMANENTLY = "jobsched.TaskFailedPermanently"  # not retried: the request itself is wrong
# A parked task is heartbeated this long before its HeartbeatSeconds would run out (the checker ticks each
# minute; the spec requires heartbeat_timeout >= 3 minutes for tasks with dependencies).
PARKED_HEARTBEAT_LEAD = timedelta(minutes=2)
DEPENDENCIES_FAILED = "an upstream task did not succeed (trigger_rule all_success)"


@dataclass(frozen=True)
class TaskRecords:
    runs: TaskRunsPort
    workflows: WorkflowsPort
    alerts: Alerts
    after_step: Callable[[str], None]

    def park(self, turn: TaskTurn) -> None:
        """WAITING with its token (its state keeps running): heartbeated meanwhile if the task has heartbeats."""
        beat = turn.task.heartbeat_timeout
        self.runs.park_task(
            turn.run.job,
            turn.run.run_id,
            turn.record,
            attempt=turn.attempt,
            token=turn.token,
            now=turn.now,
            expires_at=turn.expires_at,
            heartbeat_at=turn.now + beat - PARKED_HEARTBEAT_LEAD if beat else None,
        )

    def claim(self, turn: TaskTurn, lease_until: datetime) -> bool:
        """This attempt of the task, claimed by this call (one claimer per attempt)."""
        return self.runs.claim_task(
            turn.run.job,
            turn.run.run_id,
            turn.record,
            attempt=turn.attempt,
            token=turn.token,
            now=turn.now,
            lease_until=lease_until,
            expires_at=turn.expires_at,
        )

    def skip(self, turn: TaskTurn, reason: str = DEPENDENCIES_FAILED) -> None:
        self.runs.finish_task(
            turn.run.job,
            turn.run.run_id,
            turn.record,
            status=TaskStatus.SKIPPED,
            now=turn.now,
            expires_at=turn.expires_at,
            error=reason,
        )
        self.workflows.succeed(turn.token, {"task": turn.record, "status": TaskStatus.SKIPPED.value})

    def outcome(self, turn: TaskTurn, result: TargetResult) -> Outcome:
        """An attempt's outcome on its record, reported to its token: succeeded, retrying, failed, or superseded
        (the attempt is no longer the one running)."""
        name, attempt = turn.record, turn.attempt
        superseded = Outcome(
            "superseded", f"task {name} attempt {attempt} is no longer running", priority=turn.priority
        )
        # A map item's output is its own (the task's is its judgement): only a task's may be read downstream.
        if result.outcome == "succeeded" and not turn.is_item and name in turn.spec.dag_outputs():
            kept = self._keep_output(turn, result)
            if isinstance(kept, TargetResult):
                return self.outcome(turn, kept)
            if not kept:
                return superseded
        if result.outcome == "succeeded":
            if not self._finish(turn, TaskStatus.SUCCEEDED, result):
                return superseded
            self.after_step("record_task")
            self.alerts.checks_warned(turn.run, result.checks, task=name)
            self.workflows.succeed(turn.token, {"task": name, "status": TaskStatus.SUCCEEDED.value, "attempt": attempt})
            return turn.outcome("succeeded", f"task {name}")
        error = result.error or "failed"
        retry = result.retryable and attempt < task_retry(turn.spec, turn.task).max_attempts
        if retry:
            recorded = self.runs.retry_task(
                turn.run.job, turn.run.run_id, name, attempt=attempt, now=turn.now, error=error
            )
        else:
            recorded = self._finish(turn, TaskStatus.FAILED, result, error=error)
        if not recorded:
            return superseded
        self.after_step("record_task")
        self.workflows.fail(turn.token, TASK_FAILED if result.retryable else TASK_FAILED_PERMANENTLY, error)
        if retry:
            return turn.outcome("retrying", f"task {name} attempt {attempt} failed: {error}")
        return turn.outcome("failed", f"task {name}: {error}")

    def report_again(self, turn: TaskTurn, mine: TaskState) -> None:
        """A recorded outcome reported to the token once more (Step Functions ignores a second report)."""
        if mine.status in (TaskStatus.SUCCEEDED, TaskStatus.SKIPPED):
            self.workflows.succeed(turn.token, {"task": mine.name, "status": mine.status.value})
        elif mine.status in (TaskStatus.FAILED, TaskStatus.RETRYING):
            self.workflows.fail(turn.token, TASK_FAILED, mine.error or "failed")

    def end_unreported_items(self, turn: TaskTurn, tasks: dict[str, TaskState]) -> None:
        """A map's items the state machine timed out never reported: they end here, TIMED_OUT."""
        for name, state in tasks.items():
            if name.startswith(f"{turn.task.name}[") and state.status not in TASK_TERMINAL:
                self.runs.finish_task(
                    turn.run.job, turn.run.run_id, name, status=TaskStatus.TIMED_OUT, now=turn.now,
                    expires_at=turn.expires_at,
                )  # fmt: skip

    def ended_by_machine(self, run: Run, spec: JobSpec, ended: TaskState, *, now: datetime) -> None:
        """The state machine gave up on a task (its last attempt failed or timed out): recorded as it says."""
        self.runs.finish_task(
            run.job, run.run_id, ended.name, status=ended.status, now=now, expires_at=expiry(run, spec),
            error=ended.error,
        )  # fmt: skip

    def cancel_unfinished(self, run: Run, spec: JobSpec, *, cause: str, now: datetime) -> None:
        """After the run was marked CANCELLED or TIMED_OUT: its unfinished tasks are CANCELLED."""
        if run.graph is None:
            return
        tasks = self.runs.tasks(run.job, run.run_id)
        for name in graph_from_values(run.graph):
            current = tasks.get(name)
            if current is None or current.status not in TASK_TERMINAL:
                self.runs.finish_task(
                    run.job, run.run_id, name, status=TaskStatus.CANCELLED, now=now, expires_at=expiry(run, spec),
                    error=cause,
                )  # fmt: skip

    def _finish(self, turn: TaskTurn, status: TaskStatus, result: TargetResult, *, error: str | None = None) -> bool:
        return self.runs.finish_task(
            turn.run.job,
            turn.run.run_id,
            turn.record,
            status=status,
            now=turn.now,
            expires_at=turn.expires_at,
            attempt=turn.attempt,
            output=result.output,
            error=error,
            checks=result.checks,
        )

    def _keep_output(self, turn: TaskTurn, result: TargetResult) -> bool | TargetResult:
        """Store what a task returned for the downstream tasks that read it, before its success is recorded (a
        reader that sees the success finds the output). False: a later attempt's output is there already; a
        failed result: the output is too large to pass on."""
        text = result.body if result.body is not None else (result.output or "")
        size = len(text.encode())
        if size > MAX_TASK_OUTPUT:
            return TargetResult(
                "failed",
                error=f"output_too_large: {size} bytes, and at most {MAX_TASK_OUTPUT} pass to downstream tasks; write "
                "larger data to the team's S3 and return its s3:// URI",
                retryable=False,
                checks=result.checks,
            )
        return self.runs.put_task_output(
            turn.run.job, turn.run.run_id, turn.record, attempt=turn.attempt, text=text, expires_at=turn.expires_at
        )
