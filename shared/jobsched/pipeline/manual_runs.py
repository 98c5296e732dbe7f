"""Runs people ask for: manual runs (a trigger by hand, idempotent by its key) and backfills (issue #4).

Trigger: an idempotency key maps to one run id (a conditional put of the mapping), so retried requests
never make a second run. Order: mapping, run (SCHEDULED, with its payload), message; a crash after any
step is completed by the client's retry with the same key, which finds the mapping and re-sends.

Backfill: the instants of a time range, run at most ``max_in_flight`` at a time. A backfill item sits on
the sparse ``due`` index while active, so the dispatcher advances it each tick without scanning. Its
instants use the scheduled run ids, so an instant that already ran is not run again.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import JsonValue

from jobsched.core.names import JobsKeys
from jobsched.core.records import JobNotFound, StoredJob
from jobsched.core.references import reads_run_payload
from jobsched.core.run_records import Run, StaleAttempt
from jobsched.core.runs import (
    TERMINAL,
    RunMessage,
    RunStatus,
    instant_text,
    manual_run_id,
    parse_instant,
)
from jobsched.core.spec import JobSpec
from jobsched.pipeline.reruns import NEVER_RAN, reopen_and_send
from jobsched.ports import JobsPort, RunsPort, TriggerStorePort, WorkQueuesPort
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.engine import Occurrence
from jobsched.schedule.fires import schedule_of, scheduled_message

MAX_BACKFILL_INSTANTS = 10_000
MAX_IN_FLIGHT = 100


def payload_not_taken(spec: JobSpec) -> str | None:
    """Why a trigger's payload would reach nothing (then it is refused, never dropped): a DAG's tasks read it only
    through ``{{ run.payload... }}``; a target with no payload (containers, callbacks, approvals) cannot take one."""
    if spec.dag is not None:
        if any(reads_run_payload(getattr(task.target, "payload", None)) for task in spec.dag.tasks):
            return None
        return (
            "no task of this DAG reads the run's payload: reference it in a task's payload, e.g. "
            '{"day": "{{ run.payload.day }}"}'
        )
    if spec.target is not None and not hasattr(spec.target, "payload"):
        return f"a {spec.target.type} target takes no payload"
    return None


class BackfillTooLarge(ValueError):
    pass


class BackfillLimit(Exception):
    """Too many backfills running: one per job, the team's ``max_backfills`` (#13: no team floods the queues)."""


BACKFILL_SLOTS = "BACKFILLS"  # slot item (sk) on the job's and on the team's partition
BACKFILL_LEASE = timedelta(days=1)  # renewed at every step; an abandoned backfill frees its slots after this


class NoSchedule(ValueError):
    pass


def trigger_run(
    jobs: TriggerStorePort,
    runs: RunsPort,
    queues: WorkQueuesPort,
    job: str,
    *,
    now: datetime,
    principal: str,
    payload: JsonValue = None,
    idempotency_key: str | None = None,
) -> Run:
    stored = jobs.get(job)
    if stored is None:
        raise JobNotFound(job)
    run_id = manual_run_id(now, idempotency_key)
    if idempotency_key is not None:
        run_id = jobs.reserve_idempotency_key(job, idempotency_key, run_id=run_id, now=now, principal=principal)
    message = RunMessage(
        job=job,
        team=stored.spec.team,
        run_id=run_id,
        scheduled_at=instant_text(now),
        fire_at=instant_text(now),
        spec_version=stored.version,
        trigger="manual",
        correlation_id=f"{job}/{run_id}",
        payload_override=payload,
    )
    created = runs.create(
        message, status=RunStatus.SCHEDULED, now=now, retention=stored.spec.run_retention, deadline=stored.spec.deadline
    )
    run = created or runs.get(job, run_id)
    assert run is not None
    if created is not None:
        details = {"run_id": run_id, "idempotency_key": idempotency_key, "payload": payload is not None}
        jobs.record_action(job, version=stored.version, now=now, principal=principal, action="trigger", details=details)
    if run.status is RunStatus.SCHEDULED:
        # New, or a retried request whose first attempt died before sending: (re)send. A duplicate message
        # is harmless, the worker's claim admits one.
        queues.send(stored.spec.priority, [(message, timedelta(0))])
    return run


