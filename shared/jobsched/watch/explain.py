"""Why did (or will, or didn't) a job run at an instant: one answer from the schedule in effect then (calendar,
blackout, DST gap or fold), the job's history (created, paused, changed), the dispatcher's progress and the run
records for that instant (ran, failed, held by a breaker or max_running, waiting, skipped, missed or lost).
Pure: the caller reads what it needs (``ExplainInputs``) and passes ``now``.

An instant is asked as an ISO instant with its offset ("2027-03-28T01:30:00Z") or as a wall time in the job's
timezone ("2027-03-28T02:30"); a wall time a DST change skips or repeats is answered as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from jobsched.core.bounds import STORED
from jobsched.core.durations import format_duration
from jobsched.core.records import AuditEntry, DispatchState, StoredJob
from jobsched.core.run_records import Run
from jobsched.core.runs import RunStatus, instant_text, scheduled_run_id
from jobsched.core.spec import JobSpec
from jobsched.core.tz import UTC, get_zone
from jobsched.schedule.company import NO_COMPANY, CompanySettings
from jobsched.schedule.dst import WallKind, local_wall, resolve_wall
from jobsched.schedule.engine import Occurrence
from jobsched.schedule.fires import preview_schedule, schedule_of
from jobsched.schedule.steps import ScheduleTooExpensive

Verdict = Literal[
    "ran",  # succeeded
    "failed",
    "running",
    "waiting",  # for data or an upstream (wait_for)
    "held",  # its first attempt waits: max_running, the team's limit, an open circuit
    "skipped",  # by the schedule (calendar, blackout, DST) or at run time (overlap, a pause)
    "missed",  # recorded MISSED: the catch-up policy, or its message was lost
    "cancelled",
    "will-fire",
    "will-not-fire",
    "not-scheduled",  # the schedule names no such instant
    "no-record",  # it should have fired and nothing says what happened (yet)
]

AUDIT_ENTRIES_READ = 500  # at most this much of a job's history is read to explain one instant
NEAREST_WINDOWS = (timedelta(days=1), timedelta(days=31))  # where the nearest earlier fire is looked for


class NotAnInstant(ValueError):
    """The asked text is neither an ISO instant nor a wall time."""


@dataclass(frozen=True)
class ExplainInputs:
    stored: StoredJob
    history: Sequence[AuditEntry]  # newest first, at most AUDIT_ENTRIES_READ
    runs: dict[datetime, list[Run]]  # per instant asked about: the runs whose id begins with its instant
    dispatch: DispatchState | None
    now: datetime
    company: CompanySettings = NO_COMPANY  # the company calendars and windows its schedule names


@dataclass(frozen=True)
class InstantAnswer:
    at: datetime  # the instant, UTC (the scheduled run's id)
    wall: str  # as the job's timezone shows it
    verdict: Verdict
    why: list[str]
    run: Run | None = None
    other_runs: list[Run] = field(default_factory=list)  # manual or event runs started in the same second


@dataclass(frozen=True)
class Explanation:
    job: str
    asked: str
    timezone: str
    answers: list[InstantAnswer]  # two for a wall time that occurs twice, else one
    notes: list[str]  # about the asked text itself (a DST gap, a fold)
    next_fire: datetime | None


def instants_asked(text: str, spec: JobSpec) -> tuple[list[datetime], list[str]]:
    """The instant(s) the text names, and what is worth saying about how it was read."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    except ValueError:
        raise NotAnInstant(
            f"{text!r} is not an instant: give 2027-01-04T09:00:00Z (with its offset) or a wall time"
            " 2027-01-04T09:00 in the job's timezone"
        ) from None
    if parsed.tzinfo is not None:
        return [parsed.astimezone(UTC).replace(microsecond=0)], []
    name = spec.schedule.timezone if spec.schedule is not None else "UTC"
    zone = get_zone(name)
    resolved = resolve_wall(parsed.replace(microsecond=0), zone)
    wall = parsed.strftime("%Y-%m-%d %H:%M")
    if resolved.kind is WallKind.GAP:
        note = f"{wall} does not exist in {name}: the clocks skip it (DST gap); the first instant after the gap is used"
        return list(resolved.instants), [note]
    if resolved.kind is WallKind.FOLD:
        return list(resolved.instants), [f"{wall} occurs twice in {name} (DST overlap): both are answered"]
    return list(resolved.instants), []


class ExplainJobs(Protocol):
    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]: ...
    def get_state(self, job: str) -> DispatchState | None: ...
    def company_entries(self) -> dict[str, dict[str, Any]]: ...


class ExplainRuns(Protocol):
    def page(
        self,
        job: str,
        *,
        limit: int = 50,
        newest_first: bool = True,
        after_run_id: str | None = None,
        between: tuple[str, str] | None = None,
    ) -> tuple[list[Run], str | None]: ...


RUNS_PER_INSTANT = 20  # runs read for one instant: its scheduled run and those triggered in the same second


