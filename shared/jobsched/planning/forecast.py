"""What a job will cost before it is applied: its runs in the next 30 days (its schedules as the dispatcher fires
them, company calendars and windows included) times the scheduler's share of a run (``core.usage``, priced by
``core.prices``), a DAG run's tasks each an attempt. The targets' own cost is not foreseen (a Lambda's duration, a
task's size and time are known only once it ran: ``jobsched cost`` has them). Bounded: at most
``MAX_FORECAST_RUNS`` instants are counted a job (more: ``capped``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.core.prices import PriceTable
from jobsched.core.spec import JobSpec
from jobsched.core.usage import SCHEDULER_PER_ATTEMPT, cost_of
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.fires import preview_schedule

MONTH = timedelta(days=30)
MAX_FORECAST_RUNS = 100_000


@dataclass(frozen=True)
class Forecast:
    runs_per_month: int
    attempts_per_run: int
    usd_per_month: float
    capped: bool = False

    def change_from(self, before: Forecast | None) -> str:
        """ "+$0.19/month (43,200 runs instead of 720)": what a change does to the monthly figure."""
        was_usd, was_runs = (before.usd_per_month, before.runs_per_month) if before else (0.0, 0)
        delta = self.usd_per_month - was_usd
        return (
            f"{'+' if delta >= 0 else '-'}${abs(delta):,.2f}/month "
            f"({self.runs_per_month:,} runs a month instead of {was_runs:,})"
        )


def forecast(spec: JobSpec, *, now: datetime, company: CompanySettings, prices: PriceTable) -> Forecast:
    """The job's expected runs and scheduler cost over the next 30 days (a triggered-only job: none foreseen)."""
    compiled = preview_schedule(spec, registered_at=now, company=company)
    fires = (
        sum(1 for _ in itertools.islice(compiled.fires(now, until=now + MONTH), MAX_FORECAST_RUNS + 1))
        if compiled is not None
        else 0
    )
    runs = min(fires, MAX_FORECAST_RUNS)
    attempts = len(spec.dag.tasks) if spec.dag is not None else 1
    per_run = cost_of(SCHEDULER_PER_ATTEMPT, prices).total * attempts
    return Forecast(runs, attempts, runs * per_run, capped=fires > MAX_FORECAST_RUNS)