@dataclass(frozen=True)
class BackfillProgress:
    backfill_id: str
    job: str
    start: datetime
    end: datetime
    total: int
    sent: int
    finished: dict[str, int]  # run status -> count
    in_flight: list[str]
    state: str  # RUNNING | DONE | CANCELLED
    statuses: tuple[str, ...] = ()  # a range rerun: the statuses it runs again (none: never-ran instants only)
    rate_per_minute: int | None = None
    priority: str | None = None  # the class its runs are sent to (None: the job's own)
    rerun: int = 0  # instants that had a run and were run again


def start_backfill(
    jobs: JobsPort,
    job: str,
    *,
    start: datetime,
    end: datetime,
    max_in_flight: int,
    now: datetime,
    principal: str,
    statuses: frozenset[RunStatus] = frozenset(),
    rate_per_minute: int | None = None,
    priority: str | None = None,
    downstream: bool = False,
) -> BackfillProgress:
    """The instants of [start, end] run at most ``max_in_flight`` (and ``rate_per_minute``) at a time.

    An instant with no run record runs. One whose run ended is run again (``reruns``) if its status is in
    ``statuses``, or, without a filter, if it never ran (MISSED, SKIPPED); otherwise it is skipped and
    counted under its status. One still in flight is waited for."""
    stored = jobs.get(job)
    if stored is None:
        raise JobNotFound(job)
    if stored.spec.schedule is None:
        raise NoSchedule(f"{job} has no schedule to backfill")
    if not 1 <= max_in_flight <= MAX_IN_FLIGHT:
        raise ValueError(f"max_in_flight must be 1-{MAX_IN_FLIGHT}")
    if end <= start:
        raise ValueError("the range must end after it starts")
    if end > now:
        raise ValueError("a backfill re-runs the past: the range must end no later than now")
    compiled = schedule_of(stored, CompanySettings.read(jobs))
    assert compiled is not None  # the caller checked the job has a schedule
    instants = list(
        itertools.islice(compiled.fires(start - timedelta(seconds=1), until=end), MAX_BACKFILL_INSTANTS + 1)
    )
    if len(instants) > MAX_BACKFILL_INSTANTS:
        raise BackfillTooLarge(f"the range holds more than {MAX_BACKFILL_INSTANTS} instants; split it")
    backfill_id = f"{instant_text(now)}-{uuid.uuid4().hex[:8]}"
    _take_backfill_slots(jobs, job, stored.spec.team, backfill_id, now=now)
    jobs.put_backfill(
        job,
        backfill_id,
        {
            "start": instant_text(start),
            "end": instant_text(end),
            "max_in_flight": max_in_flight,
            "total": len(instants),
            "sent": 0,
            "finished": {},
            "in_flight": [],
            "state": "RUNNING",
            "created_by": principal,
            "spec_version": stored.version,
            "statuses": sorted(status.value for status in statuses),
            "rate_per_minute": rate_per_minute,
            "priority": priority,
            "rerun": 0,
            "downstream": downstream,
        },
        cursor=start - timedelta(seconds=1),
        due_at=now,
    )
    details = {
        "backfill_id": backfill_id,
        "from": instant_text(start),
        "to": instant_text(end),
        "instants": len(instants),
        "status": sorted(status.value for status in statuses),
        "max_in_flight": max_in_flight,
        "rate_per_minute": rate_per_minute,
        "priority": priority,
        "downstream": downstream,
    }
    action = "reruns" if statuses else "backfill"
    jobs.record_action(job, version=stored.version, now=now, principal=principal, action=action, details=details)
    return get_backfill(jobs, job, backfill_id)


def get_backfill(jobs: JobsPort, job: str, backfill_id: str) -> BackfillProgress:
    item = jobs.get_backfill(job, backfill_id)
    if item is None:
        raise JobNotFound(f"{job} backfill {backfill_id}")
    return _progress(job, backfill_id, item)


