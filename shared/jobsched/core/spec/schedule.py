"""Schedules: expressions, time zones, DST, catch-up, calendars and blackouts."""

from __future__ import annotations

import re
from datetime import date, timedelta
from functools import cache
from typing import Annotated, Any, Literal

import holidays
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from jobsched.core.bounds import Instant
from jobsched.core.durations import Duration
from jobsched.core.expressions import CronExpression, ExpressionError, parse_expression
from jobsched.core.spec.base import MAX_JITTER, Name, Payload, StrictModel, _bounded, _fail
from jobsched.core.tz import UTC, available_zones, suggest_zone

# ---------------------------------------------------------------------------------------- schedule

MAX_FREEZE_DAYS = 366


class DstPolicy(StrictModel):
    """What a schedule does at DST transitions. Unset fields follow ISC cron: fixed-time entries
    shift out of a gap and fire once in an overlap (gap: shift, fold: first); entries whose minute or
    hour field starts with '*' fire at every wall time that exists (gap: skip, fold: both)."""

    gap: Literal["shift", "skip"] | None = None
    fold: Literal["first", "last", "both"] | None = None


class CatchupPolicy(StrictModel):
    """What happens to instants missed while the scheduler could not fire them."""

    policy: Literal["none", "latest", "all"] = "latest"
    window: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] = timedelta(hours=6)
    max_runs: int = Field(default=10, ge=1, le=1000)


@cache
def _holiday_codes() -> tuple[dict[str, list[str]], frozenset[str]]:
    return holidays.list_supported_countries(), frozenset(holidays.list_supported_financial())


def _parse_holiday_calendar(value: Any) -> Any:
    """'US', 'US-NY', a market like 'NYSE', or {country, subdivision}."""
    if isinstance(value, str):
        country, _, subdivision = value.strip().partition("-")
        return {"country": country, "subdivision": subdivision or None}
    return value


class HolidayCalendar(StrictModel):
    country: str
    subdivision: str | None = None

    @model_validator(mode="after")
    def _known(self) -> HolidayCalendar:
        countries, markets = _holiday_codes()
        code = self.country.upper()
        if code in markets and self.subdivision is None:
            self.country = code
            return self
        if code not in countries:
            raise _fail(
                "unknown_holiday_calendar",
                "unknown holiday calendar '{value}'; use an ISO 3166 country code such as US, GB, DE "
                "(optionally with a subdivision, US-NY) or a market: {markets}",
                value=self.country,
                markets=", ".join(sorted(markets)),
            )
        self.country = code
        if self.subdivision is not None:
            allowed = countries[code]
            match = {s.upper(): s for s in allowed}.get(self.subdivision.upper())
            if match is None:
                raise _fail(
                    "unknown_subdivision",
                    "'{value}' is not a subdivision of {country}; allowed: {allowed}",
                    value=self.subdivision,
                    country=code,
                    allowed=", ".join(allowed) or "none",
                )
            self.subdivision = match
        return self

    def label(self) -> str:
        return f"{self.country}-{self.subdivision}" if self.subdivision else self.country


class Freeze(StrictModel):
    """Days no run starts (a change freeze, a quarter close): from ``start`` to ``end``, both included."""

    start: date
    end: date
    reason: str = Field(default="", max_length=200)

    @model_validator(mode="after")
    def _span(self) -> Freeze:
        if self.end < self.start or (self.end - self.start).days > MAX_FREEZE_DAYS:
            raise _fail(
                "invalid_freeze",
                "a freeze runs from start to end (both included, end not before start), at most {days} days",
                days=MAX_FREEZE_DAYS,
            )
        return self

    def label(self) -> str:
        return f"freeze {self.start} to {self.end}" + (f" ({self.reason})" if self.reason else "")


