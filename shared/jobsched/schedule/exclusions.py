"""What keeps a schedule's instants from firing besides its expression: a calendar policy's excluded days, and
blackout windows (recurring, a cron start and a duration, or one absolute range).

The engine applies both (``engine.CompiledSchedule``); a recurring blackout's starts are a schedule the engine
compiles and hands in (``FireStream``), so this module does not import the engine.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import date, datetime
from functools import cache
from typing import Protocol
from zoneinfo import ZoneInfo

import holidays

from jobsched.core.durations import format_duration
from jobsched.core.spec import Blackout, CalendarPolicy, HolidayCalendar
from jobsched.core.tz import UTC
from jobsched.schedule.dst import local_wall
from jobsched.schedule.steps import StepBudget


class Fired(Protocol):
    @property
    def at(self) -> datetime: ...


class FireStream(Protocol):
    """A compiled schedule as a blackout's starts: its fires after an instant, in order."""

    def fires(self, after: datetime, *, until: datetime | None = None) -> Iterator[Fired]: ...


class CalendarCheck:
    """Which days a calendar policy excludes, and why (holidays, business days, freezes, excluded dates)."""

    def __init__(self, policy: CalendarPolicy) -> None:
        self.policy = policy
        self.excluded_dates = frozenset(date.fromisoformat(d) for d in policy.exclude_dates)
        self.holidays = _holidays(policy.skip_holidays) if policy.skip_holidays else None
        self.weekend = frozenset(self.holidays.weekend) if self.holidays is not None else frozenset({5, 6})

    def excluded(self, day: date) -> str | None:
        reason = self._excluded(day)
        return f"{self.policy.name}: {reason}" if reason and self.policy.name else reason

    def _excluded(self, day: date) -> str | None:
        if day in self.excluded_dates:
            return f"{day} is an excluded date"
        for freeze in self.policy.freezes:
            if freeze.start <= day <= freeze.end:
                return f"{day} is in the {freeze.label()}"
        if self.policy.business_days_only and day.weekday() in self.weekend:
            return f"{day} ({day:%A}) is not a business day"
        if self.holidays is not None and day in self.holidays:
            assert self.policy.skip_holidays is not None
            return f"{day} is a holiday in {self.policy.skip_holidays.label()}: {self.holidays.get(day)}"
        return None


@cache
def _holidays_for(country: str, subdivision: str | None) -> holidays.HolidayBase:
    if country in holidays.list_supported_financial():
        return holidays.financial_holidays(country)
    return holidays.country_holidays(country, subdiv=subdivision)


def _holidays(calendar: HolidayCalendar) -> holidays.HolidayBase:
    return _holidays_for(calendar.country, calendar.subdivision)


class BlackoutWindows:
    """The windows of one blackout: recurring (cron start + duration) or one absolute range."""

    _MAX_MERGED = 1000

    def __init__(self, blackout: Blackout, zone: ZoneInfo, starts: FireStream | None) -> None:
        """``zone``: the blackout's own, else its schedule's; ``starts``: a recurring blackout's cron, compiled."""
        self.blackout = blackout
        self.starts = starts
        self._last: tuple[datetime, datetime] | None = None  # instants arrive in order: most fall in it
        self.zone = zone

    def containing(self, instant: datetime, budget: StepBudget) -> tuple[datetime, datetime] | None:
        """The (start, end) of the window, merged with overlapping ones, that holds ``instant``."""
        if self.starts is None:
            assert self.blackout.start and self.blackout.end
            start, end = as_utc(self.blackout.start), as_utc(self.blackout.end)
            return (start, end) if start <= instant < end else None
        if self._last is not None and self._last[0] <= instant < self._last[1]:
            return self._last
        assert self.blackout.duration is not None
        duration = self.blackout.duration
        starts = self.starts.fires(instant - duration)
        budget.spend()
        first = next(starts, None)
        if first is None or first.at > instant:
            return None
        end = first.at + duration
        for following in itertools.islice(starts, self._MAX_MERGED):
            budget.spend()
            if following.at > end:
                break
            end = max(end, following.at + duration)
        self._last = (first.at, end)
        return self._last

    def describe(self, window: tuple[datetime, datetime]) -> str:
        start, end = (local_wall(t, self.zone) for t in window)
        if self.blackout.name is not None:
            return f"{self.blackout.name} ({start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} {self.zone.key})"
        if self.blackout.cron is not None:
            assert self.blackout.duration is not None
            return (
                f"'{self.blackout.cron}' for {format_duration(self.blackout.duration)} "
                f"({start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M})"
            )
        return f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}"


def as_utc(value: datetime | None) -> datetime:
    if value is None or value.tzinfo is None:
        raise ValueError(f"expected a timezone-aware datetime, got {value!r}")
    return value.astimezone(UTC)