def advance_backfill(
    jobs: JobsPort, runs: RunsPort, queues: WorkQueuesPort, job: str, backfill_id: str, *, now: datetime
) -> BackfillProgress:
    """One step: count finished runs, start instants up to max_in_flight (and the rate), move the cursor."""
    item = jobs.get_backfill(job, backfill_id)
    stored = jobs.get(job)
    if item is None or item["state"] != "RUNNING":
        return get_backfill(jobs, job, backfill_id)
    if stored is None or stored.spec.schedule is None:
        jobs.update_backfill(job, backfill_id, item, {"state": "DONE"}, cursor=None, due_at=None)
        _release_backfill_slots(jobs, job, job.split("/", 1)[0], backfill_id)
        return get_backfill(jobs, job, backfill_id)
    step = _BackfillStep(stored, item, dict(item.get("finished") or {}), [], int(item.get("rerun") or 0))
    for run_id in item.get("in_flight") or []:
        step.track(runs.get(job, run_id), run_id)
    room = int(item["max_in_flight"]) - len(step.in_flight)
    if item.get("rate_per_minute"):
        room = min(room, int(item["rate_per_minute"]))  # a step a tick: a tick a minute
    compiled = schedule_of(stored, CompanySettings.read(jobs))
    assert compiled is not None  # a backfill is only started for a job with a schedule
    stream = compiled.fires(_instant(item["cursor"]), until=_instant(item["end"]))
    upcoming = list(itertools.islice(stream, max(room, 0)))
    if upcoming:  # the cursor is an instant: every schedule's run of the last one is started with it
        upcoming += list(itertools.takewhile(lambda o: o.at == upcoming[-1].at, stream))
    messages = [step.start(occurrence, runs, queues, now, backfill_id) for occurrence in upcoming]
    sent_now = [message for message in messages if message is not None]
    if sent_now:
        queues.send(item.get("priority") or stored.spec.priority, [(message, timedelta(0)) for message in sent_now])
    cursor = upcoming[-1].at if upcoming else _instant(item["cursor"])
    sent = int(item["sent"]) + len(upcoming)
    done = sent >= int(item["total"]) and not step.in_flight
    changes: dict[str, Any] = {
        "finished": step.finished,
        "in_flight": step.in_flight,
        "sent": sent,
        "rerun": step.rerun,
        "state": "DONE" if done else "RUNNING",
    }
    jobs.update_backfill(job, backfill_id, item, changes, cursor=cursor, due_at=None if done else now)
    if done:
        _release_backfill_slots(jobs, job, stored.spec.team, backfill_id)
    else:
        _renew_backfill_slots(jobs, job, stored.spec.team, backfill_id, now=now)
    return get_backfill(jobs, job, backfill_id)


@dataclass
class _BackfillStep:
    stored: StoredJob
    item: dict[str, Any]
    finished: dict[str, int]
    in_flight: list[str]
    rerun: int

    def track(self, run: Run | None, run_id: str) -> None:
        """An instant started earlier: counted when its run has ended, waited for until then."""
        if run is not None and run.status in TERMINAL:
            self.finished[run.status.value] = self.finished.get(run.status.value, 0) + 1
        else:
            self.in_flight.append(run_id)

    def start(
        self, occurrence: Occurrence, runs: RunsPort, queues: WorkQueuesPort, now: datetime, backfill_id: str
    ) -> RunMessage | None:
        """One instant of the range: its message if it is new; a rerun (sent here) if its run qualifies."""
        spec = self.stored.spec
        message = scheduled_message(
            self.stored,
            occurrence,
            fire_at=now,
            trigger="backfill",
            correlation_id=f"{spec.key}/backfill/{backfill_id}",
        )
        existing = runs.get(spec.key, message.run_id)
        if existing is None:
            self.in_flight.append(message.run_id)
            return message
        wanted = frozenset(RunStatus(value) for value in self.item.get("statuses") or ()) or NEVER_RAN
        if existing.status in wanted:
            try:
                reopen_and_send(
                    self.stored,
                    existing,
                    runs,
                    queues,
                    now=now,
                    reason=f"rerun by backfill {backfill_id}",
                    downstream=bool(self.item.get("downstream")),
                )
                self.rerun += 1
            except StaleAttempt:
                pass  # changed since it was read (rerun by someone else): waited for like any run in flight
            self.in_flight.append(message.run_id)
        else:
            self.track(existing, message.run_id)
        return None


