"""How the stores lay domain records out as items: partition keys of a DAG run's tasks and outputs, a run's item
as first written, the attributes a transition sets, a job's STATE item, audit items, and the slot writes' rounds.
Both table adapters (DynamoDB and memory) write exactly these; nothing above the adapters reads them (#47: they
were 230 lines of ``core.records`` only the adapters used)."""

from __future__ import annotations

import json
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from jobsched.core.names import SWEEP, JobsKeys, RunsKeys
from jobsched.core.records import (
    AuditEntry,
    DueEntry,
    JobsSnapshot,
    SlotLease,
    SlotsTaken,
    StoredJob,
    Waiting,
    due_shard,
    live_by_lease,
    shown_waiting_for,
)
from jobsched.core.run_records import lease_shard
from jobsched.core.runs import (
    TERMINAL,
    RunMessage,
    RunStatus,
    instant_text,
    moment_text,
    parse_instant,
    truncate,
)
from jobsched.core.slo import RunCount, SloDay
from jobsched.core.spec import JobSpec
from jobsched.core.usage import COUNTERS
from jobsched.ports import SweepState, UsageDay


def task_partition(job: str, run_id: str) -> str:
    """A DAG run's tasks live under their own partition key, so listing a job's runs never reads them."""
    return f"{job}#{run_id}"


def output_partition(job: str, run_id: str) -> str:
    """The outputs its downstream tasks read, apart from the tasks: reading the tasks never reads them."""
    return f"{job}#{run_id}#outputs"


def is_run_item(values: dict[str, Any]) -> bool:
    """A run's own item: under its job's key. A DAG run's tasks and outputs live under ``{job}#{run_id}...``."""
    return "#" not in str(values.get(RunsKeys.PK, "#"))


def job_state_values(job: str, version: int, cursor: datetime, next_visit_at: datetime | None) -> dict[str, Any]:
    """A job's STATE item as (re)written by a create or a spec change: the cursor, an audit mark at the cursor
    (earlier instants are not the dispatcher's to account for), no slots taken, and the due entry."""
    values: dict[str, Any] = {
        JobsKeys.PK: job,
        JobsKeys.SK: JobsKeys.STATE,
        "cursor": instant_text(cursor),
        "audited_to": instant_text(cursor),
        "spec_version": version,
        "slots": {},
    }
    if next_visit_at is not None:
        values[JobsKeys.DUE_SHARD] = due_shard(job)
        values[JobsKeys.NEXT_VISIT_AT] = instant_text(next_visit_at)
    return values


def run_base_values(message: RunMessage, now: datetime, retention: timedelta) -> dict[str, Any]:
    """The fields every run record starts with (its key, instants, trigger and expiry)."""
    return {
        RunsKeys.PK: message.job,
        RunsKeys.SK: message.run_id,
        "team": message.team,
        "scheduled_at": message.scheduled_at,
        "fire_at": message.fire_at,
        "trigger": message.trigger,
        "spec_version": message.spec_version,
        "correlation_id": message.correlation_id or message.run_id,
        "created_at": instant_text(now),
        RunsKeys.TTL: int((now + retention).timestamp()),
        # Kept on the record so a retry rebuilt from it (a long wait, a lost worker) carries them too.
        "trigger_detail": message.trigger_detail,
        "payload": json.dumps(message.payload_override) if message.payload_override is not None else None,
    }


def running_values(
    job: str, run_id: str, now: datetime, lease_until: datetime | None, external: bool
) -> dict[str, Any]:
    """What an attempt's start sets: its start moment and lease."""
    values: dict[str, Any] = {"started_at": moment_text(now)}
    if lease_until is not None:
        values["lease_until"] = instant_text(lease_until)
        if external:
            # Only runs whose result arrives from outside go on the lease index; for the others the
            # SQS message is the lease (it comes back if the worker dies), so they cost no index write.
            values[RunsKeys.LEASE_SHARD] = lease_shard(job, run_id)
            values[RunsKeys.LEASE_EXPIRES_AT] = instant_text(lease_until)
    return values


