"""The lifecycle: one place that announces each state change of a run or a DAG task, once, after the conditional
write that made it succeeded (a write that lost its race announces nothing).

``AnnouncedRuns`` wraps the run store every component is given; whoever writes the change (the worker, a DAG
task's end, a container's state change, a callback, the heartbeat checker, a cancel, the dispatcher's MISSED
record) is announced the same way. Subscribers (today: the SLI metrics and the run's log line, and the "Run
Finished" event) subscribe once and hear runs and tasks alike. A subscriber runs after the write: a failing one
does not undo it; every subscriber still hears the change, and the first failure is raised after them (the
message comes back, and the redelivery finds the change written, as after any crash between two steps).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobsched.core.checks import CheckResult
from jobsched.core.records import Waiting
from jobsched.core.run_records import AttemptClaim, Run
from jobsched.core.runs import TERMINAL, RunMessage, RunStatus, TaskStatus
from jobsched.ports import RunsPort
from jobsched.watch.observability import run_finished, run_retried


class Change(StrEnum):
    CREATED = "created"  # a run recorded before its claim (SCHEDULED, held for a slot, or reopened to run again)
    CLAIMED = "claimed"  # an attempt claimed: RUNNING
    WAITING = "waiting"  # a run or a task waiting for its data or its dependencies
    RETRYING = "retrying"  # an attempt failed and another is planned
    FINISHED = "finished"  # a terminal status, whoever wrote it


@dataclass(frozen=True)
class StateChange:
    change: Change
    job: str
    run_id: str
    attempt: int | None  # None: a task's end that did not name its attempt (the state machine's, a cancel)
    status: str  # the status written (a RunStatus or TaskStatus value)
    run: Run | None = None  # a run's change: its record after the write
    task: str | None = None  # a task's change: its record's name (``name[index]`` for one map item)


Subscriber = Callable[[StateChange], None]


@dataclass
class Lifecycle:
    subscribers: list[Subscriber] = field(default_factory=list)

    def subscribe(self, subscriber: Subscriber) -> Subscriber:
        self.subscribers.append(subscriber)
        return subscriber

    def announce(self, change: StateChange) -> None:
        failure: Exception | None = None
        for subscriber in self.subscribers:
            try:
                subscriber(change)
            except Exception as error:  # every subscriber hears it; the first failure is raised after them
                failure = failure or error
        if failure is not None:
            raise failure


def run_slis(change: StateChange) -> None:
    """M1, M3, M4 and the run's one log line (``watch.observability``): a run that ended or will retry."""
    if change.run is None:
        return
    if change.change is Change.FINISHED:
        run_finished(change.run)
    elif change.change is Change.RETRYING:
        run_retried(change.run)


def announced(runs: RunsPort, *subscribers: Subscriber) -> AnnouncedRuns:
    """``runs`` with its state changes announced to ``subscribers`` (the SLIs first)."""
    return AnnouncedRuns(runs, Lifecycle([run_slis, *subscribers]))


class AnnouncedRuns:
    """A run store (with DAG task records, if it keeps them) whose state-changing writes are announced; every
    other call goes to the store as it is."""

    def __init__(self, store: RunsPort, lifecycle: Lifecycle) -> None:
        self.store = store
        self.lifecycle = lifecycle

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    # ------------------------------------------------------------------------------ runs

    def create(self, message: RunMessage, *, status: RunStatus, **rest: Any) -> Run | None:
        created = self.store.create(message, status=status, **rest)
        if created is not None:
            kind = Change.FINISHED if status in TERMINAL else Change.CLAIMED if status is RunStatus.RUNNING else None
            self._run(kind or Change.CREATED, created)
        return created

    def wait(self, message: RunMessage, waiting: Waiting, **rest: Any) -> Run:
        return self._run(Change.WAITING, self.store.wait(message, waiting, **rest))

    def claim_attempt(self, job: str, run_id: str, claim: AttemptClaim) -> Run:
        return self._run(Change.CLAIMED, self.store.claim_attempt(job, run_id, claim))

    def to_retrying(self, job: str, run_id: str, **rest: Any) -> Run:
        return self._run(Change.RETRYING, self.store.to_retrying(job, run_id, **rest))

    def finish(self, job: str, run_id: str, *, checks: Sequence[CheckResult] = (), **rest: Any) -> Run:
        return self._run(Change.FINISHED, self.store.finish(job, run_id, checks=checks, **rest))

    # ------------------------------------------------------------------------------ DAG tasks

    def park_task(self, job: str, run_id: str, task: str, *, attempt: int, **rest: Any) -> bool:
        parked: bool = self.store.park_task(job, run_id, task, attempt=attempt, **rest)  # type: ignore[attr-defined]
        return self._task(parked, StateChange(Change.WAITING, job, run_id, attempt, TaskStatus.WAITING, task=task))

    def claim_task(self, job: str, run_id: str, task: str, *, attempt: int, **rest: Any) -> bool:
        claimed: bool = self.store.claim_task(job, run_id, task, attempt=attempt, **rest)  # type: ignore[attr-defined]
        return self._task(claimed, StateChange(Change.CLAIMED, job, run_id, attempt, TaskStatus.RUNNING, task=task))

    def retry_task(self, job: str, run_id: str, task: str, *, attempt: int, now: datetime, error: str) -> bool:
        retried: bool = self.store.retry_task(  # type: ignore[attr-defined]
            job, run_id, task, attempt=attempt, now=now, error=error
        )
        return self._task(retried, StateChange(Change.RETRYING, job, run_id, attempt, TaskStatus.RETRYING, task=task))

    def finish_task(
        self, job: str, run_id: str, task: str, *, status: TaskStatus, attempt: int | None = None, **rest: Any
    ) -> bool:
        finished: bool = self.store.finish_task(  # type: ignore[attr-defined]
            job, run_id, task, status=status, attempt=attempt, **rest
        )
        return self._task(finished, StateChange(Change.FINISHED, job, run_id, attempt, status, task=task))

    # ------------------------------------------------------------------------------ announcing

    def _run(self, change: Change, run: Run) -> Run:
        self.lifecycle.announce(StateChange(change, run.job, run.run_id, run.attempt, run.status.value, run=run))
        return run

    def _task(self, written: bool, change: StateChange) -> bool:
        if written:
            self.lifecycle.announce(change)
        return written
