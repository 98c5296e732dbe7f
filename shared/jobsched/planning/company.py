"""Changing a company calendar or maintenance window: which jobs' next fires move, refused if a job it moves would
break the organisation's policy (or its schedule would cost unbounded work), stored with its history, and the moved
jobs' next visits pulled in so an instant the change brings forward is not found late.

The jobs a change reaches: those that name the entry (reverse edges written when a job is stored, no scan) and, for
a window with a selector, the jobs of the teams it names that match. Bounded: at most ``MAX_CHANGE_JOBS`` jobs; a
change reaching more is refused (split the calendar, or name fewer teams).

A change is seen by the dispatcher at its next tick (it reads the settings once a tick); instants it had already
sent (up to its lookahead, minutes) run as sent.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.errors import FieldError
from jobsched.core.names import JobsKeys
from jobsched.core.records import StoredJob
from jobsched.core.runs import instant_text
from jobsched.core.spec import JobSpec
from jobsched.core.spec.company import CompanyCalendar, CompanyKind, MaintenanceWindow
from jobsched.ports import RegistryPort
from jobsched.registry.policy import OrgPolicy
from jobsched.registry.policy import admission_errors as policy_errors
from jobsched.schedule.company import COMPANY_LINK, CompanySettings
from jobsched.schedule.engine import window_starts
from jobsched.schedule.fires import preview_schedule, schedule_of
from jobsched.schedule.steps import ScheduleTooExpensive
from jobsched.tenancy.admission import schedule_cost_errors

MAX_CHANGE_JOBS = 1000  # jobs one change may reach (the reverse edges are read up to as many)
COMPARED_FIRES = 5  # each job's next fires compared before and after
WINDOW_OPENINGS = 4  # a changed window's next openings, where each job's fires are sampled for the policy
COMPARED_SPAN = timedelta(days=400)
PAGE = 500
CHANGE_HISTORY = JobsKeys.COMPANY  # the company's changes: AUDIT# items beside its entries


class TooManyJobs(ValueError):
    pass


class EntryInUse(ValueError):
    def __init__(self, reference: str, jobs: list[str]) -> None:
        shown = ", ".join(jobs[:20]) + (f" and {len(jobs) - 20} more" if len(jobs) > 20 else "")
        super().__init__(f"{reference} is named by {len(jobs)} job(s): {shown}; change them first")
        self.jobs = jobs


@dataclass(frozen=True)
class MovedJob:
    job: str
    before: list[str]  # its next fires under the settings now
    after: list[str]  # under the changed ones


@dataclass
class CompanyChange:
    kind: CompanyKind
    reference: str
    reached: int = 0  # jobs the change reaches (named by, or matched by its selector)
    moved: list[MovedJob] = field(default_factory=list)
    refused: list[FieldError] = field(default_factory=list)  # a job it would make break the policy
    applied: bool = False


def change_company_entry(
    store: RegistryPort,
    kind: CompanyKind,
    reference: str,
    document: dict[str, Any] | None,
    *,
    policy: OrgPolicy,
    now: datetime,
    principal: str,
    reason: str,
    dry_run: bool = False,
) -> CompanyChange:
    """Preview (``dry_run``) or apply one entry's change (``document`` None: delete it, refused while jobs name
    it). Applied only when no job it reaches would break the policy."""
    before = CompanySettings.read(store)
    entry = _entry(kind, document)
    after = before.with_entry(kind, reference, entry)
    reached = _reached(store, kind, reference, before, after)
    change = CompanyChange(kind, reference, reached=len(reached))
    if entry is None and any(reference in job.spec.company_references() for job in reached):
        raise EntryInUse(reference, sorted(j.key for j in reached if reference in j.spec.company_references()))
    for job in reached:
        old, new = _next_fires(job, before, now), _next_fires(job, after, now)
        if old != new:
            change.moved.append(MovedJob(job.key, old, new))
        change.refused += _new_breaches(job, before, after, policy, now, _openings(entry, reference, now))
    if dry_run or change.refused:
        return change
    store.put_company_entry(kind, reference, entry.model_dump(mode="json", exclude_none=True) if entry else None)
    _record(store, change, document, principal=principal, reason=reason, now=now)
    _pull_in_visits(store, [job for job in reached if job.key in {m.job for m in change.moved}], after, now)
    change.applied = True
    return change


def _entry(kind: CompanyKind, document: dict[str, Any] | None) -> CompanyCalendar | MaintenanceWindow | None:
    if document is None:
        return None
    return (
        CompanyCalendar.model_validate(document) if kind == "calendar" else MaintenanceWindow.model_validate(document)
    )


def _reached(
    store: RegistryPort, kind: CompanyKind, reference: str, before: CompanySettings, after: CompanySettings
) -> list[StoredJob]:
    """The jobs that name the entry, and (a window) those its selector matches, before or after the change."""
    keys = set(store.downstreams(COMPANY_LINK + reference))
    if len(keys) >= MAX_CHANGE_JOBS:
        raise TooManyJobs(f"{reference} is named by {MAX_CHANGE_JOBS} jobs or more; a change reaches at most that many")
    selected: list[StoredJob] = []
    if kind == "maintenance":
        teams = set()
        for settings in (before, after):
            window = settings.windows.get(reference)
            if window is not None and window.applies_to is not None:
                teams |= set(window.applies_to.teams)
        for team in sorted(teams):
            selected += _team_jobs(store, team, len(keys) + len(selected))
    found = store.get_many(sorted(keys)) if keys else {}
    # A reverse edge is a hint: the job's spec says whether it still names the entry.
    named = [job for job in found.values() if reference in job.spec.company_references()]
    return sorted({job.key: job for job in [*named, *selected]}.values(), key=lambda job: job.key)


def _team_jobs(store: RegistryPort, team: str, counted: int) -> list[StoredJob]:
    jobs: list[StoredJob] = []
    after: str | None = None
    while True:
        keys, after = store.team_page(team, limit=PAGE, after_name=after)
        found = store.get_many(keys) if keys else {}
        jobs += [found[key] for key in keys if key in found and found[key].spec.schedule is not None]
        if counted + len(jobs) > MAX_CHANGE_JOBS:
            raise TooManyJobs(f"the change reaches more than {MAX_CHANGE_JOBS} jobs; name fewer teams in applies_to")
        if after is None:
            return jobs


def _next_fires(job: StoredJob, company: CompanySettings, now: datetime) -> list[str]:
    if job.state != "ACTIVE":
        return []
    compiled = schedule_of(job, company)
    if compiled is None:
        return []
    try:
        return [instant_text(o.fire_at) for o in compiled.next_fires(now, COMPARED_FIRES, horizon=COMPARED_SPAN)]
    except ScheduleTooExpensive:
        return ["(too expensive to compute)"]


def _openings(entry: CompanyCalendar | MaintenanceWindow | None, reference: str, now: datetime) -> list[datetime]:
    """Where a window bunches fires: its next openings (a calendar only removes days)."""
    if not isinstance(entry, MaintenanceWindow):
        return []
    return window_starts(entry.blackout(reference), now, WINDOW_OPENINGS)


def _new_breaches(
    job: StoredJob,
    before: CompanySettings,
    after: CompanySettings,
    policy: OrgPolicy,
    now: datetime,
    around: list[datetime],
) -> list[FieldError]:
    """What the job would break under the changed settings that it does not break now, each named by the job."""
    written = job.spec.model_dump(mode="json", exclude_unset=True)

    def breaches(company: CompanySettings) -> Iterator[FieldError]:
        yield from schedule_cost_errors(job.spec, now, company)
        yield from policy_errors(written, job.spec, policy, now=now, company=company, around=around)

    known = {(e.path, e.message) for e in breaches(before)}
    return [
        FieldError(f"jobs[{job.key}].{e.path}", e.code, f"{job.key}: {e.message}")
        for e in itertools.islice(breaches(after), 10)
        if (e.path, e.message) not in known
    ]


def _record(
    store: RegistryPort, change: CompanyChange, document: dict[str, Any] | None, *, principal: str, reason: str,
    now: datetime,
) -> None:  # fmt: skip
    """In the company's history (GET /admin/company/history): who changed which entry to what, and what moved."""
    latest, _ = store.history(CHANGE_HISTORY, limit=1)  # numbered: changes in one ms keep their order
    store.record_action(
        CHANGE_HISTORY,
        version=latest[0].version + 1 if latest else 1,
        now=now,
        principal=principal,
        action=f"{change.kind}_{'deleted' if document is None else 'set'}",
        reason=reason,
        details={
            "entry": change.reference,
            "document": document,
            "moved": [moved.job for moved in change.moved[:100]],
            "reached": change.reached,
        },
    )


