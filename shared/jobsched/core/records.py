"""The records the scheduler's domain reads and writes, whatever stores them: jobs as stored, due entries,
runs and DAG tasks, slot answers, target calls and results, and the conflicts a store reports.

The stores (``jobsched.ports``) return these; the AWS and in-memory adapters both build them.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from jobsched.core.bounds import STORED
from jobsched.core.names import LEASE_SHARDS, JobsKeys, RunsKeys, due_shard_count
from jobsched.core.runs import (
    RunMessage,
    RunStatus,
    TaskStatus,
    instant_text,
    parse_instant,
    truncate,
)
from jobsched.core.spec import JobSpec
from jobsched.core.traces import TraceContext, attempt_trace

if TYPE_CHECKING:
    from jobsched.core.checks import CheckResult

JobState = Literal["ACTIVE", "PAUSED"]
TargetOutcome = Literal["succeeded", "failed", "pending"]
TASK_PREFIX = "TASK#"


@dataclass(frozen=True)
class TaskOutput:
    """What a task returned (JSON text, at most core.references.MAX_TASK_OUTPUT bytes), for its downstream."""

    attempt: int
    text: str


# The reason of a MISSED record written by the lost-message audit: the only MISSED a late message may start.
LOST_PREFIX = "lost: "


class JobNotFound(LookupError):
    pass


class VersionConflict(RuntimeError):
    """The job changed since the caller read it (optimistic concurrency)."""


class JobExists(RuntimeError):
    pass


@dataclass(frozen=True)
class StoredJob:
    spec: JobSpec
    version: int
    state: JobState
    created_at: datetime
    updated_at: datetime
    updated_by: str
    paused_reason: str | None = None
    paused_by: str | None = None
    paused_at: datetime | None = None
    # The last pause window, kept after the resume: an event that happened inside it is not run late.
    last_paused_at: datetime | None = None
    resumed_at: datetime | None = None

    @property
    def key(self) -> str:
        return self.spec.key

    def changed_to(self, spec: JobSpec, *, now: datetime, principal: str) -> StoredJob:
        """The next version with a new spec (its state and pause reason kept)."""
        return replace(self, spec=spec, version=self.version + 1, updated_at=now, updated_by=principal)

    def in_state(self, state: JobState, *, now: datetime, principal: str, reason: str | None) -> StoredJob:
        """The next version, paused (with who, when and why) or active."""
        paused = state == "PAUSED"
        return replace(
            self,
            version=self.version + 1,
            state=state,
            updated_at=now,
            updated_by=principal,
            paused_reason=reason if paused else None,
            paused_by=principal if paused else None,
            paused_at=now if paused else None,
            last_paused_at=now if paused else self.last_paused_at,
            resumed_at=self.resumed_at if paused else now,
        )

    def to_values(self) -> dict[str, Any]:
        """The spec item: keys, the spec as JSON, version and lifecycle state."""
        return {
            JobsKeys.PK: self.key,
            JobsKeys.SK: JobsKeys.SPEC,
            JobsKeys.TEAM: self.spec.team,
            JobsKeys.NAME: self.spec.name,
            "spec": self.spec.model_dump_json(exclude_none=True),
            "version": self.version,
            "state": self.state,
            "created_at": instant_text(self.created_at),
            "updated_at": instant_text(self.updated_at),
            "updated_by": self.updated_by,
            "paused_reason": self.paused_reason,
            "paused_by": self.paused_by,
            "paused_at": instant_text(self.paused_at) if self.paused_at else None,
            "last_paused_at": instant_text(self.last_paused_at) if self.last_paused_at else None,
            "resumed_at": instant_text(self.resumed_at) if self.resumed_at else None,
        }

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> StoredJob:
        return cls(
            spec=JobSpec.model_validate_json(values["spec"], context=STORED),
            version=int(values["version"]),
            state=values["state"],
            created_at=parse_instant(values["created_at"]),
            updated_at=parse_instant(values["updated_at"]),
            updated_by=values["updated_by"],
            paused_reason=values.get("paused_reason"),
            paused_by=values.get("paused_by"),
            paused_at=parse_instant(values["paused_at"]) if values.get("paused_at") else None,
            last_paused_at=parse_instant(values["last_paused_at"]) if values.get("last_paused_at") else None,
            resumed_at=parse_instant(values["resumed_at"]) if values.get("resumed_at") else None,
        )


IncidentClass = Literal["failing", "late", "circuit", "dispatcher", "quality", "approval", "stale", "anomaly", "budget"]
Role = Literal["primary", "secondary"]


@dataclass(frozen=True)
class Incident:
    subject: str
    incident_class: IncidentClass
    opened_at: str
    first_kind: str
    failures: int = 0
    paged: tuple[Role, ...] = ()
    auto_paused: bool = False
    last: dict[str, Any] = field(default_factory=dict)  # the latest event, for the resolve notice
    seen: tuple[str, ...] = ()
    version: int = 0  # optimistic concurrency in the store
    acknowledged_by: str | None = None  # someone is on it: the secondary contact is not paged
    acknowledged_at: str | None = None
    severity: str | None = None  # "ticket": a best-effort job's incident, recorded and never paged
    snoozed_until: str | None = None  # no page for it before this instant (someone said so, audited)
    snoozed_by: str | None = None
    # Pages a maintenance window held (role, window, at, kind): recorded, not sent; the role is still unpaged, so
    # the incident's next event after the window pages it.
    held: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class StoredIncident:
    """An incident as stored: its fields (JSON), a version, pages not yet sent, and whether it is resolved
    (kept only until its resolve notices are out)."""

    values: dict[str, Any]
    version: int = 0
    unsent: str | None = None  # JSON list of pages
    resolved: bool = False

    @property
    def incident(self) -> Incident:
        """The typed incident (the stored fields are its JSON)."""
        values = self.values
        return Incident(
            subject=values["subject"],
            incident_class=values["incident_class"],
            opened_at=values["opened_at"],
            first_kind=values["first_kind"],
            failures=int(values.get("failures", 0)),
            paged=tuple(values.get("paged", ())),
            auto_paused=bool(values.get("auto_paused")),
            last=values.get("last", {}),
            seen=tuple(values.get("seen", ())),
            version=self.version,
            acknowledged_by=values.get("acknowledged_by"),
            acknowledged_at=values.get("acknowledged_at"),
            severity=values.get("severity"),
            snoozed_until=values.get("snoozed_until"),
            snoozed_by=values.get("snoozed_by"),
            held=tuple(dict(entry) for entry in values.get("held", ())),
        )

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> StoredIncident:
        return cls(
            json.loads(values["incident"]), int(values["version"]), values.get("unsent"), bool(values.get("resolved"))
        )

    def to_values(self) -> dict[str, Any]:
        """The stored item; an open incident is on the open-incidents index (the on-call console lists it)."""
        values: dict[str, Any] = {
            JobsKeys.PK: self.values["subject"],
            JobsKeys.SK: JobsKeys.INCIDENT_PREFIX + self.values["incident_class"],
            "incident": json.dumps(self.values, sort_keys=True),
            "version": self.version,
            "unsent": self.unsent,
            "resolved": self.resolved,
        }
        if not self.resolved:
            values |= {JobsKeys.OPEN_INCIDENT: "OPEN", JobsKeys.INCIDENT_OPENED_AT: self.values["opened_at"]}
        return values


@dataclass(frozen=True)
class DueEntry:
    job: str
    next_visit_at: datetime
    cursor: datetime
    spec_version: int
    sk: str = JobsKeys.STATE  # STATE for a job's schedule, BACKFILL#id for an active backfill, SPEC for a change

    @property
    def pending_change(self) -> bool:
        """A change of the job's spec left unfinished (``JobsPort.settle_change``), not the job's schedule."""
        return self.sk == JobsKeys.SPEC

    @property
    def backfill_id(self) -> str | None:
        return self.sk.removeprefix(JobsKeys.BACKFILL_PREFIX) if self.sk.startswith(JobsKeys.BACKFILL_PREFIX) else None


@dataclass(frozen=True)
class SlotResult:
    acquired: bool
    holders: dict[str, str]  # holder -> lease expiry (ISO) as stored, when not acquired

    @classmethod
    def of(cls, holder: str, taken: SlotsTaken) -> SlotResult:
        return cls(True, {}) if holder in taken.granted else cls(False, taken.holders)


@dataclass(frozen=True)
class SlotsTaken:
    added: list[str]  # the holders the write gave a slot, in the order asked
    kept: list[str]  # those that held one already (their lease renewed)
    holders: dict[str, str]  # holder -> lease expiry (ISO) as stored, when none was granted

    @property
    def granted(self) -> list[str]:
        return self.kept + self.added


class StaleAttempt(RuntimeError):
    """The run is no longer in the state this writer expected (another attempt or outcome won)."""


@dataclass(frozen=True)
class Run:
    job: str
    run_id: str
    team: str
    status: RunStatus
    attempt: int
    scheduled_at: datetime
    fire_at: datetime
    trigger: str
    spec_version: int
    correlation_id: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lease_until: datetime | None = None
    next_attempt_at: datetime | None = None
    error: str | None = None
    output: str | None = None
    reason: str | None = None
    lateness_ms: int | None = None  # first attempt's start minus its fire time, to the millisecond
    deadline_at: datetime | None = None  # SLA deadline, while not yet reported missed or finished
    execution_arn: str | None = None  # DAG runs: the Step Functions execution (named by the run id)
    graph: dict[str, Any] | None = None  # DAG runs: the task graph the run started with
    # Attempts before the latest rerun: the retry policy counts attempts from here (a rerun gets its retries).
    attempt_base: int = 0
    trigger_detail: dict[str, Any] | None = None  # event runs: the event that started it (kind, id, source...)
    payload: Any = None  # what a manual trigger or an event passed to the target, instead of the job's payload
    waiting_for: list[str] | None = None  # a WAITING run: the conditions not yet met, as users read them
    wait_started_at: datetime | None = None  # when it began waiting for its wait_for conditions
    downstream_attempt: int | None = None  # a rerun with --downstream: this attempt's finish reruns downstreams
    progress: Progress | None = None  # what a long attempt last reported (percent, message, its checkpoint)
    work: str | None = None  # what the last attempt started outside (a container's task: JSON), kept after it ends
    checks: list[dict[str, Any]] | None = None  # the last outcome's check results (name, severity, passed, message)
    rerun_tasks: list[str] | None = None  # a DAG run's re-execution: the tasks its new execution runs again
    anomaly: str | None = None  # far outside the job's learned baseline ("took 41 min, usual 6-9 min")

    @property
    def policy_attempt(self) -> int:
        """The attempt as the retry policy counts it: the first after a rerun is 1 again."""
        return self.attempt - self.attempt_base

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Run:
        def instant(name: str) -> datetime | None:
            return parse_instant(values[name]) if values.get(name) else None

        return cls(
            job=values[RunsKeys.PK],
            run_id=values[RunsKeys.SK],
            team=values["team"],
            status=RunStatus(values["status"]),
            attempt=int(values["attempt"]),
            scheduled_at=parse_instant(values["scheduled_at"]),
            fire_at=parse_instant(values["fire_at"]),
            trigger=values["trigger"],
            spec_version=int(values["spec_version"]),
            correlation_id=values.get("correlation_id", ""),
            started_at=instant("started_at"),
            finished_at=instant("finished_at"),
            lease_until=instant("lease_until"),
            next_attempt_at=instant("next_attempt_at"),
            error=values.get("error"),
            output=values.get("output"),
            reason=values.get("reason"),
            lateness_ms=int(values["lateness_ms"]) if "lateness_ms" in values else None,
            deadline_at=instant(RunsKeys.DEADLINE_AT),
            execution_arn=values.get("execution_arn"),
            graph=values.get("graph"),
            attempt_base=int(values.get("attempt_base", 0)),
            trigger_detail=values.get("trigger_detail"),
            payload=json.loads(values["payload"]) if values.get("payload") else None,
            waiting_for=list(values["waiting_for"]) if values.get("waiting_for") else None,
            wait_started_at=instant("wait_started_at"),
            downstream_attempt=int(values["downstream_attempt"]) if values.get("downstream_attempt") else None,
            progress=Progress.from_values(values),
            work=values.get("work"),
            checks=_checks(values),
            rerun_tasks=list(values["rerun_tasks"]) if values.get("rerun_tasks") is not None else None,
            anomaly=values.get("anomaly"),
        )

    def to_message(self, *, attempt: int | None = None, fire_at: datetime | None = None) -> RunMessage:
        """The run message for this run (by default its current attempt, due at its own fire time)."""
        return RunMessage(
            job=self.job,
            team=self.team,
            run_id=self.run_id,
            scheduled_at=instant_text(self.scheduled_at),
            fire_at=instant_text(fire_at or self.fire_at),
            attempt=attempt or self.attempt,
            spec_version=self.spec_version,
            trigger=self.trigger,
            correlation_id=self.correlation_id,
            payload_override=self.payload,
            trigger_detail=self.trigger_detail,
        )


MAX_CHECKPOINT_BYTES = 2048  # a checkpoint's JSON: it rides on the run's item and in the next task's environment
MAX_PROGRESS_MESSAGE = 200


@dataclass(frozen=True)
class ProgressReport:
    """What an attempt says with a heartbeat (checked by the API: percent 0-100, a short message, a checkpoint
    of at most ``MAX_CHECKPOINT_BYTES`` as JSON text)."""

    percent: float | None = None
    message: str | None = None
    checkpoint: str | None = None

    def at(self, now: datetime, attempt: int) -> Progress:
        return Progress(now, attempt, self.percent, self.message, self.checkpoint)


@dataclass(frozen=True)
class Progress:
    """What a long attempt reported with its heartbeat: how far it is, and the checkpoint the run's next
    attempt resumes from (kept on the run across attempts; JSON text, at most ``MAX_CHECKPOINT_BYTES``)."""

    at: datetime
    attempt: int
    percent: float | None = None
    message: str | None = None
    checkpoint: str | None = None

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Progress | None:
        if not values.get("progress_at"):
            return None
        percent = values.get("progress_percent")
        return cls(
            at=parse_instant(values["progress_at"]),
            attempt=int(values.get("progress_attempt", 0)),
            percent=float(percent) if percent is not None else None,
            message=values.get("progress_message"),
            checkpoint=values.get("checkpoint"),
        )

    def values(self) -> dict[str, Any]:
        """The run item's attributes (the checkpoint only when one is given: a heartbeat without one keeps
        the last)."""
        found: dict[str, Any] = {"progress_at": instant_text(self.at), "progress_attempt": self.attempt}
        if self.percent is not None:  # a Decimal: what DynamoDB's numbers are made of (a float is refused)
            found["progress_percent"] = Decimal(str(round(self.percent, 1)))
        if self.message is not None:
            found["progress_message"] = truncate(self.message, MAX_PROGRESS_MESSAGE)
        if self.checkpoint is not None:
            found["checkpoint"] = self.checkpoint
        return found


@dataclass(frozen=True)
class AttemptClaim:
    """A claim on one attempt of a run: the store moves the run from ``expected_status`` at ``expected_attempt``
    to RUNNING ``attempt`` only if it still is there (one claimer wins; the attempt is the fencing token).

    - ``require_expired_lease``: taking over a RUNNING attempt whose worker died (its lease ran out);
    - ``external``: a callback run, whose lease is extended by heartbeats from outside;
    - ``lateness_ms``: a first attempt's start minus its fire time (runs created SCHEDULED, or MISSED by the
      lost-message audit, record it when they start)."""

    attempt: int
    expected_status: RunStatus
    expected_attempt: int
    now: datetime
    lease_until: datetime
    external: bool = False
    require_expired_lease: bool = False
    lateness_ms: int | None = None


@dataclass(frozen=True)
class TaskState:
    """One task of a DAG run: its own item, in the run's task partition."""

    name: str
    status: TaskStatus
    attempt: int
    token: str | None = None  # the Step Functions token of the current attempt
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lease_until: datetime | None = None
    error: str | None = None
    output: str | None = None
    parked_at: datetime | None = None  # when it was first held (for its dependencies, or its data)
    checks: list[dict[str, Any]] | None = None  # its output's check results

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> TaskState:
        def instant(name: str) -> datetime | None:
            return parse_instant(values[name]) if values.get(name) else None

        return cls(
            name=values[RunsKeys.SK].removeprefix(TASK_PREFIX),
            status=TaskStatus(values["status"]),
            attempt=int(values["attempt"]),
            token=values.get("token"),
            started_at=instant("started_at"),
            finished_at=instant("finished_at"),
            lease_until=instant("lease_until"),
            error=values.get("error"),
            output=values.get("output"),
            parked_at=instant("parked_at"),
            checks=_checks(values),
        )