def new_run_values(
    message: RunMessage,
    *,
    status: RunStatus,
    now: datetime,
    retention: timedelta,
    lease_until: datetime | None,
    external: bool,
    reason: str | None,
    deadline: timedelta | None,
) -> dict[str, Any]:
    """A run record as first written (None values are not stored). ``deadline``: an unfinished run goes on
    the deadlines index until it finishes or its deadline is reported."""
    values: dict[str, Any] = {
        **run_base_values(message, now, retention),
        "status": status.value,
        "attempt": message.attempt,
        "reason": truncate(reason),
    }
    if deadline is not None and status not in TERMINAL:
        values[RunsKeys.DEADLINE_SHARD] = lease_shard(message.job, message.run_id)
        values[RunsKeys.DEADLINE_AT] = instant_text(parse_instant(message.scheduled_at) + deadline)
    if status is RunStatus.RUNNING:
        values |= running_values(message.job, message.run_id, now, lease_until, external)
        values["lateness_ms"] = int((now - parse_instant(message.fire_at)).total_seconds() * 1000)
    elif status in (RunStatus.SKIPPED, RunStatus.CANCELLED, RunStatus.MISSED):
        values["finished_at"] = moment_text(now)
    return {name: value for name, value in values.items() if value is not None}


def new_waiting_values(
    message: RunMessage, waiting: Waiting, *, now: datetime, retention: timedelta, deadline: timedelta | None
) -> dict[str, Any]:
    """A run record first written WAITING (``RunsPort.wait`` when the run does not exist yet)."""
    values = new_run_values(
        message,
        status=RunStatus.WAITING,
        now=now,
        retention=retention,
        lease_until=None,
        external=False,
        reason=None,
        deadline=deadline,
    )
    return (
        values | waiting_values(message.job, message.run_id, waiting) | {"wait_started_at": instant_text(waiting.since)}
    )


MAX_WAIT_SCAN = 1000  # runs of an upstream read, newest first, looking for the one a job wait needs


def succeeded_in(values: dict[str, Any], first: datetime, last: datetime) -> bool:
    """A run record (as stored) that succeeded for a logical instant in [first, last]."""
    if values.get("status") != RunStatus.SUCCEEDED.value or not values.get("scheduled_at"):
        return False
    return first <= parse_instant(str(values["scheduled_at"])) <= last


def waiting_values(job: str, run_id: str, waiting: Waiting) -> dict[str, Any]:
    """A WAITING run's attributes. It sits on the wakeups index at its wait's end, so the dispatcher sends it
    then even if every poll message were lost (the worker then records the time-out)."""
    return {
        "status": RunStatus.WAITING.value,
        "reason": truncate(waiting.reason),
        "waiting_for": shown_waiting_for(waiting.waiting_for),
        "next_attempt_at": instant_text(waiting.until),
        RunsKeys.WAKE_SHARD: lease_shard(job, run_id),
        RunsKeys.WAKE_AT: instant_text(waiting.until),
    }


@dataclass(frozen=True)
class SlotJudgement:
    """What one slot write does: the wanted holders it grants (in the order asked), those among them that
    hold a slot already (their lease is renewed), and the holders it evicts (lazy release)."""

    granted: list[str]
    present: list[str]
    evicted: list[str]

    @property
    def writes(self) -> bool:
        return bool(self.granted or self.present)

    def values(self, holders: dict[str, str], leases: Mapping[str, datetime | SlotLease]) -> dict[str, str]:
        """What the write sets: the granted holders' leases, and the present ones' renewed (their attempt never
        goes back: ``SlotLease.renewing``)."""
        return {h: SlotLease.of(leases[h]).renewing(holders.get(h)) for h in self.present + self.granted}

    def expected(self, holders: dict[str, str]) -> dict[str, str]:
        """The write's condition: the present and the evicted hold exactly the values they were judged by (a
        renewal decided on a stale read must not lower a newer attempt)."""
        return {h: holders[h] for h in self.present + self.evicted}