def explanation_for(jobs: ExplainJobs, runs: ExplainRuns, stored: StoredJob, asked: str, now: datetime) -> Explanation:
    """Read what the answer needs (bounded: AUDIT_ENTRIES_READ history entries, RUNS_PER_INSTANT runs per
    instant, the job's STATE item), then answer. NotAnInstant before any read."""
    instants, _ = instants_asked(asked, stored.spec)
    history: list[AuditEntry] = []
    token = None
    while len(history) < AUDIT_ENTRIES_READ:
        page, token = jobs.history(stored.key, limit=100, before=token)
        history += page
        if token is None:
            break
    at_instant = {}
    for instant in instants:
        first = scheduled_run_id(instant)
        found, _ = runs.page(stored.key, limit=RUNS_PER_INSTANT, newest_first=False, between=(first, first + "\uffff"))
        at_instant[instant] = found
    company = CompanySettings.read(jobs)
    return explain(asked, ExplainInputs(stored, history, at_instant, jobs.get_state(stored.key), now, company))


def explain(asked: str, inputs: ExplainInputs) -> Explanation:
    stored = inputs.stored
    instants, notes = instants_asked(asked, stored.spec)
    zone = stored.spec.schedule.timezone if stored.spec.schedule is not None else "UTC"
    answers = [_answer(at, inputs) for at in instants]
    upcoming = _next_fire(stored, inputs.now, inputs.company) if stored.state == "ACTIVE" else None
    return Explanation(stored.key, asked, zone, answers, notes, upcoming)


def _answer(at: datetime, inputs: ExplainInputs) -> InstantAnswer:
    stored = inputs.stored
    runs = inputs.runs.get(at, [])
    spec, changed = _spec_at(at, stored, inputs.history)
    occurrence = _occurrence(spec, stored, at, inputs.company) if spec.schedule is not None else None
    run_id = occurrence.run_id if occurrence is not None else scheduled_run_id(at)
    scheduled = next((run for run in runs if run.run_id == run_id), None)
    others = [run for run in runs if run is not scheduled]
    zone = get_zone(spec.schedule.timezone if spec.schedule is not None else "UTC")
    wall = local_wall(at, zone).strftime("%Y-%m-%d %H:%M:%S") + f" {zone.key}"
    verdict, lines, run = _verdict_at(at, spec, occurrence, scheduled, others, inputs)
    return InstantAnswer(at, wall, verdict, ([changed] if changed else []) + lines, run, others)


def _verdict_at(
    at: datetime,
    spec: JobSpec,
    occurrence: Occurrence | None,
    scheduled: Run | None,
    others: list[Run],
    inputs: ExplainInputs,
) -> tuple[Verdict, list[str], Run | None]:
    stored = inputs.stored
    if stored.created_at > at and scheduled is None:
        return "not-scheduled", [f"the job did not exist yet: it was created {instant_text(stored.created_at)}"], None
    if spec.schedule is None:
        what = "it has no schedule: it runs when triggered (by hand, by events, or after other jobs)"
        return (_verdict(others[0]) if others else "not-scheduled"), [what], None
    if occurrence is None:
        return "not-scheduled", _not_named(spec, stored, at, inputs.company), None
    if not occurrence.fires:
        return "skipped", [f"the schedule skips it: {occurrence.reason}"], None
    why = []
    if occurrence.reason:  # fired, moved: out of a DST gap, or deferred past a blackout
        why.append(f"the schedule moved it: {occurrence.reason}")
    if occurrence.fire_at != occurrence.at:
        why.append(f"fires at {instant_text(occurrence.fire_at)} (jitter)")
    if scheduled is not None:
        return _verdict(scheduled), why + _run_lines(scheduled, spec), scheduled
    verdict, line = _no_run(at, occurrence, stored, inputs)
    return verdict, [*why, line], None


def _verdict(run: Run) -> Verdict:
    return {
        RunStatus.SUCCEEDED: "ran",
        RunStatus.FAILED: "failed",
        RunStatus.TIMED_OUT: "failed",
        RunStatus.RUNNING: "running",
        RunStatus.RETRYING: "running",
        RunStatus.WAITING: "waiting",
        RunStatus.SCHEDULED: "held",
        RunStatus.SKIPPED: "skipped",
        RunStatus.MISSED: "missed",
        RunStatus.CANCELLED: "cancelled",
    }.get(run.status, "running")  # type: ignore[return-value]


def _run_lines(run: Run, spec: JobSpec) -> list[str]:
    lines = [f"run {run.run_id}: {run.status.value}, attempt {run.attempt} of {spec.retry.max_attempts}"]
    if run.started_at is not None:
        late = f" ({run.lateness_ms / 1000:.1f} s after its instant)" if run.lateness_ms is not None else ""
        lines.append(f"started {instant_text(run.started_at)}{late}")
    if run.finished_at is not None:
        lines.append(f"finished {instant_text(run.finished_at)}")
    if run.status is RunStatus.RETRYING and run.next_attempt_at is not None:
        lines.append(f"next attempt at {instant_text(run.next_attempt_at)}")
    if run.waiting_for:
        lines.append("waiting for " + ", ".join(run.waiting_for))
    if run.reason:
        lines.append(_reason_line(run))
    if run.error:
        lines.append(f"error: {run.error}")
    return lines


