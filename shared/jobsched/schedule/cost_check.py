"""Whether a schedule costs too much to admit: a year of it simulated at registration (PUT refuses what exceeds the
step limit; the dispatcher quarantines what slips through)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from jobsched.core.expressions import AtExpression
from jobsched.core.spec import Schedule
from jobsched.schedule.engine import DEFAULT_HORIZON, compile_schedule
from jobsched.schedule.exclusions import as_utc
from jobsched.schedule.steps import ScheduleTooExpensive

SIMULATED_SPAN = timedelta(days=366)
SIMULATION_SECONDS = 2.0


def schedule_cost_problem(
    schedule: Schedule,
    *,
    hash_key: str,
    now: datetime,
    deadline_seconds: float = SIMULATION_SECONDS,
    monotonic: Callable[[], float] = time.monotonic,
) -> str | None:
    """Why this schedule costs too much to run (None: it does not), from a year's simulation.

    The next fire is looked up from each week of the coming year and from just inside each blackout
    window (where the walk to the next fire is longest); every look-up must stay within the step limit,
    and all of them within ``deadline_seconds``.
    """
    compiled = compile_schedule(schedule, hash_key=hash_key, anchor=now)
    end = as_utc(now) + SIMULATED_SPAN
    points = [as_utc(now) + timedelta(weeks=week) for week in range(53)]
    for windows in compiled.blackouts:
        if windows.starts is not None:
            # A recurring window is as long each time: its first few starts tell.
            points += [o.at for o in itertools.islice(windows.starts.fires(as_utc(now), until=end), 8)]
        elif windows.blackout.start is not None:
            points.append(as_utc(windows.blackout.start))
    started = monotonic()
    try:
        recurring = schedule.end_at is None and not isinstance(compiled.expression, AtExpression)
        if recurring and not compiled.next_fires(as_utc(now), 1):
            # Decided by steps, not by the clock: each look-up would walk the whole horizon for nothing.
            return f"no instant fires within {DEFAULT_HORIZON.days} days: all its candidate instants are excluded"
        for point in sorted(points):
            compiled.next_fires(point, 1)
            if monotonic() - started > deadline_seconds:
                return f"evaluating a year of this schedule takes longer than {deadline_seconds:g} s of CPU"
    except ScheduleTooExpensive as error:
        return str(error)
    return None
