"""Ports of runs and what moves them: the run store (and DAG task records), the work queues, targets, pages, Step
Functions and logs."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from jobsched.core.checks import CheckResult
from jobsched.core.messages import WorkMessage
from jobsched.core.records import LogLine, Waiting
from jobsched.core.run_records import (
    AttemptClaim,
    ParkedTask,
    Progress,
    Run,
    RunContext,
    TargetResult,
    TaskOutput,
    TaskState,
)
from jobsched.core.runs import MAX_SQS_DELAY, RunMessage, RunStatus, TaskStatus
from jobsched.core.spec import JobSpec


class RunsPort(Protocol):
    """One record per run; every transition conditional on status and attempt (the fencing token)."""

    def get(self, job: str, run_id: str) -> Run | None: ...
    def history(
        self, job: str, *, limit: int = 50, newest_first: bool = True, between: tuple[str, str] | None = None
    ) -> list[Run]:
        """``job``'s runs by run id, at most ``limit``; ``between``: run ids in that range (inclusive; a run id
        begins with its instant, so it is a time range). Eventually consistent."""
        ...

    def ended(self, runs: Mapping[tuple[str, str], int | None]) -> dict[tuple[str, str], int | None]:
        """Which of these (job, run id) have ended, each asked with the attempt its slot names (None: unknown); each
        with the attempt its end proves every holding at or before ended (None: no such proof, a MISSED run)."""
        ...

    def scheduled_ids(self, job: str, first: str, last: str) -> set[str]: ...
    def create(
        self,
        message: RunMessage,
        *,
        status: RunStatus,
        now: datetime,
        retention: timedelta,
        lease_until: datetime | None = None,
        external: bool = False,
        reason: str | None = None,
        deadline: timedelta | None = None,
    ) -> Run | None: ...
    def wait(
        self, message: RunMessage, waiting: Waiting, *, now: datetime, retention: timedelta, deadline: timedelta | None
    ) -> Run: ...
    def succeeded_between(self, job: str, first: datetime, last: datetime) -> str | None: ...
    def started_work(self, job: str, run_id: str, *, attempt: int, work: str) -> Run: ...
    def claim_attempt(self, job: str, run_id: str, claim: AttemptClaim) -> Run: ...
    def to_retrying(
        self, job: str, run_id: str, *, attempt: int, now: datetime, next_attempt_at: datetime, error: str, wake: bool
    ) -> Run: ...
    def finish(
        self,
        job: str,
        run_id: str,
        *,
        attempt: int,
        status: RunStatus,
        now: datetime,
        output: str | None = None,
        error: str | None = None,
        from_status: RunStatus = RunStatus.RUNNING,
        reason: str | None = None,
        checks: Sequence[CheckResult] = (),
    ) -> Run: ...
    def reopen(
        self,
        job: str,
        run_id: str,
        *,
        expected_status: RunStatus,
        attempt: int,
        now: datetime,
        retention: timedelta,
        reason: str,
        downstream: bool = False,
        rerun_tasks: Sequence[str] | None = None,
    ) -> Run: ...
    def end_lease(self, job: str, run_id: str, *, attempt: int, now: datetime) -> Run: ...
    def heartbeat(
        self, job: str, run_id: str, *, attempt: int, lease_until: datetime | None, progress: Progress | None = None
    ) -> Run: ...
    def expired_leases(self, shard: int, now: datetime) -> Iterator[Run | ParkedTask]: ...
    def past_deadline(self, shard: int, now: datetime) -> Iterator[Run]: ...
    def deadline_reported(self, job: str, run_id: str) -> bool: ...
    def note_anomaly(self, job: str, run_id: str, text: str) -> None:
        """An ended run far outside its job's baseline says so (``core.baseline``)."""
        ...

    def wakeups(self, shard: int, until: datetime) -> Iterator[Run]: ...
    # runs held back by max_running, woken by a run of their team that ends
    def note_held(
        self, job: str, run_id: str, *, reason: str | None = None, slot_team: str | None = None, since: datetime
    ) -> bool: ...
    def slot_waiters(self, team: str, *, limit: int) -> list[tuple[str, str]]: ...
    def take_slot_waiter(self, job: str, run_id: str) -> Run | None: ...
    def clear_wake(self, job: str, run_id: str, *, attempt: int) -> bool: ...


