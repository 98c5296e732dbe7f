"""Alerts that learn: how precise the learned baselines are on seeded histories, and what they cost.

Each profile is a job's seeded history (durations log-normal around its median, start lateness of a few seconds,
an hour-of-day season where it has one, ordinary noise included), run through the real lifecycle subscriber
(``pipeline.baselines.HealthWatch``) on the memory adapters, a run at a time as the worker ends them. Anomalies
are injected at seeded random runs once a baseline exists (after two days and ``MIN_SAMPLES`` runs): a run five
times slower, one a tenth as long, or one started fifteen minutes late. Precision is the share of runs flagged
that were injected; recall the share of the injected that were flagged. A steady profile has nothing injected:
every flag there is a false alarm.

    python scripts/bench_anomaly.py
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.table import item_size
from jobsched.core.baseline import MIN_SAMPLES
from jobsched.core.names import JobsKeys
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.pipeline.baselines import HealthWatch
from jobsched.pipeline.lifecycle import AnnouncedRuns, Lifecycle
from jobsched.pipeline.slo_ledger import JobTerms

START = parse_instant("2027-01-04T00:00:00Z")
SEEDS = (1, 2, 3)


@dataclass(frozen=True)
class Profile:
    name: str
    every: timedelta
    days: int
    median_seconds: float
    sigma: float  # of the log-normal: 0.15 is +-15% or so
    season: dict[int, float] = field(default_factory=dict)  # hour of day -> a factor on the median
    noisy: float = 0.0  # the share of ordinary slow runs (x1.4), which are not anomalies
    inject: float = 0.02  # the share of runs after the warm-up made anomalous


PROFILES = (
    Profile("steady-hourly", timedelta(hours=1), 28, 420, 0.12, inject=0.0),
    Profile("steady-minutely", timedelta(minutes=1), 3, 20, 0.25, inject=0.0),
    Profile("hourly", timedelta(hours=1), 28, 420, 0.12),
    Profile("seasonal-hourly", timedelta(hours=1), 28, 300, 0.15, season={1: 6.0, 2: 6.0, 3: 4.0}),
    Profile("noisy-hourly", timedelta(hours=1), 28, 600, 0.2, noisy=0.05),
    Profile("daily", timedelta(days=1), 120, 1200, 0.2),
    Profile("minutely", timedelta(minutes=1), 3, 20, 0.25, inject=0.01),
)


@dataclass
class Outcome:
    runs: int = 0
    injected: int = 0
    flagged: int = 0
    true_positives: int = 0
    writes: int = 0
    read_units: float = 0.0
    max_item_bytes: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.true_positives / self.flagged if self.flagged else 1.0

    @property
    def recall(self) -> float:
        return self.true_positives / self.injected if self.injected else 1.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def run_profile(profile: Profile, seed: int = 7) -> Outcome:
    """The profile's history through the real subscriber; what it flagged against what was injected."""
    rng = random.Random(f"{profile.name}:{seed}")
    clock, jobs, store = Clock(), MemoryJobs(), MemoryRuns()
    spec = JobSpec.model_validate(
        {"name": profile.name, "team": "data", "target": {"type": "lambda", "function": "f"}, "anomalies": "page"}
    )
    jobs.create(spec, now=START, principal="bench", next_visit_at=None, cursor=START)
    pages: list[EscalationEvent] = []
    watch = HealthWatch(jobs, store, pages.append, clock, JobTerms(jobs), monotonic=lambda: clock.now.timestamp())
    runs = AnnouncedRuns(store, Lifecycle([watch]))
    outcome = Outcome()
    count = int(timedelta(days=profile.days) / profile.every)
    warm_up = max(timedelta(days=2), MIN_SAMPLES * profile.every)
    for index in range(count):
        at = START + index * profile.every
        median = profile.median_seconds * profile.season.get(at.hour, 1.0)
        took = median * math.exp(rng.gauss(0, profile.sigma))
        late = abs(rng.gauss(0, 3))
        if profile.noisy and rng.random() < profile.noisy:
            took *= 1.4
        kind = None
        if at - START >= warm_up and rng.random() < profile.inject:
            kind = rng.choice(("slow", "late", "fast") if median >= 120 else ("slow", "late"))
            took = {"slow": took * 5, "fast": took / 10}.get(kind, took)
            late += 900 if kind == "late" else 0
        message = RunMessage.scheduled(job=spec.key, team="data", at=at, fire_at=at, spec_version=1)
        clock.now = at + timedelta(seconds=late)
        runs.create(message, status=RunStatus.RUNNING, now=clock.now, retention=timedelta(days=1))
        clock.now += timedelta(seconds=took)
        before = jobs.table.capacity.writes
        read_before = jobs.table.capacity.read_units + store.table.capacity.read_units
        ended = runs.finish(spec.key, message.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=clock.now)
        outcome.writes += jobs.table.capacity.writes - before
        outcome.read_units += jobs.table.capacity.read_units + store.table.capacity.read_units - read_before
        stored = store.get(spec.key, ended.run_id)
        flagged = stored is not None and stored.anomaly is not None
        outcome.runs += 1
        outcome.injected += kind is not None
        outcome.flagged += flagged
        outcome.true_positives += flagged and kind is not None
        if flagged and stored is not None and stored.anomaly and len(outcome.examples) < 2:
            outcome.examples.append(f"{'injected ' + kind if kind else 'FALSE ALARM'}: {stored.anomaly}")
    item = jobs.table.get(spec.key, JobsKeys.HEALTH)
    outcome.max_item_bytes = item_size(item)
    return outcome


def main() -> None:
    logging.disable(logging.CRITICAL)
    print(
        f"Alerts that learn: anomalies on seeded histories, {len(SEEDS)} seeds a profile "
        "(the real lifecycle subscriber, memory adapters)"
    )
    print(
        f"{'profile':<17} {'runs':>6} {'injected':>8} {'flagged':>7} {'precision':>9} {'recall':>7} "
        f"{'writes/run':>10} {'reads/run':>9} {'item bytes':>10}"
    )
    flagged = true = injected = found = 0
    steady_false = 0
    for profile in PROFILES:
        outcome = Outcome()
        for seed in SEEDS:
            one = run_profile(profile, seed)
            outcome.runs += one.runs
            outcome.injected += one.injected
            outcome.flagged += one.flagged
            outcome.true_positives += one.true_positives
            outcome.writes += one.writes
            outcome.read_units += one.read_units
            outcome.max_item_bytes = max(outcome.max_item_bytes, one.max_item_bytes)
            outcome.examples += one.examples[: 2 - len(outcome.examples)]
        print(
            f"{profile.name:<17} {outcome.runs:>6} {outcome.injected:>8} {outcome.flagged:>7} "
            f"{outcome.precision:>9.1%} {outcome.recall:>7.1%} {outcome.writes / outcome.runs:>10.3f} "
            f"{outcome.read_units / outcome.runs:>9.3f} {outcome.max_item_bytes:>10}"
        )
        for example in outcome.examples:
            print(f"{'':<19}{example}")
        flagged += outcome.flagged
        true += outcome.true_positives
        injected += outcome.injected
        found += outcome.true_positives
        if profile.inject == 0:
            steady_false += outcome.flagged
    print(
        f"overall: precision {true / flagged:.1%}, recall {found / injected:.1%}; "
        f"false alarms on the steady histories: {steady_false}"
    )
    print(
        "writes/run: baseline writes on the Jobs table per run (the run record's own writes excluded); reads/run:"
        " read units a run's end spends on its job's baseline and the run records it learns (eventually"
        " consistent)"
    )


if __name__ == "__main__":
    main()