@dataclass(frozen=True)
class ParkedTask:
    """A DAG task waiting for its dependencies whose state expects a heartbeat."""

    job: str
    run_id: str
    task: TaskState


@dataclass(frozen=True)
class RunContext:
    job: str
    team: str
    run_id: str
    attempt: int
    scheduled_at: str
    correlation_id: str
    payload_override: Any = None
    task: str | None = None  # DAG runs: the task this attempt is of
    trigger: str = "schedule"  # what started the run: schedule, manual, backfill or event
    checkpoint: str | None = None  # the last checkpoint an earlier attempt of this run reported (JSON text)
    critical: bool = False  # its job's tier is critical: its trace is always sampled

    @property
    def trace(self) -> TraceContext:
        """The attempt's W3C trace context (``core.traces``): the run's trace, this attempt's span."""
        return attempt_trace(
            self.job, self.run_id, self.scheduled_at, self.attempt, task=self.task, critical=self.critical
        )

    @property
    def idempotency_key(self) -> str:
        """A run's id; for a DAG task, run id + task + attempt (each attempt is its own execution)."""
        return f"{self.run_id}-{self.task}-{self.attempt}" if self.task else self.run_id

    def envelope(self) -> dict[str, Any]:
        envelope = {
            "job": self.job,
            "team": self.team,
            "run_id": self.run_id,
            "attempt": self.attempt,
            "scheduled_at": self.scheduled_at,
            "correlation_id": self.correlation_id,
            "idempotency_key": self.idempotency_key,
            "trigger": self.trigger,
            "traceparent": self.trace.traceparent,
            "tracestate": self.trace.tracestate,
        }
        if self.task:
            envelope["task"] = self.task
        return envelope


