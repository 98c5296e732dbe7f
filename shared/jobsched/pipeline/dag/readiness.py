"""Readiness: whether a task's attempt may run now, as a verdict for the conductor; this room writes nothing.

- ``redelivered``: a message for an attempt already past WAITING (a redelivery, or recovery after a crash);
- ``dependencies``: run, skip, or wait for the dependencies (the conductor parks it with its token);
- ``data``: a task whose dependencies are done and that waits for data (``wait_for``): ready, held (parked and
  polled), skipped or failed at its wait's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from jobsched.core.errors import WorkflowsNotConfigured
from jobsched.core.messages import TASK_TERMINAL
from jobsched.core.outcome import Outcome
from jobsched.core.run_records import TaskState
from jobsched.core.runs import TaskStatus
from jobsched.core.spec import CallbackTarget
from jobsched.dag.definition import TASK_LOST, Decision, TaskNode, decide
from jobsched.pipeline.dag.turn import TaskTurn, statuses
from jobsched.pipeline.waiting import Met, Refused, Waits
from jobsched.ports import TaskRunsPort


@dataclass(frozen=True)
class Report:
    """The attempt's outcome is recorded (or its retry is): report it to the token again, and advance if it ended
    (a crash may have come between the record and the report or the advance)."""

    state: TaskState


@dataclass(frozen=True)
class Lost:
    """The worker running this attempt died: the attempt fails (Step Functions retries it by its policy)."""

    error: str


@dataclass(frozen=True)
class Hold:
    """The task waits for its data: ``outcome`` says until when; ``park``: park it with its token first."""

    outcome: Outcome
    park: bool


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Fail:
    """The task cannot run (it may not wait on what it names): failed, unclaimed and unretried."""

    reason: str


def redelivered(turn: TaskTurn, mine: TaskState) -> Report | Lost | Outcome:
    """What a message for an attempt already past WAITING finds."""
    if mine.status in TASK_TERMINAL or mine.status is TaskStatus.RETRYING:
        return Report(mine)
    if isinstance(turn.task.target, CallbackTarget):
        return turn.outcome("duplicate", f"task {mine.name} waits for its callback")
    if mine.lease_until is not None and mine.lease_until > turn.now:
        return turn.outcome("waiting", "attempt in flight elsewhere", wait=mine.lease_until - turn.now)
    return Lost(f"{TASK_LOST}: attempt {mine.attempt} lost (its worker stopped)")


def dependencies(node: TaskNode, tasks: dict[str, TaskState]) -> Decision:
    """Run, skip, or wait: the task's trigger rule over its dependencies' statuses."""
    return decide(node, statuses(tasks))


@dataclass(frozen=True)
class DataReadiness:
    runs: TaskRunsPort
    waits: Waits | None

    def data(self, turn: TaskTurn, node: TaskNode) -> Literal["ready"] | Hold | Skip | Fail:
        """A task whose dependencies are done: is the data it waits for there? Its wait counts from when its last
        dependency finished, or when it was first held."""
        if not turn.task.wait_for:
            return "ready"
        if self.waits is None:
            raise WorkflowsNotConfigured("this worker has no data checks configured: tasks with wait_for cannot run")
        assert turn.message is not None
        run, now = turn.run, turn.now
        tasks = self.runs.tasks(run.job, run.run_id)
        mine = tasks.get(turn.record)
        held_since = [mine.parked_at] if mine is not None and mine.parked_at is not None else []
        finished = [tasks[name].finished_at for name in node.depends_on if name in tasks]
        since = max([moment for moment in [*held_since, *finished] if moment is not None], default=now)
        verdict = self.waits.before_task(turn.message, turn.spec, run, turn.task, mine, since=since, now=now)
        if verdict is None or isinstance(verdict, Met):
            return "ready"
        if verdict == "skip":
            return Skip(f"its wait for data timed out ({turn.task.wait or 'wait'})")
        if isinstance(verdict, Refused):
            return Fail(verdict.reason)
        park = (mine is None or mine.status is not TaskStatus.WAITING) and verdict.wait is not None
        return Hold(verdict, park)
