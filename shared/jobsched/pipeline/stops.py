"""Emergency stop by selector: every job of the named teams that matches (tags, target types) paused in one audited
call, optionally with its running runs cancelled, recorded as one stop; and its resume, of exactly the jobs that
stop paused (still paused by it), with the catch-up the resumer chooses.

Each job's pause is its own audited change (reason ``emergency stop {id}: {why}``, the caller as principal), so a
job's history says who stopped it and why. A job already paused is listed and left alone: the stop's resume never
resumes what it did not pause, nor a job someone paused again for another reason since. Catch-up on resume:
``none`` runs nothing that fell in the stop; ``latest`` runs its last instant; ``all`` runs every instant, each as a
backfill (throttled, the instants' own run ids, so nothing runs twice and no target is flooded).

Bounded: at most ``MAX_STOP_TEAMS`` teams and ``MAX_STOPPED_JOBS`` jobs a stop (the team index, a page at a time).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from jobsched.core.records import StoredJob
from jobsched.core.run_records import Run
from jobsched.core.runs import instant_text
from jobsched.core.stops import Catchup, Selector, Stop
from jobsched.pipeline.manual_runs import BackfillLimit, BackfillTooLarge, start_backfill
from jobsched.ports import RegistryPort, StopsPort
from jobsched.registry.jobs import pause_job, resume_job
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.fires import schedule_of

MAX_STOP_TEAMS = 20
MAX_STOPPED_JOBS = 2000
PAGE = 500
CATCHUP_IN_FLIGHT = 2  # a resumed job's catch-up backfill: two instants at a time


class StopNotFound(LookupError):
    pass


class StopAlreadyResumed(ValueError):
    pass


class TooManyStopped(ValueError):
    pass


class StopJobs(RegistryPort, StopsPort, Protocol):
    """The jobs store as stops use it."""


def matching_jobs(jobs: StopJobs, selector: Selector) -> list[StoredJob]:
    """The selector's jobs, team by team through the team index; TooManyStopped past the bound."""
    found: list[StoredJob] = []
    for team in selector.teams:
        after: str | None = None
        while True:
            keys, after = jobs.team_page(team, limit=PAGE, after_name=after)
            stored = jobs.get_many(keys) if keys else {}
            found += [stored[key] for key in keys if key in stored and selector.matches(stored[key].spec)]
            if len(found) > MAX_STOPPED_JOBS:
                raise TooManyStopped(f"the selector matches more than {MAX_STOPPED_JOBS} jobs; narrow it")
            if after is None:
                break
    return found


def stop_jobs(
    jobs: StopJobs,
    selector: Selector,
    *,
    reason: str,
    principal: str,
    now: datetime,
    cancel: Callable[[str], Sequence[Run]] | None = None,
) -> Stop:
    """Pause every matching job (``cancel``: also cancel its running runs) and record the stop."""
    matched = matching_jobs(jobs, selector)
    stop = Stop(f"stop-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}", reason, principal, now, selector)
    stopped, already, cancelled = [], [], []
    for stored in matched:
        if stored.state == "PAUSED":
            already.append(stored.key)
            continue
        paused = pause_job(jobs, stored.key, now=now, principal=principal, reason=stop.pause_reason)
        stopped.append(stored.key)
        for run in cancel(stored.key) if cancel is not None else ():
            cancelled.append(f"{stored.key} {run.run_id}")
            jobs.record_action(
                stored.key,
                version=paused.version,
                now=now,
                principal=principal,
                action="cancel",
                details={"run_id": run.run_id, "attempt": run.attempt, "why": f"emergency stop {stop.stop_id}"},
            )
    stop = replace(stop, stopped=tuple(stopped), already_paused=tuple(already), cancelled=tuple(cancelled))
    jobs.put_stop(stop)
    return stop


def resume_stopped(jobs: StopJobs, stop_id: str, *, catchup: Catchup, principal: str, now: datetime) -> Stop:
    """Resume exactly the jobs the stop paused and that it still holds, each with ``catchup``; once."""
    stop = jobs.get_stop(stop_id)
    if stop is None:
        raise StopNotFound(stop_id)
    if stop.resumed_at is not None:
        raise StopAlreadyResumed(f"{stop_id} was resumed at {instant_text(stop.resumed_at)} by {stop.resumed_by}")
    done = []
    company = CompanySettings.read(jobs)  # once for the whole stop, not once a job
    for key in stop.stopped:
        current = jobs.get(key)
        if current is None:
            done.append({"job": key, "outcome": "deleted since"})
            continue
        if current.state != "PAUSED" or current.paused_reason != stop.pause_reason:
            done.append({"job": key, "outcome": "left: resumed or paused again since"})
            continue
        paused_at = current.paused_at or stop.at
        resume_job(jobs, key, now=now, principal=principal, company=company)
        caught_up = _catch_up(jobs, current, catchup, company, paused_at=paused_at, now=now, who=principal)
        done.append({"job": key, **caught_up})
    resumed = replace(stop, resumed_at=now, resumed_by=principal, catchup=catchup, resumed=tuple(done))
    if not jobs.resume_stop_once(resumed):
        raise StopAlreadyResumed(f"{stop_id} was resumed meanwhile")
    return resumed


def _catch_up(
    jobs: StopJobs,
    stored: StoredJob,
    catchup: Catchup,
    company: CompanySettings,
    *,
    paused_at: datetime,
    now: datetime,
    who: str,
) -> dict[str, str]:
    """What falls in the stop runs as a backfill: none of it, its latest instant, or all of it."""
    compiled = schedule_of(stored, company)
    if catchup == "none" or compiled is None:
        return {"outcome": "resumed", "catch_up": "none"}
    missed = list(itertools.islice(compiled.fires(paused_at, until=now), 10_001))
    if not missed:
        return {"outcome": "resumed", "catch_up": "nothing fell in the stop"}
    start = missed[-1].at if catchup == "latest" else missed[0].at
    if start >= now:
        return {"outcome": "resumed", "catch_up": "nothing fell in the stop"}
    try:
        progress = start_backfill(
            jobs, stored.key, start=start, end=now, max_in_flight=CATCHUP_IN_FLIGHT, now=now, principal=who
        )
    except (BackfillTooLarge, BackfillLimit, ValueError) as refused:
        return {"outcome": "resumed", "catch_up": f"not started: {refused}"}
    count = 1 if catchup == "latest" else len(missed)
    return {"outcome": "resumed", "catch_up": f"{count} instant(s) as backfill {progress.backfill_id}"}