@dataclass(frozen=True)
class TargetResult:
    outcome: TargetOutcome
    output: str | None = None
    error: str | None = None
    retryable: bool = True
    body: str | None = None  # what the target returned, whole, when output adds to it (HTTP: the status)
    checks: tuple[CheckResult, ...] = ()  # the job's or task's checks on it (core.checks.judge)
    # The failure says the target itself is unwell (a timeout, a throttle, a 5xx, a refused connection), not
    # that this job's work failed: only these count toward the target's circuit breaker.
    unhealthy: bool = False
    usage: dict[str, float] | None = None  # what the target reported it used (core.usage counters), for chargeback


def _checks(values: dict[str, Any]) -> list[dict[str, Any]] | None:
    return [dict(check) for check in values["checks"]] if values.get("checks") else None


def due_shard(job: str) -> int:
    """A stable shard for the job: crc32, so every process agrees."""
    return zlib.crc32(job.encode()) % due_shard_count()


def lease_shard(job: str, run_id: str) -> int:
    return zlib.crc32(f"{job}/{run_id}".encode()) % LEASE_SHARDS


@dataclass(frozen=True)
class DispatchState:
    """A job's STATE item: where its dispatch stands (read by recovery, a spec change, and tests)."""

    spec_version: int
    cursor: datetime
    audited_to: datetime | None  # absent on jobs stored before the lost-message audit existed
    next_visit_at: datetime | None  # None: off the due index (paused, or no instant left)
    slots: dict[str, str]  # run -> lease end, for max_running

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> DispatchState:
        audited, due = values.get("audited_to"), values.get(JobsKeys.NEXT_VISIT_AT)
        return cls(
            spec_version=int(values["spec_version"]),
            cursor=parse_instant(values["cursor"]),
            audited_to=parse_instant(audited) if audited else None,
            next_visit_at=parse_instant(due) if due and JobsKeys.DUE_SHARD in values else None,
            slots=dict(values.get("slots") or {}),
        )