def _pull_in_visits(store: RegistryPort, moved: list[StoredJob], company: CompanySettings, now: datetime) -> None:
    """A moved job whose next instant comes earlier is visited by then (a visit too early finds nothing due and
    sets the next one; a visit too late would find its instant overdue)."""
    for job in moved:
        state = store.get_state(job.key)
        compiled = schedule_of(job, company)
        if state is None or state.next_visit_at is None or compiled is None or job.state != "ACTIVE":
            continue
        upcoming = compiled.next_fires(state.cursor, 1)
        if upcoming and upcoming[0].at < state.next_visit_at:
            store.advance(
                job.key,
                spec_version=state.spec_version,
                old_cursor=state.cursor,
                cursor=state.cursor,
                next_visit_at=max(min(upcoming[0].at, state.next_visit_at), now),
            )


MAX_COMPARED = 100_000  # instants of one job followed in one comparison


@dataclass(frozen=True)
class MovedFires:
    """A job file's instants in a range that a company change adds and removes (``jobsched simulate --compare``)."""

    job: str
    added: list[str]
    removed: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "added": self.added, "removed": self.removed}


def compare_fires(
    specs: list[JobSpec], before: CompanySettings, after: CompanySettings, *, start: datetime, end: datetime
) -> list[MovedFires]:
    """Each job whose fire times in (start, end] differ between two company settings."""
    moved = []
    for spec in specs:
        old, new = (_fires_between(spec, company, start, end) for company in (before, after))
        if old != new:
            moved.append(MovedFires(spec.key, sorted(new - old), sorted(old - new)))
    return moved


def _fires_between(spec: JobSpec, company: CompanySettings, start: datetime, end: datetime) -> set[str]:
    compiled = preview_schedule(spec, registered_at=start, company=company)
    if compiled is None:
        return set()
    return {instant_text(o.fire_at) for o in itertools.islice(compiled.fires(start, until=end), MAX_COMPARED)}