def _reason_line(run: Run) -> str:
    reason = run.reason or ""
    if run.status is RunStatus.MISSED and reason.startswith("lost"):
        return f"its message was lost: {reason} (recorded by the lost-message audit)"
    if run.status is RunStatus.MISSED:
        return f"not run: {reason}"
    if "circuit open" in reason:
        return f"held by its target's circuit breaker: {reason}"
    if "max_running" in reason:
        return f"held by a concurrency limit: {reason}"
    return f"reason: {reason}"


def _no_run(at: datetime, occurrence: Occurrence, stored: StoredJob, inputs: ExplainInputs) -> tuple[Verdict, str]:
    now, dispatch = inputs.now, inputs.dispatch
    paused = _paused_at(at, stored, inputs.history)
    if at > now:
        if stored.state == "PAUSED":
            return (
                "will-not-fire",
                f"the job is paused (since {_when(stored.paused_at)}, by {stored.paused_by}: "
                f"{stored.paused_reason or 'no reason given'}); resumed after it, the catch-up policy "
                f"({stored.spec.schedule.catchup.policy if stored.spec.schedule else 'none'}) decides",
            )
        return ("will-fire", f"fires at {instant_text(occurrence.fire_at)}")
    if paused is not None:
        return ("skipped", paused)
    retention = stored.spec.run_retention
    if at < now - retention:
        return ("no-record", f"its record, if any, has expired: runs are kept {format_duration(retention)}")
    if dispatch is not None and dispatch.cursor < at:
        return (
            "no-record",
            f"not sent yet: the dispatcher has decided the job's instants up to {instant_text(dispatch.cursor)}",
        )
    if dispatch is not None and (dispatch.audited_to is None or dispatch.audited_to < at):
        audited = _when(dispatch.audited_to)
        return (
            "no-record",
            f"sent, with no record yet: the lost-message audit has checked up to {audited}; a message that never"
            " arrives is recorded MISSED within 15 minutes of the instant plus one visit",
        )
    return ("no-record", "sent and audited, yet no record: report this (the audit should have recorded it MISSED)")


def _paused_at(at: datetime, stored: StoredJob, history: Sequence[AuditEntry]) -> str | None:
    """The pause the job was in at ``at``, from its history (newest first)."""
    for entry in history:
        if entry.at > at:
            continue
        if entry.action == "pause":
            return f"the job was paused then (since {instant_text(entry.at)}, by {entry.principal}: {entry.reason})"
        if entry.action in ("resume", "create"):
            return None
    return None


def _spec_at(at: datetime, stored: StoredJob, history: Sequence[AuditEntry]) -> tuple[JobSpec, str | None]:
    """The spec in effect at ``at`` (the newest stored before it), and a line when it differs from today's."""
    for entry in history:
        if entry.at <= at and entry.spec is not None:
            if entry.version == stored.version:
                return stored.spec, None
            try:
                spec = JobSpec.model_validate(entry.spec, context=STORED)
            except ValueError:
                return stored.spec, None
            if spec == stored.spec:  # a pause or resume moves the version, not the spec
                return stored.spec, None
            return spec, f"answered with version {entry.version} of the job, in effect then (now {stored.version})"
    return stored.spec, None


def _occurrence(spec: JobSpec, stored: StoredJob, at: datetime, company: CompanySettings) -> Occurrence | None:
    compiled = preview_schedule(spec, registered_at=stored.created_at, company=company)
    assert compiled is not None
    try:
        for occurrence in compiled.occurrences(at - timedelta(seconds=1), until=at):
            if occurrence.at == at:
                return occurrence
    except ScheduleTooExpensive:
        return None
    return None


def _not_named(spec: JobSpec, stored: StoredJob, at: datetime, company: CompanySettings) -> list[str]:
    assert spec.schedule is not None
    compiled = preview_schedule(spec, registered_at=stored.created_at, company=company)
    assert compiled is not None
    lines = [
        f"the schedule ({spec.schedule.expression}, {spec.schedule.timezone}) names no instant at {instant_text(at)}"
    ]
    try:
        for window in NEAREST_WINDOWS:
            earlier = [o.at for o in compiled.fires(at - window, until=at - timedelta(seconds=1))]
            if earlier:
                lines.append(f"the fire before it: {instant_text(earlier[-1])}")
                break
        after = compiled.next_fires(at, 1)
    except ScheduleTooExpensive:
        return lines
    if after:
        lines.append(f"the fire after it: {instant_text(after[0].at)}")
    return lines


def _next_fire(stored: StoredJob, now: datetime, company: CompanySettings) -> datetime | None:
    compiled = schedule_of(stored, company)
    if compiled is None:
        return None
    try:
        upcoming = compiled.next_fires(now, 1)
    except ScheduleTooExpensive:
        return None
    return upcoming[0].fire_at if upcoming else None


def _when(instant: datetime | None) -> str:
    return instant_text(instant) if instant is not None else "-"
