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

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

from jobsched.core.baseline import Baseline
from jobsched.core.checks import CheckResult
from jobsched.core.containers import TaskOutcome
from jobsched.core.event_batches import BatchAdded, BatchedEvent, EventBatch
from jobsched.core.events import TriggerRule
from jobsched.core.freshness import FreshnessState
from jobsched.core.health import HealthItem
from jobsched.core.limits import TeamLimits
from jobsched.core.messages import WorkMessage
from jobsched.core.records import (
    AttemptClaim,
    AuditEntry,
    BreakerState,
    DispatchState,
    DueEntry,
    JobsSnapshot,
    JobState,
    LogLine,
    ParkedTask,
    Progress,
    Run,
    RunContext,
    SlotResult,
    SlotsTaken,
    StoredIncident,
    StoredJob,
    TargetResult,
    TaskOutput,
    TaskState,
    Waiting,
)
from jobsched.core.runs import MAX_SQS_DELAY, RunMessage, RunStatus, TaskStatus
from jobsched.core.slo import RunCount, SloDay
from jobsched.core.spec import ContainerTarget, JobSpec
from jobsched.core.stops import Stop


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
        read: dict[str, str] | None = None,
    ) -> SlotResult: ...
    def snapshot(self, jobs: list[str]) -> JobsSnapshot: ...
    def acquire_slots(
        self,
        pk: str,
        sk: str,
        *,
        leases: dict[str, datetime],
        limit: int,
        now: datetime,
        ended: Callable[[list[str]], set[str]] | None = None,
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


class BudgetsPort(Protocol):
    """Teams' budgets (``core.budgets``, one document each, read all at once) and what each did in a month."""

    def put_budget(self, team: str, budget: dict[str, Any] | None) -> None: ...
    def budgets(self) -> dict[str, dict[str, Any]]: ...
    def budget_state(self, team: str, month: str) -> tuple[dict[str, Any] | None, int]:
        """The month's state as stored, and its version (0: none yet)."""
        ...

    def put_budget_state(self, team: str, month: str, values: dict[str, Any], *, expected_version: int) -> bool:
        """Store it only if its version is still ``expected_version``; False when another wrote it first."""
        ...


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


class SloLedgerPort(Protocol):
    """A team's SLO ledger: one item a tier a day (``core.slo``), added to by each ended run."""

    def count_run(self, team: str, tier: str, day: date, count: RunCount, *, job: str | None = None) -> None: ...
    def slo_days(self, team: str, tier: str, first: date, last: date) -> list[SloDay]: ...
    def note_team_day(self, team: str, day: date) -> None:
        """``team`` had counted events on ``day`` (idempotent)."""
        ...

    def teams_between(self, first: date, last: date) -> set[str]:
        """The teams with counted events on any day from ``first`` to ``last``."""
        ...


@dataclass(frozen=True)
class UsageDay:
    """One job's usage on one UTC day (``core.usage`` counters), with the tier and target type it ran under."""

    job: str
    day: date
    tier: str
    target_type: str
    counters: dict[str, float]


class UsagePort(Protocol):
    """Usage counters, one item per team, job and day (``core.usage``): added to, read a team's range at a time."""

    def add_usage(
        self, team: str, job: str, day: date, counters: dict[str, float], *, tier: str, target_type: str
    ) -> None: ...
    def usage_between(self, team: str, first: date, last: date) -> list[UsageDay]:
        """Every job's days from ``first`` to ``last`` (inclusive)."""
        ...


class DrillsPort(Protocol):
    """A team's paging drills: the last outcome per destination address (``paging.drills``)."""

    def record_drills(self, team: str, verified: dict[str, dict[str, str]]) -> None: ...
    def drills(self, team: str) -> dict[str, dict[str, str]]: ...


class StopsPort(Protocol):
    """Emergency stops kept on the Jobs table (one item each)."""

    def put_stop(self, stop: Stop) -> None: ...
    def get_stop(self, stop_id: str) -> Stop | None: ...
    def resume_stop_once(self, stop: Stop) -> bool:
        """Store ``stop`` as resumed, only if it was not resumed yet; False when it was."""
        ...


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    receipt: str
    body: str
    receives: int


class DeadLettersPort(Protocol):
    """The deployment's dead-letter queues by name (``pipeline.dead_letters.QUEUES``)."""

    def names(self) -> tuple[str, ...]:
        """The dead-letter queues this deployment has (of ``pipeline.dead_letters.QUEUES``)."""
        ...

    def count(self, queue: str) -> int: ...
    def receive(self, queue: str, *, max_messages: int, hold: timedelta) -> list[DeadLetter]:
        """Up to ``max_messages`` (≤ 10), out of sight for ``hold`` (0: visible again at once)."""
        ...

    def delete(self, queue: str, letters: Sequence[DeadLetter]) -> None: ...
    def release(self, queue: str, letters: Sequence[DeadLetter]) -> None:
        """Visible again at once."""
        ...