@dataclass(frozen=True)
class Waiting:
    """A run held WAITING: what it still waits for, since when, and until when (its wait's timeout)."""

    reason: str
    waiting_for: list[str]
    since: datetime
    until: datetime


MAX_WAITING_SHOWN = 5


def shown_waiting_for(waiting_for: list[str]) -> list[str]:
    """What a WAITING record keeps of the conditions not met (bounded), and what a poll compares it with."""
    return [str(truncate(item, 512)) for item in waiting_for[:MAX_WAITING_SHOWN]]


MAX_HELD_LISTED = 100  # runs a breaker names as held back (it holds any number)


def breaker_team(key: str) -> str:
    """The team a breaker belongs to: its key is "{team}:…" (team scope) or "{team}/{job}:…" (job scope)."""
    return key.split(":", 1)[0].split("/", 1)[0]


@dataclass(frozen=True)
class BreakerState:
    failures: int = 0
    open_until: datetime | None = None
    held: tuple[str, ...] = ()  # "team/job/run id" (or "…#task") of runs it held back while open, sorted

    def holds(self, now: datetime) -> bool:
        return self.open_until is not None and self.open_until > now

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> BreakerState:
        until = values.get("open_until")
        held = tuple(sorted(str(ref) for ref in values.get(JobsKeys.HELD) or ()))
        return cls(int(values.get("failures", 0)), parse_instant(until) if until else None, held)