def judge_slots(
    holders: dict[str, str],
    wanted: Sequence[str],
    *,
    now: datetime,
    limit: int,
    ended: Callable[[dict[str, str]], set[str]] | None,
) -> SlotJudgement:
    """Which of ``wanted`` a slot write takes, in order, with room for ``limit``. Holders whose lease expired
    are evicted by any write that takes a slot; those whose runs ``ended`` only when the slots are still full
    (asking costs a read; ``ended`` is given the holders asked about with their slots' values)."""
    present = [h for h in wanted if h in holders]
    new = [h for h in dict.fromkeys(wanted) if h not in holders]
    if not new:
        return SlotJudgement([], present, [])
    live = live_by_lease(holders, now)
    kept = set(live) | set(present)  # a present holder renews its own lease, expired or not
    stale = [h for h in holders if h not in kept]
    short = len(holders) - len(stale) + len(new) - limit
    if short > 0 and ended is not None:
        # Asking costs a read per holder: first as many as are short, those that took their slots first (the
        # earliest leases, most likely ended), then the rest only if too few of those had ended.
        candidates = [h for h in live if h not in present]
        found = ended({h: holders[h] for h in candidates[:short]}) if candidates else set()
        if len(found) < short and candidates[short:]:
            found |= ended({h: holders[h] for h in candidates[short:]})
        stale += sorted(found)
    room = max(0, limit - (len(holders) - len(stale)))
    granted = new[:room]
    return SlotJudgement(granted, present, stale if granted else [])


RunKey = tuple[str, str]  # (job, run id)


def ended_holders(
    asked: Mapping[RunKey, int | None], read: Callable[[list[RunKey], bool], Iterable[dict[str, Any]]]
) -> dict[RunKey, int | None]:
    """Which slot holders' runs have ended (``RunsPort.ended``), each asked with the attempt its slot names; each
    with the attempt its end is proof for (every holding at that attempt or before ended), None where there is
    none (a MISSED record: its run may still be claimed at the same attempt).

    ``read(keys, consistent)`` reads the runs' status and attempt. A slot naming its attempt is judged on an
    eventually consistent read (half the price): a terminal record at that attempt or later ended this holding,
    whatever came after (a rerun takes the slot anew, at a later attempt). A read that is not that proof asks
    again strongly: a terminal record at an earlier attempt (stale, from before a rerun, or the run ended before
    this attempt was claimed), a MISSED record (the audit's ``lost:`` can still be claimed at the same attempt)
    and a slot naming no attempt (written before #51). A record read as not ended is not asked again: a stale
    read of a run that did end makes its successor wait a turn, never two runs share a slot."""
    ended: dict[RunKey, int | None] = {}
    unsure = [key for key, attempt in asked.items() if attempt is None]
    for values in read([key for key, attempt in asked.items() if attempt is not None], False):
        key, status = (values[RunsKeys.PK], values[RunsKeys.SK]), RunStatus(values["status"])
        if status not in TERMINAL:
            continue
        attempt, ended_at = asked[key], int(values.get("attempt", 0))
        if status is not RunStatus.MISSED and attempt is not None and ended_at >= attempt:
            ended[key] = ended_at
        else:
            unsure.append(key)
    for values in read(sorted(unsure), True) if unsure else ():
        status = RunStatus(values["status"])
        if status in TERMINAL:
            proof = None if status is RunStatus.MISSED else int(values.get("attempt", 0))
            ended[(values[RunsKeys.PK], values[RunsKeys.SK])] = proof
    return ended


def take_slots_in_rounds(
    holders: dict[str, str],
    wanted: Sequence[str],
    *,
    confirmed: bool,
    reread: Callable[[], dict[str, str]],
    write: Callable[[SlotJudgement, dict[str, str]], bool],
    now: datetime,
    limit: int,
    ended: Callable[[dict[str, str]], set[str]] | None,
    rounds: int = 4,
) -> SlotsTaken:
    """The slot-taking loop every store runs: judge ``holders`` (as read; ``confirmed`` when read strongly),
    ``write`` the judgement conditionally on exactly them (False: the condition failed), and on a failed write
    or a refusal judged on an unconfirmed read, ``reread`` strongly and judge again."""
    for _ in range(rounds):
        judged = judge_slots(holders, wanted, now=now, limit=limit, ended=ended)
        if judged.writes and write(judged, holders):
            return SlotsTaken(judged.granted, judged.present, {})
        if not judged.writes and confirmed:
            return SlotsTaken([], [], holders)
        holders, confirmed = reread(), True  # another worker changed them, or the read was stale: judge again
    return SlotsTaken([], [], holders)