class CalendarPolicy(StrictModel):
    skip_holidays: Annotated[HolidayCalendar | None, BeforeValidator(_parse_holiday_calendar)] = None
    business_days_only: bool = False
    exclude_dates: list[Annotated[str, BeforeValidator(lambda v: str(v))]] = Field(
        default_factory=list, max_length=1000
    )

    @field_validator("exclude_dates")
    @classmethod
    def _iso_dates(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                date.fromisoformat(value)
            except ValueError:
                raise _fail("invalid_date", "'{value}' is not a date; write YYYY-MM-DD", value=value) from None
        return sorted(set(values))

    freezes: list[Freeze] = Field(default_factory=list, max_length=50)
    name: str | None = Field(default=None, max_length=80, description="how previews name it (a company calendar's)")


COMPANY_PREFIX = "company/"
_COMPANY_REF = re.compile(r"^company/[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def check_company_ref(value: str) -> str:
    """``company/NAME``: a calendar or maintenance window the platform team defines (``core.spec.company``)."""
    if not _COMPANY_REF.fullmatch(value):
        raise _fail(
            "invalid_company_reference",
            "'{value}' is not a company reference; write company/NAME (NAME: 1-63 characters a-z, 0-9 and '-')",
            value=value,
        )
    return value


CompanyRef = Annotated[str, AfterValidator(check_company_ref)]
# The tags of schedule.calendar's two forms (a mapping: the job's own; a string: a company calendar's name); error
# paths leave them out (core.errors).
OWN_CALENDAR, COMPANY_CALENDAR = "own", "company"


class Blackout(StrictModel):
    """A window in which the job must not fire: recurring (cron start + duration) or absolute."""

    cron: str | None = None
    duration: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] | None = None
    start: AwareDatetime | None = None
    end: AwareDatetime | None = None
    action: Literal["skip", "defer"] = "skip"
    timezone: str | None = Field(default=None, description="the zone of cron's wall times (absent: the schedule's)")
    name: str | None = Field(default=None, max_length=80, description="how previews name it (absent: its times)")

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parsed = parse_expression(value)
            except ExpressionError as error:
                raise _fail("invalid_cron", "{error}", error=str(error)) from None
            if not isinstance(parsed, CronExpression):
                raise _fail("invalid_cron", "a blackout starts on a cron entry, not {value}", value=value)
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        return check_timezone(value) if value is not None else None

    @model_validator(mode="after")
    def _one_form(self) -> Blackout:
        recurring = self.cron is not None or self.duration is not None
        absolute = self.start is not None or self.end is not None
        if recurring == absolute or (recurring and (self.cron is None or self.duration is None)):
            raise _fail(
                "invalid_blackout",
                "give either cron + duration (a recurring window) or start + end (one window)",
            )
        if absolute:
            if self.start is None or self.end is None or self.end <= self.start:
                raise _fail("invalid_blackout", "an absolute blackout needs start before end")
            self.start, self.end = self.start.astimezone(UTC), self.end.astimezone(UTC)
        return self


def check_timezone(value: str) -> str:
    """An IANA zone the pinned tzdata knows, or the error that names the closest one."""
    if value in available_zones():
        return value
    suggestion = suggest_zone(value)
    hint = f" (did you mean '{suggestion}'?)" if suggestion else ""
    raise _fail(
        "unknown_timezone",
        "unknown time zone '{value}'; use an IANA name such as America/New_York, Europe/Berlin or UTC{hint}",
        value=value,
        hint=hint,
    )


class Schedule(StrictModel):
    expression: str
    timezone: str = "UTC"
    dst: DstPolicy = Field(default_factory=DstPolicy)
    start_at: Instant | None = None
    end_at: Instant | None = None
    jitter: Annotated[Duration, _bounded(timedelta(0), MAX_JITTER)] = timedelta(0)
    catchup: CatchupPolicy = Field(default_factory=CatchupPolicy)
    calendar: (
        Annotated[
            Annotated[CalendarPolicy, Tag(OWN_CALENDAR)] | Annotated[CompanyRef, Tag(COMPANY_CALENDAR)],
            Discriminator(lambda value: COMPANY_CALENDAR if isinstance(value, str) else OWN_CALENDAR),
        ]
        | None
    ) = Field(default=None, description="the days it may fire: its own, or a company calendar by name (company/NAME)")
    blackouts: list[Blackout] = Field(default_factory=list, max_length=20)
    # A job with several schedules (JobSpec.schedules) names each, may give each its own payload, and says whether
    # an instant another of its schedules also fires is a run of its own (distinct) or the same run.
    name: Name | None = Field(default=None, description="with several schedules: which one (each run says it)")
    payload: Payload | None = Field(default=None, description="what its runs pass to the target instead")
    distinct: bool = Field(
        default=False,
        description="an instant another schedule of the job also fires is its own run (default: one run, the "
        "first schedule's)",
    )

    @field_validator("expression")
    @classmethod
    def _expression(cls, value: str) -> str:
        try:
            parse_expression(value)
        except ExpressionError as error:
            raise _fail("invalid_schedule_expression", "{error}", error=str(error)) from None
        return " ".join(value.split())

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        return check_timezone(value)

    @property
    def company_calendar(self) -> str | None:
        """The company calendar it names (``company/NAME``), if any."""
        return self.calendar if isinstance(self.calendar, str) else None

    @model_validator(mode="after")
    def _window(self) -> Schedule:
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise _fail(
                "invalid_schedule_window",
                "end_at ({end}) must be after start_at ({start})",
                end=self.end_at.isoformat(),
                start=self.start_at.isoformat(),
            )
        return self
