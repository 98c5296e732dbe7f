"""Team limits and fair shares: what one team may hold of a shared deployment (#13: no team starves another).

The platform sets defaults for every team (CDK context ``team_limits``, passed to the handlers as
``JOBSCHED_TEAM_LIMITS``); an admin may override any of them for one team (the team's ``QUOTA`` item).
Every limit is on unless the platform turns it off: a team nobody has thought about is still bounded.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TypeVar

from jobsched.core.limits import TeamLimits

_T = TypeVar("_T")


class CachedLimits:
    """Each team's limits (the platform's defaults with its overrides), read at most once a minute per team:
    every run needs them, admins change them rarely, and a change reaches every function within a minute."""

    def __init__(self, defaults: TeamLimits, overrides: Callable[[str], dict[str, int]], *, seconds: float = 60.0):
        self.defaults = defaults
        self._overrides = overrides
        self._seconds = seconds
        self._cache: dict[str, tuple[float, TeamLimits]] = {}

    def get(self, team: str, *, now: float | None = None) -> TeamLimits:
        moment = time.monotonic() if now is None else now
        cached = self._cache.get(team)
        if cached is not None and moment - cached[0] < self._seconds:
            return cached[1]
        limits = self.defaults.with_overrides(self._overrides(team))
        self._cache[team] = (moment, limits)
        return limits

    def forget(self, team: str) -> None:
        self._cache.pop(team, None)


class QuotaExceeded(Exception):
    """A team is at one of its limits; ``limit`` names which (the API's error field)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


def interleave_teams(items: Sequence[_T], *, team: Callable[[_T], str], due_in: Callable[[_T], timedelta]) -> list[_T]:
    """Order a tick's messages so that, among those due at one instant, every team's k-th message comes
    before any team's (k+1)-th: a team with a thousand runs at midnight puts one ahead of another team's
    first, not a thousand. (Queues deliver roughly in this order; in AWS the team is also the message
    group, which SQS fair queues use to keep a quiet team's dwell time low behind a busy one.)"""
    rank: dict[tuple[timedelta, str], int] = defaultdict(int)
    keyed = []
    for index, item in enumerate(items):
        slot = (due_in(item), team(item))
        keyed.append((slot[0], rank[slot], index, item))
        rank[slot] += 1
    return [item for *_, item in sorted(keyed, key=lambda entry: entry[:3])]
