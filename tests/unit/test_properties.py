"""Properties over random expressions and zones, at every DST transition in a two-year span."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobsched.core.tz import UTC, available_zones, get_zone
from jobsched.schedule.dst import WallKind, local_wall, resolve_wall
from jobsched.schedule.engine import CompiledSchedule, Occurrence
from tests.helpers import compiled

DST_ZONES = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Australia/Sydney",
    "Asia/Kolkata",
    "America/Santiago",
    "Pacific/Chatham",
    "Europe/Dublin",
    "Asia/Tehran",
    "America/St_Johns",
    "Africa/Casablanca",
    "Antarctica/Troll",
    "America/Havana",
    "Pacific/Apia",
    "Europe/London",
]
zones = st.one_of(st.sampled_from(DST_ZONES), st.sampled_from(sorted(available_zones())))
years = st.integers(min_value=2000, max_value=2035)
minutes = st.integers(0, 59)
hours = st.integers(0, 23)
PROPERTY_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def fixed_time_entries(draw: st.DrawFn) -> str:
    """Minute and hour both one explicit value: ISC cron's 'fixed-time' entries."""
    minute, hour = draw(minutes), draw(hours)
    days = draw(st.sampled_from(["* * *", "* * 1-5", "1,15 * *", "* * 0", "L * ?"]))
    if days == "L * ?":
        return f"cron({minute} {hour} L * ? *)"
    if draw(st.booleans()):
        dom, month, dow = days.split()
        aws_dow = {"*": "?", "1-5": "MON-FRI", "0": "1"}[dow]
        return f"cron({minute} {hour} {'?' if aws_dow != '?' else dom} {month} {aws_dow} *)"
    return f"{minute} {hour} {days}"


@st.composite
def wildcard_entries(draw: st.DrawFn) -> str:
    """Minute or hour field starting with '*'."""
    minute = draw(minutes)
    return draw(
        st.sampled_from(
            [
                f"{minute} * * * *",
                f"*/{draw(st.sampled_from([10, 15, 20, 30]))} * * * *",
                f"{minute} */{draw(st.integers(1, 6))} * * *",
                "@hourly",
            ]
        )
    )


@st.composite
def any_entries(draw: st.DrawFn) -> dict[str, object]:
    expression = draw(
        st.one_of(
            fixed_time_entries(),
            wildcard_entries(),
            st.sampled_from(["rate(45 minutes)", "rate(1 day)"]),
        )
    )
    extra: dict[str, object] = {}
    if draw(st.booleans()):
        extra["jitter"] = draw(st.sampled_from(["30s", "10m", "1h"]))
    if draw(st.booleans()):
        extra["dst"] = {
            "gap": draw(st.sampled_from(["shift", "skip"])),
            "fold": draw(st.sampled_from(["first", "last", "both"])),
        }
    if draw(st.booleans()):
        extra["calendar"] = {"business_days_only": True}
    if draw(st.booleans()):
        extra["blackouts"] = [
            {
                "cron": "0 1 * * *",
                "duration": "90m",
                "action": draw(st.sampled_from(["skip", "defer"])),
            }
        ]
    return {"expression": expression, **extra}


def transitions(zone_name: str, year: int) -> list[datetime]:
    """Every UTC offset change of the zone in [year, year + 2), to the day."""
    zone = get_zone(zone_name)
    start = datetime(year, 1, 1, tzinfo=UTC)
    found = []
    previous = start.astimezone(zone).utcoffset()
    for day in range(1, 2 * 366):
        instant = start + timedelta(days=day)
        offset = instant.astimezone(zone).utcoffset()
        if offset != previous:
            found.append(instant - timedelta(days=1))
            previous = offset
    return found


def windows(zone_name: str, year: int) -> list[tuple[datetime, datetime]]:
    around = [(t - timedelta(days=2), t + timedelta(days=3)) for t in transitions(zone_name, year)]
    middle = datetime(year, 7, 9, tzinfo=UTC)
    return [*around, (middle, middle + timedelta(days=3))]


def fires_in(schedule: CompiledSchedule, window: tuple[datetime, datetime]) -> list[Occurrence]:
    return list(schedule.fires(window[0], until=window[1]))


def fires_per_window(
    expression: str, zone: str, year: int
) -> Iterator[tuple[ZoneInfo, tuple[datetime, datetime], list[Occurrence]]]:
    """For each window around the zone's transitions: the zone, the window and the entry's fires in it."""
    schedule = compiled(expression, zone)
    tz = get_zone(zone)
    for window in windows(zone, year):
        yield tz, window, fires_in(schedule, window)


