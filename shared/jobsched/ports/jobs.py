"""Ports of the jobs store: specs, dispatch state, slots, breakers, incidents, health, triggers' batches and waiters,
the company's calendars and windows."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from jobsched.core.baseline import Baseline
from jobsched.core.containers import TaskOutcome
from jobsched.core.event_batches import BatchAdded, BatchedEvent, EventBatch
from jobsched.core.events import TriggerRule
from jobsched.core.freshness import FreshnessState
from jobsched.core.health import HealthItem
from jobsched.core.limits import TeamLimits
from jobsched.core.records import (
    AuditEntry,
    BreakerState,
    DispatchState,
    DueEntry,
    JobsSnapshot,
    JobState,
    SlotLease,
    SlotResult,
    SlotsTaken,
    StoredIncident,
    StoredJob,
)
from jobsched.core.spec import ContainerTarget, JobSpec
from jobsched.ports.operations import BudgetsPort


class CompanyPort(Protocol):
    """Company calendars and maintenance windows (``core.spec.company``) as stored: one item each on the Jobs table,
    read whole in one query (at most a few hundred, each a few KB)."""

    def company_entries(self) -> dict[str, dict[str, Any]]:
        """``{kind}#{company/NAME}`` -> the document as stored (kind: calendar or maintenance)."""
        ...

    def put_company_entry(self, kind: str, reference: str, document: dict[str, Any] | None) -> None:
        """Store one entry (None: delete it)."""
        ...


class JobsPort(CompanyPort, Protocol):
    """Specs, the dispatch state (cursor, audit mark, due index), slots, breakers and team limits."""

    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None: ...
    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]: ...
    def create(
        self, spec: JobSpec, *, now: datetime, principal: str, next_visit_at: datetime | None, cursor: datetime
    ) -> StoredJob: ...
    def replace(
        self,
        current: StoredJob,
        spec: JobSpec,
        *,
        now: datetime,
        principal: str,
        next_visit_at: datetime | None,
        cursor: datetime,
        action: str = "replace",
        reason: str | None = None,
    ) -> StoredJob: ...
    def record_action(
        self,
        job: str,
        *,
        version: int,
        now: datetime,
        principal: str,
        action: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None: ...
    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        """A subject's history (a job, a team's limits, the company, a resource's changes), newest first."""
        ...

    def set_state(
        self,
        current: StoredJob,
        state: JobState,
        *,
        now: datetime,
        principal: str,
        reason: str | None,
        next_visit_at: datetime | None,
        cursor: datetime,
    ) -> StoredJob: ...

    def settle_change(self, job: str) -> bool:
        """Finish a change of the job's spec that a crash left half written (True: there was one). A store whose
        changes are atomic has none. A pending change is on the due index (``DueEntry.pending_change``)."""
        ...

    # dispatch state
    def due(self, shard: int, until: datetime) -> Iterator[DueEntry]: ...
    def get_state(self, job: str) -> DispatchState | None: ...
    def audit_marks(self, jobs: list[str]) -> dict[str, datetime]: ...
    def advance(
        self,
        job: str,
        *,
        spec_version: int,
        old_cursor: datetime,
        cursor: datetime,
        next_visit_at: datetime | None,
        audited_to: datetime | None = None,
        wheel_slot: str | None = None,
    ) -> bool:
        """``wheel_slot``: the job waits for ``next_visit_at`` on the timing wheel under this key, not on the due
        index (``names.wheel_slot``)."""
        ...

    # the timing wheel (#51): sparse jobs on keys that do not move, scanned a minute's slot at a time
    def wheel(self, slot: str) -> list[str]:
        """The jobs waiting on one slot of the wheel (keys only)."""
        ...

    def due_states(self, jobs: list[str]) -> list[DueEntry]:
        """The jobs' dispatch state as due entries, those still on the wheel or the due index, in no particular order,
        each with its audit mark (``DueEntry.audited_to``: read with the item). Eventually consistent: a stale state
        plans from a stale cursor, whose advance then fails and holds the wheel's mark, so the next tick reads it
        again."""
        ...

    def wheel_marks(self) -> dict[int, datetime]:
        """Each due shard's wheel scanned through this minute (a shard never scanned: absent)."""
        ...

    def mark_wheel(self, marks: dict[int, datetime], read: dict[int, datetime]) -> bool:
        """Move shards' marks, on condition that each is still as ``read`` (absent where not read)."""
        ...

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
        ended: Callable[[dict[str, str]], set[str]] | None = None,
        read: dict[str, str] | None = None,
        attempt: int | None = None,
    ) -> SlotResult:
        """``attempt``: the holder run's attempt, kept in the slot's value (``SlotLease``) so that ``ended`` (given
        the holders asked about with their slots' values) can judge on an eventually consistent read."""
        ...

    def snapshot(self, jobs: list[str], *, specs: bool = True) -> JobsSnapshot:
        """The jobs' STATE items and, unless ``specs`` is False, their specs (``JobsSnapshot``)."""
        ...

    def acquire_slots(
        self,
        pk: str,
        sk: str,
        *,
        leases: Mapping[str, datetime | SlotLease],
        limit: int,
        now: datetime,
        ended: Callable[[dict[str, str]], set[str]] | None = None,
        read: dict[str, str] | None = None,
    ) -> SlotsTaken: ...
    def release_slot(self, pk: str, sk: str, *, holder: str) -> None: ...
    def release_slots(self, pk: str, sk: str, *, holders: list[str]) -> None: ...
    def slot_holders(self, pk: str, sk: str) -> dict[str, str]: ...

    # circuit breakers, incidents, team limits
    def breaker(self, key: str) -> BreakerState: ...
    def breakers(self, keys: list[str]) -> dict[str, BreakerState]: ...
    def breaker_failed(
        self, key: str, *, now: datetime, threshold: int, cool_down: timedelta
    ) -> Literal["opened", "reopened"] | None: ...
    def breaker_succeeded(self, key: str) -> bool: ...
    def breaker_holds(self, key: str, held: str) -> None: ...
    def close_breaker(self, key: str, *, by: str, reason: str, now: datetime) -> bool: ...
    def open_breakers(self, team: str) -> dict[str, BreakerState]: ...
    def open_incidents(self, job: str) -> set[str]: ...
    def mark_incident(self, job: str, incident_class: str, *, is_open: bool) -> None: ...
    def get_incident(self, subject: str, incident_class: str) -> StoredIncident | None: ...
    def team_limits(self, team: str, *, now: float | None = None) -> TeamLimits: ...
    def set_team_limits(self, team: str, overrides: dict[str, int | None]) -> TeamLimits: ...


