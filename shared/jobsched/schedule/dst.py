"""Wall-clock times to UTC instants across DST transitions.

A local wall time either exists once, exists twice (a fall-back overlap, "fold") or not at all
(a spring-forward gap). Python's zoneinfo answers with ``fold``; this module makes the three cases
explicit and finds the first instant after a gap, which is where a shifted run fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from functools import lru_cache
from zoneinfo import ZoneInfo

from jobsched.core.tz import UTC


class WallKind(Enum):
    NORMAL = "normal"
    FOLD = "fold"  # occurs twice
    GAP = "gap"  # does not exist


@dataclass(frozen=True)
class ResolvedWall:
    kind: WallKind
    # NORMAL: one instant; FOLD: both, earlier first; GAP: the first instant after the gap.
    instants: tuple[datetime, ...]


@lru_cache(maxsize=65536)
def resolve_wall(wall: datetime, zone: ZoneInfo) -> ResolvedWall:
    """Classify a naive wall time in ``zone`` and give its UTC instant(s)."""
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return ResolvedWall(WallKind.NORMAL, (first.astimezone(UTC),))
    first_utc = first.astimezone(UTC)
    second_utc = second.astimezone(UTC)
    if first_utc.astimezone(zone).replace(tzinfo=None) == wall:
        return ResolvedWall(WallKind.FOLD, tuple(sorted((first_utc, second_utc))))
    before, after = sorted((first_utc, second_utc))
    return ResolvedWall(WallKind.GAP, (_transition_between(before, after, zone),))


def _transition_between(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first instant in (before, after] whose UTC offset differs from ``before``'s (second precision)."""
    offset_before = before.astimezone(zone).utcoffset()
    low, high = 0, int((after - before).total_seconds())
    while high - low > 1:
        middle = (low + high) // 2
        if (before + timedelta(seconds=middle)).astimezone(zone).utcoffset() == offset_before:
            low = middle
        else:
            high = middle
    return before + timedelta(seconds=high)


def local_wall(instant: datetime, zone: ZoneInfo) -> datetime:
    """The naive wall time of a UTC instant in ``zone``."""
    return instant.astimezone(zone).replace(tzinfo=None)


def zone_changes_near(instant: datetime, zone: ZoneInfo, margin: timedelta) -> bool:
    """Whether the zone's UTC offset differs across [instant - margin, instant + margin]."""
    return (instant - margin).astimezone(zone).utcoffset() != (instant + margin).astimezone(zone).utcoffset()


def offset_changes(zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """Where the zone's UTC offset changes in [start, end], to the hour (no zone changes twice in an hour)."""
    changes = []
    at = start.replace(minute=0, second=0, microsecond=0)
    offset = at.astimezone(zone).utcoffset()
    while at < end:
        at += timedelta(hours=1)
        later = at.astimezone(zone).utcoffset()
        if later != offset:
            changes.append(at)
            offset = later
    return changes
