"""The SLO ledger's subscriber to the lifecycle: each run that ends adds to its team's ledger for its tier and
day (``core.slo``: its job's item of the day, with the ending attempt's usage in the same write, ``pipeline.usage``),
and is counted on ``TierRunsEnded{tier, outcome}``, which the tiers' burn-rate alarms read.

A cancelled or skipped run is not counted. A FAILED, TIMED_OUT or MISSED run is bad; a run that started later
than its tier's start lateness is late; a run with a deadline that finished past it is past its deadline.
Counted at most once: the lifecycle announces a run's end once, after the write that ended it; a ledger write
that fails raises, and the redelivered message finds the run ended and announces nothing (a count is lost,
never doubled). The job's tier is read once a minute per job and process (a cheap, eventually consistent read).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Protocol

from jobsched.core.freshness import FreshnessPolicy, policy_of
from jobsched.core.run_records import Run
from jobsched.core.runs import RunStatus
from jobsched.core.slo import DEFAULT_TIER, RunCount, SloTiers, Tier
from jobsched.core.spec import JobSpec
from jobsched.pipeline.in_hand import spec_in_hand
from jobsched.pipeline.lifecycle import Change, StateChange
from jobsched.pipeline.usage import take_held, write_usage
from jobsched.ports import JobsPort, SloLedgerPort
from jobsched.watch.signals import emit

BAD = frozenset({RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.MISSED})
NOT_COUNTED = frozenset({RunStatus.CANCELLED, RunStatus.SKIPPED})
TIER_CACHE_SECONDS = 60.0


class LedgerJobs(JobsPort, SloLedgerPort, Protocol):
    """The jobs store as the ledger uses it: specs (the tier) and the ledger items."""


@dataclass(frozen=True)
class SloTerms:
    """What a job's spec holds its runs to: its tier, its deadline after each instant, its freshness, whether its
    anomalies page, and the zone its hours of day are in."""

    tier: Tier
    deadline: timedelta | None = None
    freshness: FreshnessPolicy | None = None
    anomalies: str = "record"
    zone: str = "UTC"
    spec: JobSpec | None = None  # the spec these terms were read from (its freshness is kept with it)

    @classmethod
    def of(cls, spec: JobSpec) -> SloTerms:
        zone = spec.schedule.timezone if spec.schedule is not None else "UTC"
        return cls(spec.tier, spec.deadline, policy_of(spec), spec.anomalies, zone, spec)


@dataclass
class JobTerms:
    """Each job's terms, read once a minute per job and process (a cheap, eventually consistent read), shared by
    the lifecycle's subscribers."""

    jobs: JobsPort
    monotonic: Callable[[], float] = time.monotonic
    _terms: dict[str, tuple[float, SloTerms | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, job: str) -> SloTerms | None:
        """None: the job is gone."""
        now = self.monotonic()
        with self._lock:
            cached = self._terms.get(job)
        if cached is not None and now - cached[0] < TIER_CACHE_SECONDS:
            return cached[1]
        stored = spec_in_hand(job) or self.jobs.get(job, consistent=False)
        terms = SloTerms.of(stored.spec) if stored is not None else None
        with self._lock:
            self._terms[job] = (now, terms)
        return terms


@dataclass
class SloLedger:
    jobs: LedgerJobs
    tiers: SloTiers
    terms: JobTerms | None = None
    _noted: set[tuple[str, date]] = field(default_factory=set)  # (team, day) added to the day's teams already

    def __post_init__(self) -> None:
        self.terms = self.terms or JobTerms(self.jobs)

    def __call__(self, change: StateChange) -> None:
        run = change.run
        if change.task is not None or run is None or change.change not in (Change.FINISHED, Change.RETRYING):
            return
        held = take_held(run.job, run.run_id)  # the attempt's usage, written with the end (``pipeline.usage``)
        if change.change is Change.RETRYING or run.status in NOT_COUNTED:
            if held is not None:
                write_usage(held)
            return
        terms = self.terms_of(run.job)
        count = run_count(run, self.tiers, terms)
        day = (run.finished_at or run.scheduled_at).date()
        if held is not None:
            write_usage(held, count=count, day=day)
        else:
            self.jobs.count_run(run.team, terms.tier, day, count, job=run.job)
        if (run.team, day) not in self._noted:  # once per team, day and process: the executive view's rows
            self.jobs.note_team_day(run.team, day)
            self._noted.add((run.team, day))
        emit("TierRunsEnded", 1, tier=terms.tier, outcome="bad" if count.bad else "good")

    def terms_of(self, job: str) -> SloTerms:
        assert self.terms is not None
        return self.terms(job) or SloTerms(DEFAULT_TIER)


def run_count(run: Run, tiers: SloTiers, terms: SloTerms) -> RunCount:
    """What an ended run adds to its tier's ledger."""
    objective = tiers.objectives[terms.tier]
    late = run.lateness_ms is not None and run.lateness_ms > objective.start_lateness.total_seconds() * 1000
    due = run.scheduled_at + terms.deadline if terms.deadline is not None else None
    past = due is not None and run.finished_at is not None and run.finished_at > due
    return RunCount(
        bad=int(run.status in BAD),
        late=int(late),
        with_deadline=int(due is not None),
        past_deadline=int(past),
    )
