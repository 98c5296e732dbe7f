"""SLO tiers: what each tier of job promises, and a team's error budget per tier. Pure.

A job says its tier (``tier: critical | important | best-effort``, default important); the platform sets each
tier's objectives in deployment configuration (CDK context ``slo_tiers``, passed to the handlers as
``JOBSCHED_SLO_TIERS``): the share of runs that succeed, the start lateness a run may have, and the share of
runs with a deadline that finish by it. A run that ended FAILED, TIMED_OUT or MISSED spends the success budget;
a cancelled or skipped run is not counted. A job's freshness judgements count as events too: one found stale
spends the budget like a failed run (``core.freshness``).

What a team's runs did is kept per team, tier and UTC day in one ledger item (``SloDay``), so a budget over the
rolling window reads at most ``window_days`` items per tier, never the runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any, Literal

Tier = Literal["critical", "important", "best-effort"]
TIERS: tuple[Tier, ...] = ("critical", "important", "best-effort")
DEFAULT_TIER: Tier = "important"
MAX_WINDOW_DAYS = 90
# The burn-rate alarms' multipliers (SRE practice: 14.4x over 1 h spends 2% of a 28-day budget, 6x over 6 h 5%); the
# platform may set others (the reference's "configured multiplier, e.g. x4").
FAST_BURN, SLOW_BURN = 14.4, 6.0
MAX_BURN = 1000.0
TOP_JOBS = 5  # the jobs that burn a tier's budget most, shown with it


class BadSloConfig(ValueError):
    """A malformed ``slo_tiers`` configuration (refused at synth)."""


@dataclass(frozen=True)
class TierObjective:
    success: float  # the share of counted runs that succeed
    start_lateness: timedelta  # a run that starts later than this is late
    on_time: float  # the share of runs with a deadline that finish by it

    def as_dict(self) -> dict[str, Any]:
        from jobsched.core.durations import format_duration  # pydantic: kept out of the CLI's start-up (Settings)

        return {
            "success": self.success,
            "start_lateness": format_duration(self.start_lateness),
            "on_time": self.on_time,
        }


DEFAULT_OBJECTIVES: dict[Tier, TierObjective] = {
    "critical": TierObjective(0.999, timedelta(minutes=1), 0.999),
    "important": TierObjective(0.995, timedelta(minutes=5), 0.99),
    "best-effort": TierObjective(0.95, timedelta(minutes=30), 0.95),
}


@dataclass(frozen=True)
class SloTiers:
    """The platform's objectives for each tier, and the rolling window budgets are counted over."""

    objectives: dict[Tier, TierObjective] = field(default_factory=lambda: dict(DEFAULT_OBJECTIVES))
    window_days: int = 28
    fast_burn: float = FAST_BURN  # the 1-hour alarm fires above this burn rate
    slow_burn: float = SLOW_BURN  # the 6-hour alarm fires above this one

    @classmethod
    def parse(cls, text: str | None) -> SloTiers:
        return cls().with_overrides(json.loads(text)) if text else cls()

    def with_overrides(self, overrides: dict[str, Any]) -> SloTiers:
        """``{"window_days": 7, "fast_burn": 4, "critical": {"success": 0.9995, "start_lateness": "30s"}}``: the
        rest as before."""
        objectives = dict(self.objectives)
        window = self.window_days
        burns = {"fast_burn": self.fast_burn, "slow_burn": self.slow_burn}
        for key, value in overrides.items():
            if key in burns:
                burns[key] = float(value)
                if not 1 < burns[key] <= MAX_BURN:
                    raise BadSloConfig(f"{key} is {value}; a burn rate above 1 and at most {MAX_BURN:g}")
                continue
            if key == "window_days":
                window = int(value)
                if not 1 <= window <= MAX_WINDOW_DAYS:
                    raise BadSloConfig(f"window_days is {window}; between 1 and {MAX_WINDOW_DAYS}")
                continue
            if key not in TIERS or not isinstance(value, dict):
                raise BadSloConfig(
                    f"{key}: tiers are {', '.join(TIERS)} (each an object), and window_days, fast_burn, slow_burn"
                )
            objectives[key] = _objective(key, objectives[key], value)
        return SloTiers(objectives, window, burns["fast_burn"], burns["slow_burn"])

    def as_dict(self) -> dict[str, Any]:
        tiers: dict[str, Any] = {tier: self.objectives[tier].as_dict() for tier in TIERS}
        return {"window_days": self.window_days, "fast_burn": self.fast_burn, "slow_burn": self.slow_burn, **tiers}


