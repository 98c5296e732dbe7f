"""Sizing a deployment from its job files (``jobsched capacity DIR``): the peak minute of the next days, the
settings and quotas that peak needs, and what a month costs.

The peak comes from the schedule engine (the same fire instants the dispatcher will compute). Jobs with
the same schedule and no job-dependent part (``H`` fields, jitter) are computed once, so ten thousand
copies of a minutely job cost one. The settings come from the scale model (``jobsched.planning.scale_model``)
with its recorded calibration: the smallest worker concurrency whose modelled p99 start lateness for the
peak is within the target, dispatchers enough to send the peak's sparse jobs within the ten ticks they
are visited ahead, DynamoDB warm throughput for the peak's writes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from jobsched.core.names import DUE_SHARDS, MAX_DISPATCHERS, MAX_DUE_SHARDS
from jobsched.core.spec import JobSpec
from jobsched.pipeline.dispatch import DISPATCH_AHEAD, LOOKAHEAD
from jobsched.planning.scale_model import (
    AWS_LIMITS,
    FULL_VCPU_MB,
    RECORDED_CALIBRATION,
    AwsLimits,
    BurstResult,
    Calibration,
    Deployment,
    simulate,
)
from jobsched.schedule.company import NO_COMPANY, CompanySettings
from jobsched.schedule.fires import preview_schedule

# Measured by scripts/bench_pipeline.py and scripts/idle_cost.py (README "Measured"): update with them.
COST_PER_MILLION_RUNS_USD = 5.21
IDLE_PROD_PER_MONTH_USD = 29.41
MAX_FIRES_PER_SCHEDULE = 200_000  # a minutely schedule over 138 days: beyond, a schedule is cut short
# (worker concurrency per queue, full vCPU, queues per class) from the cheapest: the defaults first, then one
# vCPU per function, more concurrent invocations, then more queues (event sources scaling side by side).
LADDER = (
    (50, False, 1),
    (50, True, 1),
    (100, True, 1),
    (200, True, 1),
    (500, True, 1),
    (1000, True, 1),
    (1000, True, 4),
    (1000, True, 8),
    (1000, True, 16),
)


@dataclass(frozen=True)
class LoadProfile:
    jobs: int
    scheduled: int
    start: datetime
    days: int
    per_minute: Counter[datetime]  # minute -> runs due in it
    sparse_per_minute: Counter[datetime]  # of those, runs of jobs visited ahead (DISPATCH_AHEAD)
    truncated: int  # schedules cut at MAX_FIRES_PER_SCHEDULE

    @property
    def total(self) -> int:
        return sum(self.per_minute.values())

    def peak(self) -> tuple[datetime, int]:
        if not self.per_minute:
            return self.start, 0
        minute, runs = max(self.per_minute.items(), key=lambda item: (item[1], -item[0].timestamp()))
        return minute, runs

    def runs_per_month(self) -> float:
        return self.total / self.days * 30


def load_profile(
    specs: Iterable[JobSpec], *, start: datetime, days: int, company: CompanySettings = NO_COMPANY
) -> LoadProfile:
    """Runs due per minute over ``days`` from ``start``."""
    groups: Counter[str] = Counter()
    representative: dict[str, JobSpec] = {}
    jobs = 0
    for spec in specs:
        jobs += 1
        if spec.schedule is None:
            continue
        schedules = company.effective(spec)
        job_dependent = any("H" in s.expression or s.jitter > timedelta(0) for s in schedules)
        key = "|".join(s.model_dump_json() for s in schedules) + (spec.key if job_dependent else "")
        groups[key] += 1
        representative.setdefault(key, spec)
    until = start + timedelta(days=days)
    per_minute: Counter[datetime] = Counter()
    sparse: Counter[datetime] = Counter()
    truncated = 0
    for key, count in groups.items():
        spec = representative[key]
        compiled = preview_schedule(spec, registered_at=start, company=company)
        assert compiled is not None  # grouped from jobs with a schedule
        previous: datetime | None = None
        for fires, occurrence in enumerate(compiled.fires(start, until=until), start=1):
            minute = occurrence.fire_at.replace(second=0, microsecond=0)
            per_minute[minute] += count
            # Visited ahead when its instants are further apart than the lookahead can use.
            if previous is None or occurrence.at - previous > LOOKAHEAD:
                sparse[minute] += count
            previous = occurrence.at
            if fires >= MAX_FIRES_PER_SCHEDULE:
                truncated += 1
                break
    return LoadProfile(jobs, sum(groups.values()), start, days, per_minute, sparse, truncated)


@dataclass(frozen=True)
class Sizing:
    deployment: Deployment
    p99_lateness_s: float
    peak_concurrency: int
    peak_wcu: float
    binding: str
    account_concurrency: int  # what the account needs: workers at their maximum plus the other functions
    monthly_cost_usd: float

    def context(self) -> str:
        d = self.deployment
        parts = [
            f"-c dispatchers={d.dispatchers}",
            f"-c due_shards={d.due_shards}",
            f"-c worker_concurrency='{{\"normal\": {d.worker_max_concurrency}}}'",
        ]
        if d.warm_wcu:
            parts.append(f"-c warm_throughput='{{\"writes\": {d.warm_wcu}}}'")
        if d.queues_per_class > 1:
            parts.append(f"-c work_queues={d.queues_per_class}")
        if d.worker_memory_mb != Deployment().worker_memory_mb:
            parts.append(f"-c dispatcher_memory={d.dispatcher_memory_mb} -c worker_memory={d.worker_memory_mb}")
        return " ".join(parts)


def size_for(
    profile: LoadProfile,
    *,
    target_p99_s: float = 60.0,
    calibration: Calibration = RECORDED_CALIBRATION,
    limits: AwsLimits = AWS_LIMITS,
) -> Sizing:
    """The smallest deployment (by worker concurrency) whose modelled p99 for the peak minute meets the target;
    the largest on the ladder if none does (its ``p99_lateness_s`` then says by how much it misses)."""
    minute, peak = profile.peak()
    sparse = profile.sparse_per_minute.get(minute, 0)
    dispatch_s = calibration.dispatch_cpu() / Deployment.vcpu(FULL_VCPU_MB)
    per_part = (DISPATCH_AHEAD.total_seconds() / 60) * limits.tick_budget_s / dispatch_s
    dispatchers = min(MAX_DISPATCHERS, max(1, math.ceil(sparse / per_part)))
    shards = min(MAX_DUE_SHARDS, max(DUE_SHARDS, 1 << math.ceil(math.log2(max(1, 2 * dispatchers)))))
    fire_at = [0.0] * peak
    chosen: tuple[Deployment, BurstResult | None] | None = None
    defaults = Deployment()
    for concurrency, full_vcpu, queues in LADDER:
        deployment = Deployment(
            dispatchers=dispatchers,
            due_shards=shards,
            dispatcher_memory_mb=FULL_VCPU_MB if full_vcpu else defaults.dispatcher_memory_mb,
            worker_memory_mb=FULL_VCPU_MB if full_vcpu else defaults.worker_memory_mb,
            worker_max_concurrency=concurrency,
            warm_wcu=limits.ddb_table_quota_wcu,
            queues_per_class=queues,
            account_concurrency=max(limits.account_concurrency, queues * concurrency + 100),
        )
        result = simulate(fire_at, deployment, calibration, limits) if peak else None
        chosen = (deployment, result)
        if result is None or result.percentile(0.99) <= target_p99_s:
            break
    assert chosen is not None
    deployment, outcome = chosen
    p99 = outcome.percentile(0.99) if outcome is not None else 0.0
    peak_wcu = outcome.peak_wcu_per_second if outcome is not None else 0.0
    # Warm throughput only where on demand's cold start would throttle the peak, rounded up to a thousand.
    warm = min(limits.ddb_table_quota_wcu, math.ceil(peak_wcu / 1000) * 1000)
    deployment = replace(deployment, warm_wcu=warm if peak_wcu > limits.ddb_on_demand_instant_wcu else None)
    monthly = IDLE_PROD_PER_MONTH_USD + profile.runs_per_month() / 1e6 * COST_PER_MILLION_RUNS_USD
    return Sizing(
        deployment=deployment,
        p99_lateness_s=p99,
        peak_concurrency=outcome.peak_concurrency if outcome is not None else 0,
        peak_wcu=peak_wcu,
        binding=outcome.binding if outcome is not None else "none",
        account_concurrency=min(
            deployment.queues_per_class * deployment.worker_max_concurrency,
            max(1, outcome.peak_concurrency if outcome else 1),
        )
        + 2 * dispatchers
        + 100,
        monthly_cost_usd=monthly,
    )
