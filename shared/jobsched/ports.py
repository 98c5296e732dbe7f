"""What the pipeline needs from the outside world, as typing.Protocol ports.

The dispatcher, the worker and the heartbeat checker are written against these; two adapters
implement each: ``jobsched.adapters.aws`` (DynamoDB, SQS, the real targets) and
``jobsched.adapters.memory`` (dicts with DynamoDB's conditional-write semantics, a virtual-time queue).
One contract suite (``tests/contract``) runs the same cases against both, so the memory adapters
the scale model runs on are proven, not assumed.

Every store method is one conditional write or one read in DynamoDB terms: a method that cannot do its
write because the stored item changed answers False/None or raises the domain conflict (``StaleAttempt``,
``VersionConflict``, ``JobExists``) — never half a change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

from jobsched.core.records import (
    DueEntry,
    JobState,
    ParkedTask,
    Run,
    RunContext,
    SlotResult,
    StoredIncident,
    StoredJob,
    TargetResult,
    TaskState,
)
from jobsched.core.spec import JobSpec
from jobsched.dag.definition import TaskStatus, WorkMessage
from jobsched.pipeline.runs import RunMessage, RunStatus
from jobsched.tenancy.quotas import TeamLimits
from jobsched.watch.breaker import BreakerState


class JobsPort(Protocol):
    """Specs, the dispatch state (cursor, audit mark, due index), slots, breakers and team limits."""

    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None: ...
    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]: ...
    def create(
        self, spec: JobSpec, *, now: datetime, principal: str, next_fire_at: datetime | None, cursor: datetime
    ) -> StoredJob: ...
    def replace(
        self,
        current: StoredJob,
        spec: JobSpec,
        *,
        now: datetime,
        principal: str,
        next_fire_at: datetime | None,
        cursor: datetime,
    ) -> StoredJob: ...
    def set_state(
        self,
        current: StoredJob,
        state: JobState,
        *,
        now: datetime,
        principal: str,
        reason: str | None,
        next_fire_at: datetime | None,
        cursor: datetime,
    ) -> StoredJob: ...

    # dispatch state
    def due(self, shard: int, until: datetime) -> Iterator[DueEntry]: ...
    def get_state(self, job: str) -> dict[str, Any] | None: ...
    def audit_marks(self, jobs: list[str]) -> dict[str, datetime]: ...
    def advance(
        self,
        job: str,
        *,
        spec_version: int,
        old_cursor: datetime,
        cursor: datetime,
        next_fire_at: datetime | None,
        audited_to: datetime | None = None,
    ) -> bool: ...

    # backfills (entries on the due index beside the jobs' own)
    def put_backfill(
        self, job: str, backfill_id: str, values: dict[str, Any], *, cursor: datetime, due_at: datetime
    ) -> None: ...
    def get_backfill(self, job: str, backfill_id: str) -> dict[str, Any] | None: ...
    def update_backfill(
        self,
        job: str,
        backfill_id: str,
        current: dict[str, Any],
        changes: dict[str, Any],
        *,
        cursor: datetime | None,
        due_at: datetime | None,
    ) -> bool: ...

    # max_running slots, released lazily
    def acquire_slot(
        self,
        pk: str,
        sk: str,
        *,
        holder: str,
        lease_until: datetime,
        limit: int,
        now: datetime,
        ended: Callable[[list[str]], set[str]] | None = None,
    ) -> SlotResult: ...
    def release_slot(self, pk: str, sk: str, *, holder: str) -> None: ...
    def slot_holders(self, pk: str, sk: str) -> dict[str, str]: ...

    # circuit breakers, incidents, team limits
    def breaker(self, key: str) -> BreakerState: ...
    def breaker_failed(
        self, key: str, *, now: datetime, threshold: int, cool_down: timedelta
    ) -> Literal["opened", "reopened"] | None: ...
    def breaker_succeeded(self, key: str) -> bool: ...
    def open_incidents(self, job: str) -> set[str]: ...
    def mark_incident(self, job: str, incident_class: str, *, is_open: bool) -> None: ...
    def get_incident(self, subject: str, incident_class: str) -> StoredIncident | None: ...
    def team_limits(self, team: str, *, now: float | None = None) -> TeamLimits: ...
    def set_team_limits(self, team: str, overrides: dict[str, int | None]) -> TeamLimits: ...


class RunsPort(Protocol):
    """One record per run; every transition conditional on status and attempt (the fencing token)."""

    def get(self, job: str, run_id: str) -> Run | None: ...
    def history(self, job: str, *, limit: int = 50, newest_first: bool = True) -> list[Run]: ...
    def ended(self, runs: set[tuple[str, str]]) -> set[tuple[str, str]]: ...
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
    def start_attempt(
        self,
        job: str,
        run_id: str,
        *,
        expected_status: RunStatus,
        expected_attempt: int,
        attempt: int,
        now: datetime,
        lease_until: datetime,
        external: bool = False,
        require_expired_lease: bool = False,
        lateness_ms: int | None = None,
    ) -> Run: ...
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
    ) -> Run: ...
    def end_lease(self, job: str, run_id: str, *, attempt: int, now: datetime) -> Run: ...
    def heartbeat(self, job: str, run_id: str, *, attempt: int, lease_until: datetime) -> Run: ...
    def expired_leases(self, shard: int, now: datetime) -> Iterator[Run | ParkedTask]: ...
    def past_deadline(self, shard: int, now: datetime) -> Iterator[Run]: ...
    def deadline_reported(self, job: str, run_id: str) -> bool: ...
    def wakeups(self, shard: int, until: datetime) -> Iterator[Run]: ...
    def clear_wake(self, job: str, run_id: str, *, attempt: int) -> bool: ...


@runtime_checkable
class TaskRunsPort(RunsPort, Protocol):
    """Runs with DAG task records (only the AWS adapter: DAG runs need Step Functions anyway)."""

    def set_workflow(self, job: str, run_id: str, *, graph: dict[str, Any], execution_arn: str) -> str: ...
    def tasks(self, job: str, run_id: str) -> dict[str, TaskState]: ...
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
    ) -> bool: ...
    def retry_task(self, job: str, run_id: str, task: str, *, attempt: int, now: datetime, error: str) -> bool: ...


class WorkQueuesPort(Protocol):
    """The work queues, one per priority class; a delay up to 15 minutes per message."""

    def send(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> None: ...
    def send_each(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> set[int]: ...


class EscalationsPort(Protocol):
    def publish(self, event: dict[str, Any]) -> None: ...


class TargetsPort(Protocol):
    def execute(self, target: Any, context: RunContext) -> TargetResult: ...