def jobs_snapshot(items: Iterable[dict[str, Any]]) -> JobsSnapshot:
    """A snapshot from the SPEC and STATE items read (any order)."""
    snapshot = JobsSnapshot({}, {}, {})
    for values in items:
        if values[JobsKeys.SK] == JobsKeys.SPEC:
            stored = StoredJob.from_values(values)
            snapshot.specs[stored.key] = stored
        else:
            job = str(values[JobsKeys.PK])
            snapshot.slots[job] = {str(k): str(v) for k, v in (values.get("slots") or {}).items()}
            snapshot.incidents[job] = set(values.get(JobsKeys.INCIDENTS) or ())
            if values.get("spec_version") is not None:
                snapshot.versions[job] = int(values["spec_version"])
    return snapshot


HISTORY_RETENTION = timedelta(days=400)  # a job's history (each spec version in full) is kept this long


def first_version(latest: list[AuditEntry]) -> int:
    """The version a job created under a name starts at: after the last one the name's history records (a job
    deleted and created again goes on counting). Versions name a job's specs for good: a message sent ahead for
    the deleted job, or a dispatcher's schedule compiled for it, names a version the new job never has."""
    return latest[0].version + 1 if latest else 1


def audit_spec_text(spec: JobSpec) -> str:
    """The spec as an audit entry keeps it (sorted keys: the same text however often it is derived)."""
    return json.dumps(spec.model_dump(mode="json", exclude_none=True), sort_keys=True)


def audit_values(
    job: str,
    version: int,
    now: datetime,
    principal: str,
    action: str,
    spec: JobSpec | None,
    *,
    reason: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An audit item. The version orders changes made within the same second; the random tail keeps two
    actions of one second and version apart."""
    values: dict[str, Any] = {
        JobsKeys.PK: job,
        # To the millisecond (a fixed-width format, so keys sort by time): actions within one second and
        # version keep their order.
        JobsKeys.SK: JobsKeys.AUDIT_PREFIX + f"{moment_text(now)}#{version:010d}#{uuid.uuid4().hex[:6]}",
        "version": version,
        "action": action,
        "principal": principal,
        "at": instant_text(now),
        "reason": reason,
        JobsKeys.TTL: int((now + HISTORY_RETENTION).timestamp()),
    }
    if spec is not None:
        values["spec"] = audit_spec_text(spec)
    if details:
        values["details"] = json.dumps(details, sort_keys=True, default=str)
    return values


SLO_COUNTERS = ("ended", "bad", "late", "with_deadline", "past_deadline", "judged", "stale")  # a ledger item's counters


def job_day_adds(counters: dict[str, float], count: RunCount | None) -> dict[str, float]:
    """What one write adds to a job's item of the day (``JobsKeys.USAGE_PREFIX``): an attempt's usage counters
    and, at a run's end, its SLO counts, so a run's end is one write, not one for the ledger and one for usage."""
    added = {name: float(value) for name, value in counters.items() if name in COUNTERS and value}
    if count is not None:
        added |= {name: float(getattr(count, name)) for name in SLO_COUNTERS if getattr(count, name)}
    return added


def slo_days_of(job_days: Iterable[dict[str, Any]], ledger_days: Iterable[dict[str, Any]], tier: str) -> list[SloDay]:
    """A team's SLO days of ``tier``: the sum of its jobs' items of each day under that tier (the tier a job's item
    was last written with), with ``ledger_days``, the items of the one-item-a-tier-a-day layout before #51 (read
    until their window has passed, so an upgrade loses no count)."""
    totals: dict[date, Counter[str]] = defaultdict(Counter)
    bad_by_job: dict[date, Counter[str]] = defaultdict(Counter)
    for item in job_days:
        if str(item.get("tier") or "") != tier or not any(name in item for name in SLO_COUNTERS):
            continue  # usage only (an attempt whose run has not ended): not an SLO event
        day = date.fromisoformat(str(item[JobsKeys.SK]).removeprefix(JobsKeys.USAGE_PREFIX).split("#", 1)[0])
        counts = {name: int(float(str(item.get(name, 0)))) for name in SLO_COUNTERS}
        totals[day].update(counts)
        bad_by_job[day][str(item["job"]).split("/", 1)[-1]] += counts["bad"] + counts["stale"]
    for legacy in map(slo_day_of, ledger_days):
        totals[legacy.day].update({name: getattr(legacy, name) for name in SLO_COUNTERS})
        bad_by_job[legacy.day].update(legacy.bad_by_job)
    return [
        SloDay(
            day,
            bad_by_job={job: spent for job, spent in bad_by_job[day].items() if spent},
            **{name: totals[day][name] for name in SLO_COUNTERS},
        )
        for day in sorted(totals)
    ]


def slo_day_of(values: dict[str, object]) -> SloDay:
    """A ledger item as its day's counts (the memory adapter keeps the same item)."""
    day = date.fromisoformat(str(values[JobsKeys.SK]).rsplit("#", 1)[1])
    counts = {name: int(str(values.get(name, 0))) for name in SLO_COUNTERS}
    by_job = {
        name.removeprefix(JobsKeys.SLO_JOB_PREFIX): int(str(value))
        for name, value in values.items()
        if name.startswith(JobsKeys.SLO_JOB_PREFIX)
    }
    return SloDay(day, bad_by_job=by_job, **counts)


