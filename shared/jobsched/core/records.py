"""The records of jobs the scheduler's domain reads and writes, whatever stores them: jobs as stored, due entries,
dispatch state, slot answers, incidents, breakers, audit entries, and the conflicts a store reports. Runs, DAG tasks,
target calls and results are ``core.run_records``.

The stores (``jobsched.ports``) return these; the AWS and in-memory adapters both build them.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from jobsched.core.bounds import STORED
from jobsched.core.names import JobsKeys, due_shard_count
from jobsched.core.runs import (
    instant_text,
    parse_instant,
    truncate,
)
from jobsched.core.spec import JobSpec

if TYPE_CHECKING:
    pass

JobState = Literal["ACTIVE", "PAUSED"]


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
    spec_bytes: int | None = field(default=None, compare=False)  # its spec's stored JSON, when read from the table

    @property
    def key(self) -> str:
        return self.spec.key

    def changed_to(self, spec: JobSpec, *, now: datetime, principal: str) -> StoredJob:
        """The next version with a new spec (its state and pause reason kept)."""
        return replace(self, spec=spec, version=self.version + 1, updated_at=now, updated_by=principal, spec_bytes=None)

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
            spec_bytes=len(values["spec"]),
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
    # The job's audit mark, where the entry was read from its STATE item itself (the wheel's scan): the plan needs
    # no second read of the item. None from the due index (it does not carry the mark).
    audited_to: datetime | None = None

    @property
    def pending_change(self) -> bool:
        """A change of the job's spec left unfinished (``JobsPort.settle_change``), not the job's schedule."""
        return self.sk == JobsKeys.SPEC

    @property
    def backfill_id(self) -> str | None:
        return self.sk.removeprefix(JobsKeys.BACKFILL_PREFIX) if self.sk.startswith(JobsKeys.BACKFILL_PREFIX) else None


@dataclass(frozen=True)
class SlotLease:
    """A slot's value: its lease's end and the attempt of the run that took (or last renewed) it, stored as
    ``<instant>@<attempt>`` (a value without ``@`` was written before #51 and names no attempt).

    The attempt lets an eventually consistent read of the holder's run say it ended: a terminal record at that
    attempt or later is the end of this holding, while one at an earlier attempt may be a stale read from before
    the run was opened again (a rerun's next attempt takes the slot anew). Renewals keep the highest attempt."""

    until: datetime
    attempt: int | None = None

    def text(self) -> str:
        return instant_text(self.until) + (f"@{self.attempt}" if self.attempt is not None else "")

    @classmethod
    def parse(cls, text: str) -> SlotLease:
        until, _, attempt = text.partition("@")
        return cls(parse_instant(until), int(attempt) if attempt.isdigit() else None)

    @classmethod
    def of(cls, lease: datetime | SlotLease) -> SlotLease:
        return lease if isinstance(lease, SlotLease) else cls(lease)

    def renewing(self, held: str | None) -> str:
        """This lease written over the value ``held`` (None: a new holding): the attempt never goes back."""
        before = SlotLease.parse(held).attempt if held is not None else None
        if before is None or (self.attempt is not None and self.attempt >= before):
            return self.text()
        return replace(self, attempt=before).text()


def live_by_lease(holders: dict[str, str], now: datetime) -> list[str]:
    """The slot holders whose lease has not expired, earliest lease first: the runs most likely ended, so those a
    full slot asks about first (``adapters.items.judge_slots``, and a worker batch reading ahead for it)."""
    return sorted((h for h, value in holders.items() if SlotLease.parse(value).until > now), key=holders.__getitem__)


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


def due_shard(job: str) -> int:
    """A stable shard for the job: crc32, so every process agrees."""
    return zlib.crc32(job.encode()) % due_shard_count()


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
        placed = JobsKeys.DUE_SHARD in values or JobsKeys.WHEEL_SLOT in values  # the due index or the wheel
        return cls(
            spec_version=int(values["spec_version"]),
            cursor=parse_instant(values["cursor"]),
            audited_to=parse_instant(audited) if audited else None,
            next_visit_at=parse_instant(due) if due and placed else None,
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
    instead of up to three reads a run: the specs (those asked for) and each job's STATE (its slot holders, its
    open incidents, the spec version it was settled at)."""

    specs: dict[str, StoredJob]
    slots: dict[str, dict[str, str]]  # job -> holder -> lease
    incidents: dict[str, set[str]]  # job -> open incident classes
    versions: dict[str, int] = field(default_factory=dict)  # job -> its STATE item's spec version


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
