"""Fire-time computation: a schedule spec in, an ordered stream of instants (and why others were not) out.

Pure: nothing here reads the clock; ``after``, ``now`` and anchors are arguments.

Pipeline, per schedule:
  wall-time candidates (croniter / rate / at)
  -> DST resolution (gap: shift|skip, fold: first|last|both; ISC cron defaults by entry kind)
  -> start_at / end_at window
  -> calendar (holidays, business days, excluded dates)
  -> blackouts (skip, or defer to the window's end)
  -> jitter (stable per job and instant, never past the next instant)

Calendars and blackouts are ``exclusions``, the step budget ``steps``, what a tick does with a job's instants
``catchup``, whether a schedule costs too much to admit ``cost_check``. Each step passes on ``Occurrence`` records.
Skipped ones carry the reason, so a preview can say why an instant did not fire, and the dispatcher and preview use
one code path.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from croniter.croniter import CroniterBadDateError

from jobsched.core.expressions import (
    AtExpression,
    CronExpression,
    RateExpression,
    hash_value,
    parse_expression,
)
from jobsched.core.runs import SCHEDULE_RUN_MARK, scheduled_run_id
from jobsched.core.spec import Blackout, Schedule
from jobsched.core.tz import UTC, get_zone
from jobsched.schedule.dst import WallKind, local_wall, offset_changes, resolve_wall, zone_changes_near
from jobsched.schedule.exclusions import BlackoutWindows, CalendarCheck, as_utc
from jobsched.schedule.steps import StepBudget

DEFAULT_HORIZON = timedelta(days=366 * 10)  # leap-day jobs fire twice in it
# A schedule that a calendar or blackout excludes for a long time must not spin: previews and next-fire
# look-ups give up after examining this many candidate instants.
MAX_EXAMINED = 200_000
# The work between two fires is bounded whatever the expression, calendar and blackouts: this many
# candidate instants and blackout merges, then ScheduleTooExpensive (about a second of CPU at worst; a
# minutely job under a 6-day blackout stays within it). PUT refuses what exceeds it within a year's
# simulation; the dispatcher quarantines what slips through.
MAX_STEPS_BETWEEN_FIRES = 10_000
_FAR_FUTURE = datetime(9000, 1, 1, tzinfo=UTC)  # far, yet room to add a jitter to it


@dataclass(frozen=True)
class Occurrence:
    """One scheduled instant: fired, or skipped with the reason.

    ``at`` identifies the run (the scheduled instant, UTC). ``fire_at`` adds the job's jitter.
    ``wall`` is the local wall time as scheduled; for a wall time that does not exist (DST gap)
    ``exists`` is False and ``at`` is the first instant after the gap.
    """

    at: datetime
    wall: datetime
    fires: bool
    fire_at: datetime
    reason: str | None = None
    moved_from: tuple[datetime, ...] = ()
    exists: bool = True
    schedule: str | None = None  # of a job with several schedules: the one that names it
    distinct: bool = False  # that schedule's runs are its own, even at an instant another one fires

    @property
    def run_id(self) -> str:
        """The id of its run: the instant; a distinct schedule's runs add the schedule's name."""
        instant = scheduled_run_id(self.at)
        return f"{instant}{SCHEDULE_RUN_MARK}{self.schedule}" if self.distinct and self.schedule else instant

    def skipped(self, reason: str) -> Occurrence:
        return replace(self, fires=False, reason=reason)

    @property
    def scheduled_wall(self) -> datetime:
        """The wall time the expression named: a fire shifted out of a DST gap or deferred by a blackout
        runs at ``wall`` but was scheduled at its first ``moved_from``."""
        return self.moved_from[0] if self.moved_from else self.wall

    @property
    def reason_kind(self) -> str:
        """The kind of its reason, the details (dates, times) left out: what summaries count by."""
        return reason_kind(self.reason or "")


def reason_kind(reason: str) -> str:
    """A skip or move reason as the kind it belongs to: each is one the engine writes."""
    for marker, kind in (
        ("DST gap", "dst gap"),
        ("DST overlap", "dst overlap"),
        ("skipped the whole day", "date does not exist"),
        ("maintenance", "maintenance"),
        ("blackout", "blackout"),
        ("freeze", "freeze"),
        ("holiday", "holiday"),
        ("not a business day", "not a business day"),
        ("excluded date", "excluded date"),
    ):
        if marker in reason:
            return kind
    return reason.split(":", 1)[0]


def _fire(at: datetime, wall: datetime, **fields: Any) -> Occurrence:
    return Occurrence(at=at, wall=wall, fires=True, fire_at=at, **fields)


def _hhmm(wall: datetime) -> str:
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")


DST_REACH = timedelta(hours=3)  # a wall time a change of offset skips or repeats lies this close to it (<= 2 h)


class CompiledSchedule:
    """A validated ``Schedule`` ready to produce instants for one job.

    ``hash_key`` (team/name) fixes ``H`` values and jitter; ``anchor`` is where ``rate()`` intervals
    count from when the schedule has no ``start_at`` (the job's creation).
    """

    def __init__(
        self,
        schedule: Schedule,
        *,
        hash_key: str,
        anchor: datetime | None = None,
        step_limit: int = MAX_STEPS_BETWEEN_FIRES,
    ) -> None:
        self.schedule = schedule
        self.step_limit = step_limit
        self.hash_key = hash_key
        self.zone: ZoneInfo = get_zone(schedule.timezone)
        self.expression = parse_expression(schedule.expression)
        wildcard = isinstance(self.expression, CronExpression) and self.expression.wildcard
        # ISC cron: fixed-time entries shift out of gaps and fire once in overlaps; wildcard entries
        # fire at every wall time that exists. An explicit dst setting overrides either.
        self.gap_policy = schedule.dst.gap or ("skip" if wildcard else "shift")
        self.fold_policy = schedule.dst.fold or ("both" if wildcard else "first")
        self._cron_text = self.expression.croniter_text(hash_key) if isinstance(self.expression, CronExpression) else ""
        anchor_source = schedule.start_at or anchor
        self.anchor = as_utc(anchor_source) if anchor_source else None
        if isinstance(self.expression, RateExpression) and self.anchor is None:
            raise ValueError("a rate() schedule needs start_at or an anchor (the job's creation time)")
        if isinstance(schedule.calendar, str):  # schedule.fires resolves company calendars before compiling
            raise ValueError(f"{schedule.calendar} is not resolved: compile the schedule through schedule.fires")
        self._calendar = CalendarCheck(schedule.calendar) if schedule.calendar else None
        self.blackouts = [self._blackout_windows(b) for b in schedule.blackouts]

    # ------------------------------------------------------------------------------ public API

    def _blackout_windows(self, blackout: Blackout) -> BlackoutWindows:
        zone = get_zone(blackout.timezone) if blackout.timezone else self.zone
        starts = None
        if blackout.cron is not None:
            spec = Schedule(expression=blackout.cron, timezone=blackout.timezone or self.schedule.timezone)
            starts = CompiledSchedule(spec, hash_key=self.hash_key, step_limit=self.step_limit)
        return BlackoutWindows(blackout, zone, starts)

    def zone_of(self, occurrence: Occurrence) -> ZoneInfo:
        """The zone the occurrence's schedule reads wall times in (a job with several: that schedule's)."""
        return self.zone

    def describe(self) -> str:
        return f"{self.schedule.expression} in {self.schedule.timezone}"

    def irregular_spans(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]] | None:
        """The parts of [start, end] where an instant may be skipped or moved instead of firing as written:
        around each change of the zone's UTC offset, and the local days the calendar excludes. Outside them
        every instant fires as the expression says, so a view need not step the engine there. None with
        blackouts: their windows follow schedules of their own, so the whole range is irregular."""
        if self.blackouts:
            return None
        spans = [(at - DST_REACH, at + DST_REACH) for at in offset_changes(self.zone, start, end)]
        if self._calendar is not None:
            day = local_wall(start, self.zone).date()
            while day <= local_wall(end, self.zone).date():
                if self._calendar.excluded(day):
                    midnight = datetime.combine(day, datetime.min.time(), tzinfo=self.zone).astimezone(UTC)
                    spans.append((midnight - DST_REACH, midnight + timedelta(days=1) + DST_REACH))
                day += timedelta(days=1)
        merged: list[tuple[datetime, datetime]] = []
        for low, high in sorted((max(low, start), min(high, end)) for low, high in spans):
            if merged and low <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
            elif low < high:
                merged.append((low, high))
        return merged

    def occurrences(self, after: datetime, *, until: datetime | None = None) -> Iterator[Occurrence]:
        """Every occurrence with ``after < at`` (and ``at <= until``), fired or skipped, in order."""
        after = as_utc(after)
        limit = min(as_utc(until) if until else _FAR_FUTURE, self._end())
        start = after
        for windows in self.blackouts:
            if windows.blackout.action == "defer":
                # Instants deferred from a window that is still open at ``after`` fire at its end.
                window = windows.containing(after, StepBudget(self.step_limit, after))
                if window:
                    start = min(start, window[0] - timedelta(seconds=1))
        # Read past the limit by the jitter so the last instant's cap sees its successor: fire_at must not
        # depend on how far ahead the caller looks.
        budget = StepBudget(self.step_limit, after)
        stream = self._raw(start, limit + self.schedule.jitter + timedelta(seconds=1), budget)
        stream = self._apply_calendar(stream)
        stream = self._apply_blackouts(stream, budget)
        stream = self._apply_jitter(stream)
        for occurrence in stream:
            if occurrence.at > limit:
                return
            if occurrence.fires:
                budget.fired(occurrence.at)
            if occurrence.at > after:
                yield occurrence

    def fires(self, after: datetime, *, until: datetime | None = None) -> Iterator[Occurrence]:
        return (o for o in self.occurrences(after, until=until) if o.fires)

    def next_fires(self, after: datetime, count: int, *, horizon: timedelta = DEFAULT_HORIZON) -> list[Occurrence]:
        """The next ``count`` fire instants strictly after ``after``, within ``horizon``."""
        return [fire for fire, _ in self.preview(after, count, horizon=horizon)]

    def preview(
        self, after: datetime, count: int, *, horizon: timedelta = DEFAULT_HORIZON
    ) -> list[tuple[Occurrence, list[Occurrence]]]:
        """The next ``count`` fires, each with the occurrences skipped since the previous fire."""
        result: list[tuple[Occurrence, list[Occurrence]]] = []
        skipped: list[Occurrence] = []
        candidates = self.occurrences(after, until=as_utc(after) + horizon)
        for occurrence in itertools.islice(candidates, MAX_EXAMINED):
            if occurrence.fires:
                result.append((occurrence, skipped))
                skipped = []
                if len(result) == count:
                    break
            elif len(skipped) < 100:
                skipped.append(occurrence)
        return result

    # ----------------------------------------------------------------------------- candidates

    def _end(self) -> datetime:
        return as_utc(self.schedule.end_at) if self.schedule.end_at else _FAR_FUTURE

    def _raw(self, after: datetime, limit: datetime, budget: StepBudget) -> Iterator[Occurrence]:
        """DST-resolved candidates in time order, before calendars and blackouts."""
        begin = after
        if self.schedule.start_at:
            begin = max(after, as_utc(self.schedule.start_at) - timedelta(seconds=1))  # start_at is inclusive
        expression = self.expression
        if isinstance(expression, RateExpression):
            return self._rate(expression, begin, limit, budget)
        if isinstance(expression, AtExpression):
            return (o for o in self._resolve(expression.wall)[1] if o.at > begin)
        return self._cron(expression, begin, limit, budget)

    def _rate(
        self, expression: RateExpression, after: datetime, limit: datetime, budget: StepBudget
    ) -> Iterator[Occurrence]:
        assert self.anchor is not None
        step = expression.interval
        index = max(0, math.floor((after - self.anchor) / step))
        while True:
            budget.spend()
            at = self.anchor + index * step
            if at > limit:
                return
            if at > after:
                yield _fire(at, local_wall(at, self.zone))
            index += 1

    def _cron(
        self, expression: CronExpression, after: datetime, limit: datetime, budget: StepBudget
    ) -> Iterator[Occurrence]:
        # A wall time maps to instants within a DST shift of itself; near a transition start a day
        # early so that second occurrences (fold) after ``after`` are not missed.
        margin = timedelta(days=1) if zone_changes_near(after, self.zone, timedelta(days=1)) else timedelta(0)
        start_wall = local_wall(after, self.zone) - margin
        if expression.years and start_wall.year < expression.years[0]:
            start_wall = datetime(expression.years[0], 1, 1) - timedelta(minutes=1)  # noqa: DTZ001
        cursor = copy.copy(_cron_template(self._cron_text, expression.day_or))
        cursor.set_current(start_wall, force=True)
        # Each wall gives instants >= its first instant, and first instants never decrease as walls
        # increase; so anything queued before the current wall's first instant is final and can go.
        pending: list[tuple[datetime, int, Occurrence]] = []
        sequence = itertools.count()
        while True:
            budget.spend()
            try:
                wall: datetime = cursor.get_next(datetime)
            except CroniterBadDateError:
                break  # the year field has run out
            if expression.years and wall.year > expression.years[1]:
                break
            if not expression.day_allowed(wall.date()):
                continue
            key, candidates = self._resolve(wall)
            while pending and pending[0][0] < key:
                yield heapq.heappop(pending)[2]
            if key > limit:
                break
            for candidate in candidates:
                heapq.heappush(pending, (candidate.at, next(sequence), candidate))
        while pending:
            yield heapq.heappop(pending)[2]

    def _resolve(self, wall: datetime) -> tuple[datetime, list[Occurrence]]:
        """The occurrences of one wall time under the DST policy, and its earliest instant."""
        resolved = resolve_wall(wall, self.zone)
        first = resolved.instants[0]
        if resolved.kind is WallKind.NORMAL:
            return first, [_fire(first, wall)]
        zone = self.schedule.timezone
        if resolved.kind is WallKind.GAP:
            shifted_to = local_wall(first, self.zone)
            before_gap = local_wall(first - timedelta(microseconds=1), self.zone)
            if before_gap.date() < wall.date() < shifted_to.date():
                # The zone skipped the whole date (Samoa, 2011-12-30): there is no day to run on, and shifting
                # would run the next date twice.
                reason = f"{wall.date()} does not exist in {zone} (the zone skipped the whole day)"
                skipped = Occurrence(at=first, wall=wall, fires=False, fire_at=first, reason=reason, exists=False)
                return first, [skipped]
            if self.gap_policy == "shift":
                reason = (
                    f"{_hhmm(wall)} does not exist on {wall.date()} in {zone} (DST gap): shifted to {_hhmm(shifted_to)}"
                )
                return first, [_fire(first, shifted_to, reason=reason, moved_from=(wall,))]
            reason = f"{_hhmm(wall)} does not exist on {wall.date()} in {zone} (DST gap; gap: skip)"
            skipped = Occurrence(at=first, wall=wall, fires=False, fire_at=first, reason=reason, exists=False)
            return first, [skipped]
        second = resolved.instants[1]
        note = f"{_hhmm(wall)} occurs twice on {wall.date()} in {zone} (DST overlap)"
        if self.fold_policy == "both":
            return first, [_fire(first, wall), _fire(second, wall)]
        if self.fold_policy == "first":
            return first, [
                _fire(first, wall),
                _fire(second, wall).skipped(f"{note}; fold: first runs the first"),
            ]
        return first, [
            _fire(first, wall).skipped(f"{note}; fold: last runs the second"),
            _fire(second, wall),
        ]

    # ------------------------------------------------------------------------------ filters

    def _apply_calendar(self, stream: Iterable[Occurrence]) -> Iterator[Occurrence]:
        last_fired: datetime | None = None
        for occurrence in stream:
            if occurrence.fires:
                if occurrence.at == last_fired:
                    continue  # a shifted gap instant landing on a regular one: one run, not two
                last_fired = occurrence.at
                if self._calendar:
                    reason = self._calendar.excluded(local_wall(occurrence.at, self.zone).date())
                    if reason:
                        occurrence = occurrence.skipped(reason)
            yield occurrence

    def _apply_blackouts(self, stream: Iterable[Occurrence], budget: StepBudget) -> Iterator[Occurrence]:
        if not self.blackouts:
            yield from stream
            return
        deferred: Occurrence | None = None  # the run owed at the end of the current defer window
        for occurrence in stream:
            if deferred and occurrence.at >= deferred.at:
                if occurrence.fires and occurrence.at == deferred.at:
                    occurrence = replace(occurrence, moved_from=deferred.moved_from + occurrence.moved_from)
                else:
                    yield deferred
                deferred = None
            if occurrence.fires:
                occurrence, deferred = self._blackout(occurrence, deferred, budget)
            yield occurrence
        if deferred:
            yield deferred

    def _blackout(
        self, occurrence: Occurrence, deferred: Occurrence | None, budget: StepBudget
    ) -> tuple[Occurrence, Occurrence | None]:
        """A fire inside the first blackout that contains it: skipped, or deferred to the window's end
        (several deferred fires become one, which records every instant it stands for)."""
        for windows in self.blackouts:
            window = windows.containing(occurrence.at, budget)
            if window is None:
                continue
            # A named window (a company maintenance window) says its name; a job's own blackout, its times.
            label = windows.describe(window) if windows.blackout.name else f"blackout {windows.describe(window)}"
            if windows.blackout.action == "skip":
                return occurrence.skipped(f"in {label}"), deferred
            end = window[1]
            if deferred is None:
                deferred = _fire(end, local_wall(end, self.zone), reason=f"deferred by {label}")
            deferred = replace(deferred, moved_from=(*deferred.moved_from, occurrence.wall))
            return occurrence.skipped(f"in {label}: deferred to its end"), deferred
        return occurrence, deferred

    def _apply_jitter(self, stream: Iterable[Occurrence]) -> Iterator[Occurrence]:
        jitter = self.schedule.jitter
        if not jitter:
            yield from stream
            return
        held: deque[Occurrence] = deque()  # skips waiting behind a fire whose successor is unknown
        previous: Occurrence | None = None
        for occurrence in stream:
            if not occurrence.fires:
                if previous is None:
                    yield occurrence
                else:
                    held.append(occurrence)
                continue
            if previous is not None:
                yield self._jittered(previous, occurrence.at - previous.at)
                yield from held
                held.clear()
            previous = occurrence
        if previous is not None:
            yield self._jittered(previous, None)
            yield from held

    def _jittered(self, occurrence: Occurrence, gap_to_next: timedelta | None) -> Occurrence:
        # Never past the next instant, so fire times stay in order; stable per (job, instant).
        span = self.schedule.jitter
        if gap_to_next is not None:
            span = min(span, gap_to_next - timedelta(seconds=1))
        seconds = int(span.total_seconds())
        if seconds <= 0:
            return occurrence
        offset = hash_value(self.hash_key, occurrence.at.isoformat(), seconds + 1)
        return replace(occurrence, fire_at=occurrence.at + timedelta(seconds=offset))


@lru_cache(maxsize=8192)
def _cron_template(text: str, day_or: bool) -> croniter:
    """An expanded croniter to copy per query: expanding the text is most of croniter's cost."""
    return croniter(text, datetime(2000, 1, 1), day_or=day_or)  # noqa: DTZ001 - wall time


def window_open(blackout: Blackout, now: datetime) -> bool:
    """Whether one of ``blackout``'s windows holds ``now`` (a maintenance window holding pages)."""
    owner = CompiledSchedule(Schedule(expression="@yearly", timezone=blackout.timezone or "UTC"), hash_key="")
    windows = owner._blackout_windows(blackout)
    return windows.containing(as_utc(now), StepBudget(owner.step_limit, now)) is not None


def window_starts(blackout: Blackout, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` openings of ``blackout`` after ``after`` (where a schedule's fires bunch, if anywhere)."""
    if blackout.cron is None:
        assert blackout.start is not None
        return [as_utc(blackout.start)] if as_utc(blackout.start) > as_utc(after) else []
    starts = compile_schedule(Schedule(expression=blackout.cron, timezone=blackout.timezone or "UTC"), hash_key="")
    return [o.at for o in starts.next_fires(after, count)]


def compile_schedule(schedule: Schedule, *, hash_key: str, anchor: datetime | None = None) -> CompiledSchedule:
    return CompiledSchedule(schedule, hash_key=hash_key, anchor=anchor)
