"""What an intake process spends on one team's events, decided before any store work.

A storm of one team's events (10,000 objects matching its rules) used to be read, checked and counted one by
one, each reading the job, its run and a counter, while every other team's events waited behind it on the
shared intake queue (0.16 s became 180 s). Two bounds, both in the process and free to check:
- a job whose events already started ``max_runs_per_minute`` runs this minute drops its later events of the
  minute without reading anything (the counter only grows within its minute, so this is exact);
- a team's events beyond its ``max_events_per_minute`` in this process this minute are dropped and counted
  (``rate_limited``), whatever jobs they are for.
State is kept for the current minute only: memory is bounded by the jobs and teams seen in one minute.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from jobsched.core.limits import TeamLimits


def minute_of(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M")


class EventBudget:
    def __init__(self, limits: Callable[[str], TeamLimits]) -> None:
        self.limits = limits
        self._window = ""
        self._spent: dict[str, int] = {}  # team -> events that reached store work this minute
        self._exhausted: set[str] = set()  # jobs whose max_runs_per_minute is used up this minute
        self._lock = threading.Lock()

    def refusal(self, job: str, team: str, now: datetime) -> str | None:
        """Why this event is dropped before any store work (None: it goes on, and is counted)."""
        limit = self.limits(team).max_events_per_minute
        with self._lock:
            self._roll(now)
            if job in self._exhausted:
                return "the job's events already started their max_runs_per_minute runs this minute"
            spent = self._spent.get(team, 0)
            if spent >= limit:
                return f"team {team}'s events are past its {limit} a minute (max_events_per_minute)"
            self._spent[team] = spent + 1
            return None

    def exhausted(self, job: str, now: datetime) -> None:
        """The job's counter refused a run this minute: its later events of the minute are dropped unread."""
        with self._lock:
            self._roll(now)
            self._exhausted.add(job)

    def _roll(self, now: datetime) -> None:
        window = minute_of(now)
        if window != self._window:
            self._window, self._spent, self._exhausted = window, {}, set()
