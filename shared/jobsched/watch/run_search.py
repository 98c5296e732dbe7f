"""Run search (#46): a job's runs, or every run of a team's jobs, newest first, by time range, status, trigger
kind, attempts and error text, a page at a time. Bounded: each job's query reads at most ``EVALUATED_PER_JOB``
runs a page, and a team search asks at most its first ``MAX_TEAM_JOBS`` jobs.

Run ids begin with their instant (``20270104T090000Z…``), in every job alike, so "newest first" across jobs is the
order of (run id, job), and a page's cursor is the last (run id, job) it returned. A job whose query stopped at its
read bound before its range ended leaves the page complete only down to where it stopped: the page keeps what is
certain and the cursor continues from there, so no run is skipped or shown twice however the reads are bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, get_args

from jobsched.core.durations import parse_duration
from jobsched.core.run_records import Run
from jobsched.core.runs import RunStatus, Trigger, scheduled_run_id
from jobsched.core.tz import UTC

EVALUATED_PER_JOB = 300  # runs one job's query may read for one page
MAX_TEAM_JOBS = 500
READERS = 16  # jobs queried at once
TRIGGERS: tuple[str, ...] = get_args(Trigger)  # an after trigger's runs are "event" runs
LAST_ID = "\uffff"


class SearchRefused(ValueError):
    """A search parameter that cannot be used: ``field`` names it, ``code`` is the API's stable code."""

    def __init__(self, field: str, code: str, message: str) -> None:
        super().__init__(message)
        self.field, self.code = field, code


@dataclass(frozen=True)
class RunFilter:
    statuses: tuple[RunStatus, ...] = ()
    trigger: str | None = None
    min_attempts: int | None = None
    error: str | None = None  # a run whose error contains this text (case as written)
    since: datetime | None = None  # runs whose instant is at or after this
    until: datetime | None = None  # ... and at or before this

    def id_range(self) -> tuple[str, str]:
        first = scheduled_run_id(self.since) if self.since else "0"
        last = scheduled_run_id(self.until) + LAST_ID if self.until else LAST_ID
        return first, last


@dataclass(frozen=True)
class Cursor:
    """Where a page ended: the next page has only (run id, job) strictly before it."""

    run_id: str
    job: str

    def text(self) -> str:
        return f"{self.run_id}|{self.job}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        run_id, separator, job = text.partition("|")
        if not separator or not run_id:
            raise SearchRefused("next_token", "invalid_next_token", f"{text!r} is not a page token this search gave")
        return cls(run_id, job)


def search_filter(
    status: str | None,
    trigger: str | None,
    min_attempts: int | None,
    error: str | None,
    since: str | None,
    until: str | None,
    now: datetime,
) -> RunFilter:
    """The filter from what a person typed (the API's query string, the console's parameters)."""
    statuses = tuple(part.strip() for part in status.split(",")) if status else ()
    unknown = [part for part in statuses if part not in RunStatus.__members__]
    if unknown:
        allowed = ", ".join(RunStatus.__members__)
        raise SearchRefused("status", "invalid_status", f"unknown status {unknown[0]!r}; allowed: {allowed}")
    if trigger is not None and trigger not in TRIGGERS:
        allowed = ", ".join(TRIGGERS)
        raise SearchRefused("trigger", "invalid_trigger", f"unknown trigger {trigger!r}; allowed: {allowed}")
    return RunFilter(
        statuses=tuple(RunStatus(part) for part in statuses),
        trigger=trigger,
        min_attempts=min_attempts,
        error=error,
        since=_when(since, now, "since"),
        until=_when(until, now, "until"),
    )


def _when(text: str | None, now: datetime, field: str) -> datetime | None:
    """An instant with its offset, or a span back from now ("6h")."""
    if text is None:
        return None
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        message = f"{text!r}: give an instant with its offset or a span like 6h"
        raise SearchRefused(field, "invalid_instant", message)
    return instant.astimezone(UTC)


class RunQueries(Protocol):
    def matching(
        self, job: str, *, first: str, last: str, where: RunFilter, evaluate: int, limit: int
    ) -> tuple[list[Run], str | None]:
        """``job``'s runs with ids in [first, last] that match, newest first: at most ``limit``, reading at most
        ``evaluate``. The second value: the run id it stopped reading at, if the range was not read to its end."""
        ...


@dataclass(frozen=True)
class RunSearchPage:
    runs: list[Run]
    cursor: Cursor | None


def search_runs(
    queries: RunQueries, jobs: Sequence[str], where: RunFilter, *, limit: int, after: Cursor | None = None
) -> RunSearchPage:
    first, last = where.id_range()
    if after is not None:
        last = min(last, after.run_id)

    def one(job: str) -> tuple[str, list[Run], str | None]:
        found, stopped = queries.matching(
            job, first=first, last=last, where=where, evaluate=EVALUATED_PER_JOB, limit=limit + 1
        )
        return job, found, stopped

    with ThreadPoolExecutor(max_workers=max(1, min(READERS, len(jobs)))) as pool:
        answers = list(pool.map(one, jobs))
    found = [
        run
        for _, runs, _ in answers
        for run in runs
        if after is None or (run.run_id, run.job) < (after.run_id, after.job)
    ]
    stops = [stopped for _, _, stopped in answers if stopped is not None]
    # Where every job has been read down to: runs older than that may exist unread in the job that stopped.
    floor = max(stops) if stops else None
    certain = sorted((run for run in found if floor is None or run.run_id >= floor), key=_order, reverse=True)
    if len(certain) > limit:
        shown = certain[:limit]
        return RunSearchPage(shown, Cursor(shown[-1].run_id, shown[-1].job))
    if floor is not None:
        return RunSearchPage(certain, Cursor(floor, ""))  # the next page: run ids below the floor
    return RunSearchPage(certain, None)


def _order(run: Run) -> tuple[str, str]:
    return run.run_id, run.job