class IncidentsPort(Protocol):
    """Incidents with their outbox of unsent pages (the escalation handler's aggregate)."""

    def get_incident(self, subject: str, incident_class: str) -> StoredIncident | None: ...
    def put_incident(self, incident: StoredIncident, *, expected_version: int) -> StoredIncident: ...
    def clear_incident_outbox(self, incident: StoredIncident) -> None: ...
    def incidents(self, subject: str) -> list[StoredIncident]: ...
    def mark_incident(self, job: str, incident_class: str, *, is_open: bool) -> None: ...


class EscalationStorePort(JobsPort, IncidentsPort, BudgetsPort, Protocol):
    """What the escalation handler reads and writes: jobs (to pause one) and incidents."""


class HealthPort(Protocol):
    """A job's health item (``core.health``): its freshness and its learned baseline, and the freshness index."""

    def health(self, job: str, *, consistent: bool = True) -> HealthItem: ...
    def put_health(
        self, job: str, *, freshness: FreshnessState | None = None, version: int = 0, baseline: Baseline | None = None
    ) -> bool:
        """Set the parts given (the rest kept). With ``freshness``: only if its version is still ``version`` (the one
        read; 0: none yet), and on the freshness index while a judgement is due. False when it changed meanwhile."""
        ...

    def drop_freshness(self, job: str) -> None: ...
    def note_team_freshness(self, team: str, name: str, view: dict[str, str] | None) -> None:
        """A job's line on its team's freshness board (None: off it)."""
        ...

    def team_freshness(self, team: str) -> dict[str, dict[str, str]]: ...
    def freshness_due(self, shard: int, until: datetime) -> Iterator[str]:
        """Jobs whose freshness judgement is due by ``until`` (the freshness index only)."""
        ...


class RegistryPort(JobsPort, HealthPort, Protocol):
    """What registering and deleting jobs needs beyond the pipeline's view: the team count, deletion, and the
    reverse edges of after triggers (which jobs run after a job: its downstreams)."""

    def count_team_jobs(self, team: str, *, at_least: int) -> int: ...
    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]:
        """Job keys of ``team`` in name order, ``limit`` at a time; the second value continues the listing."""
        ...

    def link_downstream(self, upstream: str, downstream: str) -> None: ...
    def unlink_downstream(self, upstream: str, downstream: str) -> None: ...
    def downstreams(self, job: str) -> list[str]: ...
    def delete(self, current: StoredJob, *, now: datetime, principal: str) -> None: ...
    def drop_incidents(self, subject: str) -> None: ...


class TriggerStorePort(JobsPort, Protocol):
    """Manual triggers: the idempotency keys that make a retried request start one run."""

    def reserve_idempotency_key(self, job: str, key: str, *, run_id: str, now: datetime, principal: str) -> str: ...


