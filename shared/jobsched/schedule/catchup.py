"""Catch-up: what a dispatcher tick does with a job's instants since its cursor: on time, caught up, or missed (and
why), by the schedule's catch-up policy, so an outage never floods a target."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from jobsched.schedule.engine import CompiledSchedule, Occurrence
from jobsched.schedule.exclusions import as_utc

# An instant more than this overdue counts as missed and goes through the catch-up policy; within it,
# a late tick simply fires it.
LATE_GRACE = timedelta(minutes=2)


@dataclass(frozen=True)
class DuePlan:
    """What a dispatcher tick should do for one job."""

    due: list[Occurrence]  # to dispatch now: caught-up instants (oldest first), then on-time ones
    missed: list[tuple[Occurrence, str]]  # overdue instants in the catch-up window that will not run
    missed_before: datetime | None  # instants in (last, missed_before] were outside the window, not examined
    cursor: datetime  # everything up to here has been decided; the next tick starts after it


def plan_due(
    compiled: CompiledSchedule,
    *,
    last: datetime,
    now: datetime,
    lookahead: timedelta,
    grace: timedelta = LATE_GRACE,
) -> DuePlan:
    """Decide the instants in (last, now + lookahead]: on time, caught up, or missed (and why).

    Missed instants (more than ``grace`` overdue) follow the schedule's catch-up policy:
    ``none`` runs none, ``latest`` the most recent one, ``all`` up to ``max_runs`` of the most recent,
    always only within ``window`` of now, so an outage never floods the target.
    """
    last, now = as_utc(last), as_utc(now)
    policy = compiled.schedule.catchup
    window_start = now - policy.window
    overdue_until = now - grace
    missed_before = window_start if last < window_start else None
    begin = max(last, window_start)
    keep = {"none": 0, "latest": 1, "all": policy.max_runs}[policy.policy]
    caught_up: deque[Occurrence] = deque()
    missed: list[tuple[Occurrence, str]] = []
    on_time: list[Occurrence] = []
    until = now + lookahead
    for occurrence in compiled.fires(begin, until=until):
        if occurrence.at >= overdue_until:
            on_time.append(occurrence)
            continue
        caught_up.append(occurrence)
        if len(caught_up) > keep:
            dropped = caught_up.popleft()
            missed.append((dropped, _missed_reason(policy.policy, policy.max_runs)))
    return DuePlan(
        due=[*caught_up, *on_time],
        missed=missed,
        missed_before=missed_before,
        cursor=max(last, until),
    )


def _missed_reason(policy: Literal["none", "latest", "all"], max_runs: int) -> str:
    if policy == "none":
        return "missed: catch-up policy is none"
    if policy == "latest":
        return "missed: catch-up policy latest runs only the most recent missed instant"
    return f"missed: catch-up runs at most {max_runs} instants (the most recent)"