@runtime_checkable
class TaskRunsPort(RunsPort, Protocol):
    """Runs with DAG task records (only the AWS adapter: DAG runs need Step Functions anyway)."""

    def set_workflow(self, job: str, run_id: str, *, graph: dict[str, Any], execution_arn: str) -> str: ...
    def tasks(self, job: str, run_id: str) -> dict[str, TaskState]: ...
    def task_states(self, job: str, run_id: str, names: Sequence[str]) -> dict[str, TaskState]:
        """Only these records, by name (at most 100), read strongly; the absent ones are left out."""
        ...

    def park_task(
        self,
        job: str,
        run_id: str,
        task: str,
        *,
        attempt: int,
        token: str,
        now: datetime,
        expires_at: int,
        heartbeat_at: datetime | None = None,
    ) -> bool: ...
    def parked_heartbeat_sent(self, job: str, run_id: str, task: str, *, attempt: int, next_at: datetime) -> bool: ...
    def claim_task(
        self,
        job: str,
        run_id: str,
        task: str,
        *,
        attempt: int,
        token: str,
        now: datetime,
        lease_until: datetime,
        expires_at: int,
    ) -> bool: ...
    def finish_task(
        self,
        job: str,
        run_id: str,
        task: str,
        *,
        status: TaskStatus,
        now: datetime,
        expires_at: int,
        attempt: int | None = None,
        output: str | None = None,
        error: str | None = None,
        checks: Sequence[CheckResult] = (),
    ) -> bool: ...
    def retry_task(self, job: str, run_id: str, task: str, *, attempt: int, now: datetime, error: str) -> bool: ...
    def reset_tasks(self, job: str, run_id: str, tasks: Sequence[str]) -> None: ...
    def put_task_output(
        self, job: str, run_id: str, task: str, *, attempt: int, text: str, expires_at: int
    ) -> bool: ...
    def task_outputs(self, job: str, run_id: str, tasks: Sequence[str]) -> dict[str, TaskOutput]: ...


class WorkQueuesPort(Protocol):
    """The work queues, one per priority class; a delay up to 15 minutes per message."""

    def send(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> None: ...
    def send_each(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> set[int]: ...


class QueueBacklogPort(Protocol):
    """How many run messages of a priority class wait to be taken (visible now, over every queue of the class)."""

    def backlog(self, priority: str) -> int: ...


class EscalationsPort(Protocol):
    def publish(self, event: dict[str, Any]) -> None: ...


class TargetsPort(Protocol):
    def execute(self, target: Any, context: RunContext) -> TargetResult: ...


def delay_seconds(delay: timedelta) -> int:
    """SQS DelaySeconds for a wait: 0..900, rounded up so a message never arrives before its instant;
    longer waits are re-delayed by the worker on arrival. Both queue adapters deliver on this grid."""
    return max(0, min(math.ceil(delay.total_seconds()), int(MAX_SQS_DELAY.total_seconds())))


class PageQueuePort(Protocol):
    """Pages on their own queue, so the escalation handler never waits on a topic or a webhook."""

    def send(self, bodies: Sequence[str]) -> None: ...
    def retry_later(self, receipt_handle: str, delay: timedelta) -> None: ...


class NotifierPort(Protocol):
    """Delivers one page: to an SNS topic or a webhook. ChannelRefused if the team may not use it."""

    def publish(
        self, topic_arn: str, *, subject: str, text: str, attributes: dict[str, str], team: str | None = None
    ) -> None: ...
    def post(
        self, url: str, document: dict[str, Any], *, secret: str | None = None, team: str | None = None
    ) -> None: ...


class WorkflowsPort(Protocol):
    """Step Functions for DAG jobs: one state machine per job, one execution per run, task tokens."""

    def ensure(self, job: str, team: str, definition: str) -> tuple[str, bool]: ...
    def delete(self, job: str) -> None: ...
    def execution_arn(self, job: str, name: str) -> str: ...
    def start(self, execution_arn: str, payload: dict[str, Any]) -> str: ...
    def stop(self, execution_arn: str, *, cause: str) -> None: ...
    def succeed(self, token: str, output: dict[str, Any]) -> bool: ...
    def fail(self, token: str, error: str, cause: str) -> bool: ...
    def heartbeat(self, token: str) -> bool: ...


class DagDeploymentPort(Protocol):
    """A DAG job's state machine, deployed before the job is stored and removed after it is deleted."""

    def deploy(self, spec: JobSpec) -> bool: ...
    def remove(self, job: str) -> None: ...


class ContainerLogsPort(Protocol):
    """The lines a run's container wrote to its own log stream (awslogs), read as the run's team."""

    def lines(
        self, team: str, work: dict[str, str], *, since: datetime, until: datetime, limit: int
    ) -> list[LogLine]: ...


class RunLogsPort(Protocol):
    """A run's log lines from every component, by job and run id, oldest first."""

    def lines(self, job: str, run_id: str, *, since: datetime, until: datetime, limit: int) -> list[LogLine]: ...