class EventBatchesPort(Protocol):
    """A batched trigger's numbered batches (``jobsched.core.events``): which one takes events now, adding an
    event to it, and closing one to read its events.

    ``start_batch`` moves the trigger's current batch from number ``after`` to ``after + 1`` and stores the new
    batch open, returning it and the batch it replaced (whose run the caller makes sure of); if another call
    moved it first, it changes nothing and returns the batch now current and None.
    ``add_to_batch`` writes the event and its once-only marker in one transaction, conditional on the batch
    being open, below ``max_events`` and opened no earlier than ``now - window``. ``close_batch`` is
    idempotent: after it, ``add_to_batch`` answers closed for that batch, so the list it returns is final."""

    def current_batch(self, job: str, trigger: str) -> EventBatch | None: ...
    def start_batch(
        self, job: str, trigger: str, *, after: int, run_id: str, now: datetime
    ) -> tuple[EventBatch, EventBatch | None]: ...
    def add_to_batch(
        self, batch: EventBatch, event: BatchedEvent, *, now: datetime, window: timedelta, max_events: int
    ) -> BatchAdded: ...
    def mark_batch_sent(self, batch: EventBatch) -> None: ...
    def close_batch(self, job: str, trigger: str, number: int) -> list[BatchedEvent]: ...
    def batch_events(self, job: str, trigger: str, number: int) -> list[BatchedEvent]: ...

    # An event too large for its run's payload, kept whole for the run's target to fetch by reference.
    def keep_event(self, job: str, run_id: str, event: dict[str, Any], *, expires_at: datetime) -> None: ...
    def kept_event(self, job: str, run_id: str) -> dict[str, Any] | None: ...


class ContainersPort(Protocol):
    """The work a container target started (an ECS task, a Batch job), found by its attempt's token, read and
    stopped as the team. ``work`` is what the run keeps of it (``Run.work``: the task's or the job's ids)."""

    def find(self, team: str, target: ContainerTarget, token: str) -> dict[str, str] | None: ...
    def describe(self, team: str, work: dict[str, str]) -> TaskOutcome | None: ...
    def stop(self, team: str, work: dict[str, str], reason: str) -> None: ...
    def task_role(self, team: str, work: dict[str, str]) -> str | None:
        """The IAM role the work's containers run as (ECS: the task definition's task role; Batch: the job
        definition's job role), read as the team; None when it has none or cannot say (Kubernetes)."""
        ...


class DataChecksPort(Protocol):
    """The team's S3 objects, read as the team (NotOwned: the bucket is not the team's): whether an object a run
    waits for is there, and the object a distributed map runs over."""

    def object_exists(self, team: str, bucket: str, key: str) -> bool: ...
    def read_object(self, team: str, bucket: str, key: str, *, max_bytes: int) -> bytes | None:
        """The object's bytes; None when it does not exist; BadItems when it is larger than ``max_bytes``."""
        ...


class WaitersPort(Protocol):
    """Per job, its runs and DAG tasks waiting for data (``waiter``: a run id, or run id#task), each with the
    work-queue message that wakes it. A hint, as a reverse edge is: the worker checks the run's own record."""

    def add_waiter(self, job: str, waiter: str, message: str, *, awaits: list[str], expires_at: datetime) -> None: ...
    def waiters(self, job: str, *, limit: int, awaiting: str | None = None) -> dict[str, str]:
        """waiter -> message; ``awaiting``: only those whose ``awaits`` hold it (an event wakes only its own)."""
        ...

    def drop_waiter(self, job: str, waiter: str) -> None: ...


class EventIntakeStorePort(JobsPort, EventBatchesPort, WaitersPort, Protocol):
    """Jobs, per job the minute window of runs its events started (``max_runs_per_minute``), batches, and the
    upstream runs an all-of after trigger has seen per logical instant."""

    def count_event_run(self, job: str, *, now: datetime, limit: int) -> bool: ...
    def carried(self, job: str, run_id: str, upstream_attempt: str) -> bool: ...
    def mark_carried(self, job: str, run_id: str, upstream_attempt: str, *, expires_at: datetime) -> None:
        """``run_id`` of ``job`` was rerun for ``upstream_attempt`` (team/name/run#attempt) of an upstream rerun
        with its downstreams: a later delivery of that finish reruns it no more."""
        ...

    def note_upstream(
        self, job: str, trigger: str, instant: datetime, upstream: str, run_id: str, *, expires_at: datetime
    ) -> dict[str, str]:
        """Add ``upstream``'s run to what the trigger has seen for ``instant`` (one atomic write) and return
        all of it, upstream -> run id: the write that completes the set sees it complete."""
        ...


class TriggerRulesPort(Protocol):
    """Each trigger of a job (and each wait it can be woken from) as an EventBridge rule that delivers its
    matches to the intake queue.

    ``deploy`` is idempotent (a rule is named by its job and its trigger's content); ``remove`` deletes the
    rules of the given triggers and ignores rules already gone. ``TriggerRefused`` names the trigger at fault."""

    def deploy(self, job: str, team: str, rules: Sequence[TriggerRule]) -> None: ...
    def remove(self, job: str, rules: Sequence[TriggerRule]) -> None: ...
    def rules_on_bus(self, bus: str) -> int: ...