def _objective(tier: str, current: TierObjective, values: dict[str, Any]) -> TierObjective:
    from jobsched.core.durations import parse_duration  # pydantic: kept out of the CLI's start-up (Settings)

    unknown = sorted(set(values) - {"success", "start_lateness", "on_time"})
    if unknown:
        raise BadSloConfig(f"{tier}: unknown {', '.join(unknown)}; allowed: success, start_lateness, on_time")

    def ratio(name: str, now: float) -> float:
        value = float(values.get(name, now))
        if not 0.5 <= value < 1:
            raise BadSloConfig(f"{tier}.{name} is {value}; a ratio from 0.5 up to (not including) 1")
        return value

    lateness = values.get("start_lateness")
    return replace(
        current,
        success=ratio("success", current.success),
        on_time=ratio("on_time", current.on_time),
        start_lateness=parse_duration(str(lateness)) if lateness is not None else current.start_lateness,
    )


@dataclass(frozen=True)
class RunCount:
    """What one ended run adds to its team's ledger for its tier and day."""

    ended: int = 1
    bad: int = 0  # FAILED, TIMED_OUT or MISSED
    late: int = 0  # started later than the tier's start_lateness
    with_deadline: int = 0
    past_deadline: int = 0
    judged: int = 0  # a freshness judgement (``core.freshness``): an event of the budget like a run
    stale: int = 0  # ... that found the job stale (a bad event)

    @property
    def spent(self) -> int:
        """Bad events: a job's count in the day's ``bad_by_job``."""
        return self.bad + self.stale


FRESHNESS_JUDGED = RunCount(ended=0, judged=1)
FRESHNESS_STALE = RunCount(ended=0, judged=1, stale=1)


@dataclass(frozen=True)
class SloDay:
    """A team's counted runs of one tier on one UTC day, and each job's bad runs that day."""

    day: date
    ended: int = 0
    bad: int = 0
    late: int = 0
    with_deadline: int = 0
    past_deadline: int = 0
    judged: int = 0
    stale: int = 0
    bad_by_job: dict[str, int] = field(default_factory=dict)  # bad runs and stale judgements


@dataclass(frozen=True)
class TierBudget:
    tier: Tier
    objective: TierObjective
    window_days: int
    runs: int
    bad: int
    late: int
    past_deadline: int
    judged: int  # freshness judgements (events of the budget beside the runs)
    stale: int  # ... that found a job stale (bad events)
    budget_left: float  # of the window's error budget: 1.0 untouched, 0 spent, below 0 overspent
    burn_rate_1d: float  # how fast the last day spent it: 1.0 spends exactly the budget over the window
    burn_rate_7d: float
    top_jobs: list[tuple[str, int]]  # (job name, bad runs in the window), most first
    days: list[SloDay]  # the window, oldest first (days without runs included, as zeros)


def tier_budget(tier: Tier, tiers: SloTiers, days: list[SloDay], *, today: date) -> TierBudget:
    """A tier's error budget over the window ending ``today`` (inclusive) from its ledger days."""
    objective = tiers.objectives[tier]
    window = [today - timedelta(days=back) for back in range(tiers.window_days - 1, -1, -1)]
    by_day = {entry.day: entry for entry in days}
    series = [by_day.get(day, SloDay(day)) for day in window]
    runs = sum(entry.ended for entry in series)
    bad = sum(entry.bad for entry in series)
    judged, stale = sum(entry.judged for entry in series), sum(entry.stale for entry in series)
    allowed = 1 - objective.success
    events = runs + judged
    spent = ((bad + stale) / events) / allowed if events else 0.0
    jobs: dict[str, int] = {}
    for entry in series:
        for job, count in entry.bad_by_job.items():
            jobs[job] = jobs.get(job, 0) + count
    return TierBudget(
        tier=tier,
        objective=objective,
        window_days=tiers.window_days,
        runs=runs,
        bad=bad,
        late=sum(entry.late for entry in series),
        past_deadline=sum(entry.past_deadline for entry in series),
        judged=judged,
        stale=stale,
        budget_left=round(1 - spent, 4),
        burn_rate_1d=round(burn_rate(series[-1:], allowed), 2),
        burn_rate_7d=round(burn_rate(series[-7:], allowed), 2),
        top_jobs=sorted(jobs.items(), key=lambda item: (-item[1], item[0]))[:TOP_JOBS],
        days=series,
    )


def burn_rate(days: list[SloDay], allowed: float) -> float:
    """The bad share of these days' events (runs and freshness judgements) over the budget's share (0 without)."""
    events = sum(entry.ended + entry.judged for entry in days)
    return (sum(entry.bad + entry.stale for entry in days) / events) / allowed if events else 0.0