def cancel_backfill(jobs: JobsPort, job: str, backfill_id: str, *, now: datetime, principal: str) -> BackfillProgress:
    """Stop sending (runs already started go on); the backfill's slots are released."""
    item = jobs.get_backfill(job, backfill_id)
    if item is None:
        raise JobNotFound(f"{job} backfill {backfill_id}")
    if item["state"] == "RUNNING":
        if not jobs.update_backfill(job, backfill_id, item, {"state": "CANCELLED"}, cursor=None, due_at=None):
            # A tick stepped it meanwhile: cancel what it wrote.
            return cancel_backfill(jobs, job, backfill_id, now=now, principal=principal)
        _release_backfill_slots(jobs, job, job.split("/", 1)[0], backfill_id)
        jobs.record_action(
            job,
            version=int(item.get("spec_version") or 0),
            now=now,
            principal=principal,
            action="backfill_cancel",
            details={"backfill_id": backfill_id, "sent": int(item["sent"]), "total": int(item["total"])},
        )
    return get_backfill(jobs, job, backfill_id)


def _take_backfill_slots(jobs: JobsPort, job: str, team: str, backfill_id: str, *, now: datetime) -> None:
    holder = f"{job}#{backfill_id}"
    lease = now + BACKFILL_LEASE
    if not jobs.acquire_slot(job, BACKFILL_SLOTS, holder=holder, lease_until=lease, limit=1, now=now).acquired:
        raise BackfillLimit(f"{job} already has a backfill running; wait for it or let it finish")
    team_slots = f"{JobsKeys.TEAM_PREFIX}{team}"
    limit = jobs.team_limits(team).max_backfills
    acquired = jobs.acquire_slot(team_slots, BACKFILL_SLOTS, holder=holder, lease_until=lease, limit=limit, now=now)
    if not acquired.acquired:
        jobs.release_slot(job, BACKFILL_SLOTS, holder=holder)
        raise BackfillLimit(f"team {team} already has {limit} backfills running (its max_backfills)")


def _renew_backfill_slots(jobs: JobsPort, job: str, team: str, backfill_id: str, *, now: datetime) -> None:
    """Extend the running backfill's leases. Never refuses: it holds its slots already (a lease lost to
    eviction after a day without steps is simply not taken back), and a refusal here would stop the tick."""
    holder = f"{job}#{backfill_id}"
    lease = now + BACKFILL_LEASE
    jobs.acquire_slot(job, BACKFILL_SLOTS, holder=holder, lease_until=lease, limit=1, now=now)
    team_slots = f"{JobsKeys.TEAM_PREFIX}{team}"
    limit = jobs.team_limits(team).max_backfills
    jobs.acquire_slot(team_slots, BACKFILL_SLOTS, holder=holder, lease_until=lease, limit=limit, now=now)


def _release_backfill_slots(jobs: JobsPort, job: str, team: str, backfill_id: str) -> None:
    holder = f"{job}#{backfill_id}"
    jobs.release_slot(f"{JobsKeys.TEAM_PREFIX}{team}", BACKFILL_SLOTS, holder=holder)
    jobs.release_slot(job, BACKFILL_SLOTS, holder=holder)


def _progress(job: str, backfill_id: str, item: dict[str, Any]) -> BackfillProgress:
    return BackfillProgress(
        backfill_id=backfill_id,
        job=job,
        start=_instant(item["start"]),
        end=_instant(item["end"]),
        total=int(item["total"]),
        sent=int(item["sent"]),
        finished={str(k): int(v) for k, v in (item.get("finished") or {}).items()},
        in_flight=list(item.get("in_flight") or []),
        state=str(item["state"]),
        statuses=tuple(item.get("statuses") or ()),
        rate_per_minute=int(item["rate_per_minute"]) if item.get("rate_per_minute") else None,
        priority=item.get("priority"),
        rerun=int(item.get("rerun") or 0),
    )


def _instant(text: str) -> datetime:
    return parse_instant(text)
