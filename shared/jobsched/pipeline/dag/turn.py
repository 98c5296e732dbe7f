"""What the stages of one DAG task's attempt share: one frozen value, built once by the conductor (or by an end
reported from outside), never a list of six values passed from stage to stage."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.messages import DagTaskMessage
from jobsched.core.outcome import Action, Outcome
from jobsched.core.records import StoredJob
from jobsched.core.run_records import Run, TaskState
from jobsched.core.runs import TaskStatus
from jobsched.core.spec import DagTask, JobSpec


@dataclass(frozen=True)
class TaskTurn:
    """One attempt of one task record (the task, or one item of a map task) as a stage sees it."""

    stored: StoredJob
    run: Run
    task: DagTask  # the task (for a map item: its map task)
    record: str  # the record the attempt writes: the task's name, or ``name[index]`` for a map item
    attempt: int
    token: str  # the Step Functions task token the outcome is reported to
    now: datetime
    message: DagTaskMessage | None = None  # None: an end reported from outside (a callback, an approval)

    @classmethod
    def of(cls, message: DagTaskMessage, found: tuple[StoredJob, Run, DagTask], now: datetime) -> TaskTurn:
        stored, run, task = found
        return cls(stored, run, task, message.record, message.attempt, message.token, now, message)

    @property
    def spec(self) -> JobSpec:
        return self.stored.spec

    @property
    def priority(self) -> str:
        return self.stored.spec.priority

    @property
    def is_item(self) -> bool:
        """One item of a map task: its outcome releases nothing (its map task is judged once all have ended)."""
        return self.record != self.task.name

    @property
    def expires_at(self) -> int:
        return expiry(self.run, self.stored.spec)

    def outcome(self, action: Action, detail: str, *, wait: timedelta | None = None) -> Outcome:
        return Outcome(action, detail, wait=wait, run=self.run, priority=self.priority)


@dataclass(frozen=True)
class Unresolved:
    """A task's payload (or a map's list) that cannot be resolved: the task fails with this, not retried."""

    error: str


NO_ITEM: Any = object()  # a task's payload is resolved without an item (only a map task's items have one)


def task_of(spec: JobSpec | None, name: str) -> DagTask | None:
    if spec is None or spec.dag is None:
        return None
    return next((task for task in spec.dag.tasks if task.name == name), None)


def statuses(tasks: dict[str, TaskState]) -> dict[str, TaskStatus]:
    return {name: state.status for name, state in tasks.items()}


def expiry(run: Run, spec: JobSpec) -> int:
    return int((run.scheduled_at + spec.run_retention + timedelta(days=1)).timestamp())