def usage_day(item: dict[str, Any]) -> UsageDay:
    """A usage item (``aws.jobs.usage``) as the port returns it."""
    day = str(item[JobsKeys.SK]).removeprefix(JobsKeys.USAGE_PREFIX).split("#", 1)[0]
    return UsageDay(
        job=str(item["job"]),
        day=date.fromisoformat(day),
        tier=str(item.get("tier") or ""),
        target_type=str(item.get("target_type") or ""),
        counters={name: float(str(item[name])) for name in COUNTERS if name in item},
    )


def sweep_state_values(table: str, state: SweepState) -> dict[str, Any]:
    """A table's sweep state item (``watch.retention``) on the Jobs table: pk ``SWEEP``, sk the table."""
    values: dict[str, Any] = {JobsKeys.PK: SWEEP, JobsKeys.SK: table}
    if state.cursor:
        values["cursor"] = state.cursor
    if state.next_pass_at is not None:
        values["next_pass_at"] = instant_text(state.next_pass_at)
    return values


def sweep_state_of(values: dict[str, Any]) -> SweepState:
    cursor, next_pass = values.get("cursor"), values.get("next_pass_at")
    return SweepState(str(cursor) if cursor else None, parse_instant(str(next_pass)) if next_pass else None)


def due_entry(values: dict[str, Any], *, whole_item: bool = False) -> DueEntry | None:
    """A due entry from a STATE (or backfill, or pending SPEC) item or its due index entry; None when it waits for
    nothing (paused, no instant left). ``whole_item``: read from the item itself, so it carries the audit mark."""
    at = values.get(JobsKeys.NEXT_VISIT_AT)
    placed = JobsKeys.DUE_SHARD in values or JobsKeys.WHEEL_SLOT in values
    if not at or not placed or "cursor" not in values:
        return None
    return DueEntry(
        job=str(values[JobsKeys.PK]),
        next_visit_at=parse_instant(at),
        cursor=parse_instant(values["cursor"]),
        spec_version=int(values["spec_version"]),
        sk=str(values[JobsKeys.SK]),
        audited_to=parse_instant(values["audited_to"]) if whole_item and values.get("audited_to") else None,
    )


def wheel_marks_of(values: dict[str, Any]) -> dict[int, datetime]:
    """The wheel's marks as stored (pk DISPATCH, sk WHEEL: ``marks``, shard -> instant)."""
    return {int(shard): parse_instant(str(mark)) for shard, mark in (values.get("marks") or {}).items()}