@dataclass(frozen=True)
class JobsSnapshot:
    """What a worker batch reads of its jobs before its records run, in one eventually consistent request
    instead of up to three reads a run: the specs and each job's STATE (its slot holders, its open incidents)."""

    specs: dict[str, StoredJob]
    slots: dict[str, dict[str, str]]  # job -> holder -> lease
    incidents: dict[str, set[str]]  # job -> open incident classes


# Who a console action acted as (``console:team-NAME/request/ID``); CloudTrail's Invoke record names the person,
# usually within 5 minutes (15 at most, by AWS's documentation of data events), flagged past an hour.
CONSOLE_PRINCIPAL_PREFIX = "console:"
CONSOLE_CONFIRMATION = timedelta(hours=1)


@dataclass(frozen=True)
class AuditEntry:
    """One change or action on a job: who, when, what, why; a spec change keeps the spec it made."""

    at: datetime
    version: int  # the job's version after the change (for actions: the version it was at)
    action: str  # create, replace, rollback, pause, resume, delete, trigger, cancel, rerun, backfill, ...
    principal: str
    reason: str | None = None
    spec: dict[str, Any] | None = None  # the spec as stored by a create, replace or rollback
    details: dict[str, Any] | None = None  # run id, range, statuses...
    sort_key: str = ""  # where it sits in the job's history (the page token)
    # A console action: the person CloudTrail recorded invoking the console's request (minutes later).
    confirmed_by: str | None = None

    def unconfirmed(self, now: datetime) -> bool:
        """A console action that CloudTrail has not named a person for within ``CONSOLE_CONFIRMATION``: its
        record was lost, unparsable or never sent (the trail is off). Flagged, so that nobody reads it as
        an action by nobody."""
        console = self.principal.startswith(CONSOLE_PRINCIPAL_PREFIX)
        return console and self.confirmed_by is None and now - self.at > CONSOLE_CONFIRMATION

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> AuditEntry:
        spec = values.get("spec")
        details = values.get("details")
        return cls(
            at=parse_instant(values["at"]),
            version=int(values["version"]),
            action=str(values["action"]),
            principal=str(values["principal"]),
            reason=values.get("reason"),
            spec=json.loads(spec) if spec else None,
            details=json.loads(details) if details else None,
            sort_key=str(values[JobsKeys.SK]),
            confirmed_by=values.get("confirmed_by"),
        )


@dataclass(frozen=True)
class LogLine:
    """One log line of a run, from whichever component wrote it (dispatcher, worker, escalation, pages)."""

    at: datetime
    component: str  # the function's service name, e.g. jobsched-worker
    level: str
    message: str
    fields: dict[str, Any]  # the line's structured fields (outcome, attempt, detail...)