@PROPERTY_SETTINGS
@given(spec=any_entries(), zone=zones, year=years)
def test_instants_strictly_increase(spec: dict[str, object], zone: str, year: int) -> None:
    schedule = compiled(timezone=zone, anchor=f"{year}-01-01T00:00:00Z", **spec)  # type: ignore[arg-type]
    for window in windows(zone, year):
        occurrences = list(schedule.occurrences(window[0], until=window[1]))
        fires = [o for o in occurrences if o.fires]
        assert all(o.at > window[0] for o in occurrences)
        assert all(a.at < b.at for a, b in itertools.pairwise(fires)), spec
        assert all(a.fire_at < b.fire_at for a, b in itertools.pairwise(fires)), spec
        assert all(o.at <= o.fire_at for o in fires)


@PROPERTY_SETTINGS
@given(expression=fixed_time_entries(), zone=zones, year=years)
def test_a_fixed_time_entry_never_fires_twice_on_one_local_date(expression: str, zone: str, year: int) -> None:
    for tz, _, fires in fires_per_window(expression, zone, year):
        per_date = Counter(local_wall(f.at, tz).date() for f in fires)
        assert max(per_date.values(), default=0) <= 1, (expression, zone, per_date.most_common(2))


@PROPERTY_SETTINGS
@given(expression=fixed_time_entries(), zone=zones, year=years)
@example(expression="0 0 * * *", zone="Pacific/Apia", year=2011)  # a day skipped whole (found by hypothesis)
def test_a_fixed_time_entry_misses_no_scheduled_date(expression: str, zone: str, year: int) -> None:
    """Shifted, not lost: every date the entry names gets its run, gap or no gap."""
    plain = compiled(expression, "UTC")
    for tz, window, fires in fires_per_window(expression, zone, year):
        local_start = local_wall(window[0], tz).replace(tzinfo=UTC) + timedelta(days=1)
        local_end = local_wall(window[1], tz).replace(tzinfo=UTC) - timedelta(days=1)
        expected = {f.at.date() for f in plain.fires(local_start, until=local_end)}
        got = {f.wall.date() if not f.moved_from else f.moved_from[0].date() for f in fires}
        # A date the zone skipped whole (Pacific/Apia, 2011-12-30) has no wall time to run at, shifted or not.
        missing = {day for day in expected - got if _date_exists(day, tz)}
        assert not missing, (expression, zone, sorted(missing))


def _date_exists(day: date, tz: ZoneInfo) -> bool:
    noon = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    return any(local_wall(noon + timedelta(hours=offset), tz).date() == day for offset in range(-26, 27))


@PROPERTY_SETTINGS
@given(expression=wildcard_entries(), zone=zones, year=years)
def test_a_wildcard_entry_never_fires_at_a_wall_time_that_does_not_exist(expression: str, zone: str, year: int) -> None:
    for tz, _, fires in fires_per_window(expression, zone, year):
        for fire in fires:
            assert not fire.moved_from, (expression, zone, fire)
            assert local_wall(fire.at, tz) == fire.wall
            assert resolve_wall(fire.wall, tz).kind is not WallKind.GAP


@PROPERTY_SETTINGS
@given(expression=wildcard_entries(), zone=zones, year=years)
def test_a_wildcard_entry_runs_both_copies_of_a_repeated_wall_time(expression: str, zone: str, year: int) -> None:
    for tz, window, fires in fires_per_window(expression, zone, year):
        instants = {f.at for f in fires}
        for fire in fires:
            resolved = resolve_wall(fire.wall, tz)
            if resolved.kind is WallKind.FOLD and window[0] < resolved.instants[0]:
                assert set(resolved.instants) <= instants | {i for i in resolved.instants if i > window[1]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=any_entries(), zone=zones, year=years, holidays=st.booleans())
def test_outside_its_irregular_spans_every_instant_fires_as_written(
    spec: dict[str, object], zone: str, year: int, holidays: bool
) -> None:
    """What the console's team timeline relies on to step the engine only where it must."""
    if holidays:
        spec = {**spec, "calendar": {"skip_holidays": "US", "exclude_dates": [f"{year}-07-10"]}}
    schedule = compiled(timezone=zone, anchor=f"{year}-01-01T00:00:00Z", **spec)  # type: ignore[arg-type]
    for window in windows(zone, year):
        spans = schedule.irregular_spans(*window)
        if spans is None:
            assert spec.get("blackouts"), "only blackouts make the whole range irregular"
            continue
        irregular = [
            o
            for o in schedule.occurrences(window[0], until=window[1])
            if not o.fires or o.reason_kind in ("dst gap", "dst overlap")
        ]
        stepped = [o for low, high in spans for o in schedule.occurrences(low, until=high)]
        assert all(any(low < o.at <= high for low, high in spans) for o in irregular), (spec, spans)
        assert [o for o in stepped if o in irregular] == irregular, "stepping a span alone finds the same"
