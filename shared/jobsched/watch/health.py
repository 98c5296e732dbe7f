"""Per-job health, computed from a job's recent runs (pure): what a product team looks at first.

A strip of the last runs (oldest to newest), the success rate over a window, lateness and duration
percentiles, the current streak, the next fire and the open incidents. Success rate counts the runs that
were due to do work and ended: succeeded over succeeded + failed + timed out + missed. Skipped and
cancelled runs are shown in the strip and left out of the rate (nobody asked them to succeed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.core.run_records import Run
from jobsched.core.runs import RunStatus

DEFAULT_WINDOW = timedelta(days=7)
MAX_WINDOW = timedelta(days=90)
STRIP_LENGTH = 20
MAX_RUNS_READ = 500  # one job's health reads at most this many runs, newest first

COUNTED = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.MISSED}
BAD = {RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.MISSED}


def strip_cell(run: Run) -> str:
    """succeeded, retried (succeeded after a retry), failed, timed_out, missed, skipped, cancelled, running,
    waiting (held back by max_running, a team limit or an open circuit, a trigger not yet started, or waiting
    for its data)."""
    if run.status is RunStatus.SUCCEEDED:
        return "retried" if run.attempt > 1 else "succeeded"
    if run.status in (RunStatus.SCHEDULED, RunStatus.WAITING):
        return "waiting"
    if run.status in (RunStatus.RUNNING, RunStatus.RETRYING):
        return "running"
    return run.status.value.lower()


@dataclass(frozen=True)
class JobHealth:
    job: str
    state: str
    paused_reason: str | None
    window_days: float
    runs: int  # runs in the window (every status)
    success_rate: float | None  # None: nothing in the window was due to succeed
    strip: tuple[str, ...]  # the last runs, oldest first
    lateness_p50_s: float | None
    lateness_p95_s: float | None
    duration_p50_s: float | None
    duration_p95_s: float | None
    streak: str | None  # "3 failed", "12 succeeded"
    next_fire: str | None
    open_incidents: tuple[str, ...]

    @property
    def badness(self) -> tuple[int, float, int]:
        """Sort key, worst first: open incidents, then the lowest success rate, then a failing streak."""
        failing = int(bool(self.streak) and not str(self.streak).endswith("succeeded"))
        rate = self.success_rate if self.success_rate is not None else 1.0
        return (-len(self.open_incidents), rate, -failing)


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, round(fraction * len(ordered) + 0.5 - 1e-9))
    return round(ordered[min(rank, len(ordered)) - 1], 3)


def job_health(
    job: str,
    runs: Iterable[Run],
    *,
    now: datetime,
    window: timedelta = DEFAULT_WINDOW,
    state: str = "ACTIVE",
    paused_reason: str | None = None,
    next_fire: str | None = None,
    open_incidents: Iterable[str] = (),
    strip_length: int = STRIP_LENGTH,
) -> JobHealth:
    """``runs`` newest first (as the runs table pages them); runs before ``now - window`` are ignored."""
    since = now - window
    recent = [run for run in runs if run.scheduled_at >= since]
    oldest_first = list(reversed(recent))
    counted = [run for run in recent if run.status in COUNTED]
    succeeded = sum(run.status is RunStatus.SUCCEEDED for run in counted)
    lateness = [run.lateness_ms / 1000 for run in recent if run.lateness_ms is not None]
    durations = [
        (run.finished_at - run.started_at).total_seconds()
        for run in recent
        if run.started_at is not None and run.finished_at is not None
    ]
    return JobHealth(
        job=job,
        state=state,
        paused_reason=paused_reason,
        window_days=round(window.total_seconds() / 86400, 3),
        runs=len(recent),
        success_rate=round(succeeded / len(counted), 4) if counted else None,
        strip=tuple(strip_cell(run) for run in oldest_first[-strip_length:]),
        lateness_p50_s=percentile(lateness, 0.5),
        lateness_p95_s=percentile(lateness, 0.95),
        duration_p50_s=percentile(durations, 0.5),
        duration_p95_s=percentile(durations, 0.95),
        streak=_streak(counted),
        next_fire=next_fire,
        open_incidents=tuple(sorted(open_incidents)),
    )


def _streak(newest_first: Sequence[Run]) -> str | None:
    if not newest_first:
        return None
    good = newest_first[0].status is RunStatus.SUCCEEDED
    length = 0
    for run in newest_first:
        if (run.status is RunStatus.SUCCEEDED) != good:
            break
        length += 1
    return f"{length} {'succeeded' if good else 'failed'}"


def worst_first(healths: Iterable[JobHealth]) -> list[JobHealth]:
    return sorted(healths, key=lambda health: (health.badness, health.job))
