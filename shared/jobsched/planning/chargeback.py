"""A team's bill for a month: its jobs' usage items (``core.usage``, one a job and day) priced by the region's
price table (``core.prices``), by job, tier or target type, the scheduler's share apart from the targets'.
Reads one key range of the team's partition (at most 31 items a job), never the runs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Literal

from jobsched.core.prices import PriceTable
from jobsched.core.usage import ATTEMPTS, COUNTERS, RUNS, cost_of
from jobsched.ports import UsageDay, UsagePort

GroupBy = Literal["job", "tier", "target"]


@dataclass(frozen=True)
class CostLine:
    key: str  # the job, tier or target type
    runs: int
    attempts: int
    scheduler: float  # USD
    target: float

    @property
    def total(self) -> float:
        return self.scheduler + self.target


@dataclass(frozen=True)
class Chargeback:
    team: str
    month: str  # YYYY-MM
    prices: str  # which table priced it
    by: GroupBy
    lines: list[CostLine] = field(default_factory=list)  # most expensive first

    @property
    def scheduler(self) -> float:
        return sum(line.scheduler for line in self.lines)

    @property
    def target(self) -> float:
        return sum(line.target for line in self.lines)

    @property
    def total(self) -> float:
        return self.scheduler + self.target


def month_days(month: str) -> tuple[date, date]:
    """The first and last day of ``YYYY-MM`` (ValueError for anything else)."""
    first = date.fromisoformat(f"{month}-01")
    following = (first.replace(day=28) + timedelta(days=4)).replace(day=1)
    return first, following - timedelta(days=1)


def chargeback(store: UsagePort, team: str, month: str, *, by: GroupBy, prices: PriceTable) -> Chargeback:
    first, last = month_days(month)
    return priced(team, month, store.usage_between(team, first, last), by=by, prices=prices)


def priced(team: str, month: str, days: list[UsageDay], *, by: GroupBy, prices: PriceTable) -> Chargeback:
    """``days`` grouped and priced: each group's counters summed first, then priced (one rounding, not 31)."""
    groups: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COUNTERS, 0.0))
    for day in days:
        key = {"job": day.job, "tier": day.tier, "target": day.target_type}[by] or "unknown"
        for name, value in day.counters.items():
            groups[key][name] += value
    lines = []
    for key, counters in groups.items():
        cost = cost_of(counters, prices)
        lines.append(CostLine(key, int(counters[RUNS]), int(counters[ATTEMPTS]), cost.scheduler, cost.target))
    lines.sort(key=lambda line: (-line.total, line.key))
    return Chargeback(team, month, prices.label, by, lines)
