"""Small helpers shared by the schedule tests."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.schedule.engine import CompiledSchedule, compile_schedule
from jobsched.spec import Schedule
from jobsched.tz import UTC, get_zone


def utc(text: str) -> datetime:
    """'2027-03-14T07:00Z' -> aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def compiled(
    expression: str,
    timezone: str = "UTC",
    *,
    key: str = "team/job",
    anchor: str | None = None,
    **fields: Any,
) -> CompiledSchedule:
    schedule = Schedule.model_validate({"expression": expression, "timezone": timezone, **fields})
    return compile_schedule(schedule, hash_key=key, anchor=utc(anchor) if anchor else None)


def fire_times(schedule: CompiledSchedule, after: str, count: int) -> list[str]:
    """The next fires as UTC 'YYYY-MM-DDTHH:MMZ'."""
    return [f"{o.at:%Y-%m-%dT%H:%M}Z" for o in schedule.next_fires(utc(after), count)]


def local_times(schedule: CompiledSchedule, after: str, count: int) -> list[str]:
    """The next fires as local wall time with abbreviation: '2027-11-07 01:30 EDT'."""
    zone = get_zone(schedule.schedule.timezone)
    return [f"{o.at.astimezone(zone):%Y-%m-%d %H:%M %Z}" for o in schedule.next_fires(utc(after), count)]
