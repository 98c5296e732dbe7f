"""When a job fires: the one place a job's schedule is compiled for it. Pure.

A job's schedule is compiled with its key (``team/name`` fixes its ``H`` fields and its jitter) and anchored at
its registration (``rate()`` intervals count from there, unless the schedule names ``start_at``). Everything
that asks when a job fires asks here: the dispatcher, registering and resuming, triggers and backfills, the
lost-message audit, and every preview (API, console, CLI), so a preview shows the instants the dispatcher fires.
A job not registered yet (validate, lint, a PUT's preview, capacity) is previewed as if registered at the
instant the preview starts from.

The dispatcher's own "next visit" (``DispatchState.next_visit_at``) is not a fire time: it is when the dispatcher
next looks at the job, at or before its next fire (``pipeline.dispatch``).
"""

from __future__ import annotations

from datetime import datetime

from jobsched.core.records import StoredJob
from jobsched.core.runs import RunMessage, Trigger
from jobsched.core.spec import JobSpec, Schedule
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.engine import CompiledSchedule, Occurrence, compile_schedule
from jobsched.schedule.several import SeveralSchedules


def schedule_of(stored: StoredJob, company: CompanySettings) -> CompiledSchedule | None:
    """A registered job's schedule; None for a job that has none (triggered only)."""
    return preview_schedule(stored.spec, registered_at=stored.created_at, company=company)


def preview_schedule(spec: JobSpec, *, registered_at: datetime, company: CompanySettings) -> CompiledSchedule | None:
    """The schedule ``spec`` has once registered at ``registered_at``, with the company calendar it names and the
    maintenance windows that apply to it (``company``)."""
    schedules = [schedule_for(s, job=spec.key, registered_at=registered_at) for s in company.effective(spec)]
    if len(schedules) > 1:
        return SeveralSchedules(schedules)
    return schedules[0] if schedules else None


def schedule_for(schedule: Schedule, *, job: str, registered_at: datetime) -> CompiledSchedule:
    """A schedule as the job ``job`` (team/name) registered at ``registered_at`` would fire it (the CLI's preview
    of an expression typed with a job's name)."""
    return compile_schedule(schedule, hash_key=job, anchor=registered_at)


def scheduled_message(
    stored: StoredJob,
    occurrence: Occurrence,
    *,
    fire_at: datetime,
    trigger: Trigger = "schedule",
    correlation_id: str | None = None,
) -> RunMessage:
    """The run message of a scheduled instant: its run id (a distinct schedule's adds its name), and with several
    schedules the one that fired it (on the run: ``trigger_detail``) and that schedule's payload."""
    spec = stored.spec
    named = spec.schedule if occurrence.schedule is None else spec.schedule_named(occurrence.schedule)
    return RunMessage.scheduled(
        job=spec.key,
        team=spec.team,
        at=occurrence.at,
        fire_at=fire_at,
        spec_version=stored.version,
        trigger=trigger,
        correlation_id=correlation_id,
        run_id=occurrence.run_id,
        schedule=occurrence.schedule,
        payload=named.payload if named is not None else None,
    )


def next_fire(stored: StoredJob, after: datetime, company: CompanySettings) -> datetime | None:
    """The job's first fire time after ``after``; None when none is left (or it has no schedule)."""
    return first_fire(stored.spec, registered_at=stored.created_at, after=after, company=company)


def first_fire(spec: JobSpec, *, registered_at: datetime, after: datetime, company: CompanySettings) -> datetime | None:
    """``next_fire`` for a spec registered (or about to be) at ``registered_at``."""
    compiled = preview_schedule(spec, registered_at=registered_at, company=company)
    upcoming = compiled.next_fires(after, 1) if compiled is not None else []
    return upcoming[0].at if upcoming else None
