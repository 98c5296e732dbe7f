"""The lifecycle's subscriber for a job's health: each run that ends is judged against the job's learned baseline
(``core.baseline``) and taught to it, and a success moves the job's freshness (``pipeline.freshness``).

Bounded: the baseline is one item per job, read eventually consistently at most once per ``CACHE_SECONDS`` per job
and process, and written when it learns: the runs ended since it last did, read from the job's run records (at most
``LEARN_READ_LIMIT``, eventually consistent, the ending run as in hand), once four of the job's intervals and an
hour have passed (``core.baseline.learning_due``): an hourly or daily job's baseline is written once in four runs,
a minutely one's once an hour. A write starts from a fresh read of the item, so marks another process wrote are
kept; two processes learning the same runs at once write the same baseline. A run
far outside the baseline says so on its record (one write, for that rare run), on the job's health item, and,
where the job asks (``anomalies: page``), pages at warning severity; the next usual run resolves that page.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from jobsched.core.baseline import (
    LEARN_READ_LIMIT,
    Anomaly,
    Baseline,
    Sample,
    judge,
    learn_runs,
    learning_due,
)
from jobsched.core.bounds import EARLIEST
from jobsched.core.run_records import Run
from jobsched.core.runs import LAST_OF_INSTANT, TERMINAL, RunStatus, instant_text, scheduled_run_id
from jobsched.core.spec import JobSpec
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.pipeline.freshness import FreshnessJobs, FreshnessKeeper
from jobsched.pipeline.lifecycle import Change, StateChange
from jobsched.pipeline.slo_ledger import JobTerms, SloTerms
from jobsched.schedule.company import NO_COMPANY
from jobsched.schedule.fires import preview_schedule
from jobsched.schedule.steps import ScheduleTooExpensive
from jobsched.watch.signals import emit

CACHE_SECONDS = 600.0
GAP_FIRES = 7  # the schedule's next fires whose gaps give a job's interval


class AnomalyRuns(Protocol):
    """The run store as the watch uses it: the runs a baseline learns, and an anomalous run says so on its record."""

    def history(
        self, job: str, *, limit: int = 50, newest_first: bool = True, between: tuple[str, str] | None = None
    ) -> list[Run]: ...
    def note_anomaly(self, job: str, run_id: str, text: str) -> None: ...


@dataclass
class HealthWatch:
    jobs: FreshnessJobs
    runs: AnomalyRuns
    publish: Callable[[EscalationEvent], None]
    clock: Callable[[], datetime]
    terms: JobTerms
    monotonic: Callable[[], float] = time.monotonic
    _cached: dict[str, tuple[float, Baseline]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, change: StateChange) -> None:
        run = change.run
        if change.change is not Change.FINISHED or change.task is not None or run is None:
            return
        sample = sample_of(run)
        if sample.duration is None and sample.lateness is None and run.status is not RunStatus.SUCCEEDED:
            return  # nothing to learn or judge (a MISSED, CANCELLED or SKIPPED run never started)
        terms = self.terms(run.job)
        if terms is None:
            return
        now = self.clock()
        known, just_read = self._baseline(run.job)
        anomaly = judge(known, sample, terms.zone)
        flags = self._flags(run, terms, known, anomaly, now)
        to_write = self._learned(run, known, terms, flags, fresh=known if just_read else None)
        if run.status is RunStatus.SUCCEEDED and terms.freshness is not None and run.finished_at is not None:
            assert terms.spec is not None  # terms with a freshness policy were read from a spec
            FreshnessKeeper(self.jobs, self.publish).succeeded(terms.spec, run.finished_at, now, baseline=to_write)
            to_write = None
        if to_write is not None:
            self.jobs.put_health(run.job, baseline=to_write)
        if to_write is not None or flags is not None:
            self._remember(run.job, to_write or (flags.on(known) if flags is not None else known))

    def _flags(
        self, run: Run, terms: SloTerms, known: Baseline, anomaly: Anomaly | None, now: datetime
    ) -> Marks | None:
        """What the judgement changes on the baseline item (None: nothing): the anomaly shown, the page open."""
        if anomaly is None:
            if not known.anomaly_open:
                return None
            self.publish(_event("run_usual", run, now, detail="a run within its baseline again"))
            return Marks(anomaly_open=False)
        self.runs.note_anomaly(run.job, run.run_id, anomaly.text)
        emit("RunAnomalies", 1, kind=anomaly.kind)
        pages = terms.anomalies == "page"
        if pages:
            self.publish(_event("run_anomalous", run, now, error=anomaly.text, detail=f"{anomaly.kind} run"))
        last = {"run_id": run.run_id, "kind": anomaly.kind, "text": anomaly.text, "at": instant_text(now)}
        return Marks(anomaly_open=known.anomaly_open or pages, last_anomaly=last)

    def _learned(
        self, run: Run, known: Baseline, terms: SloTerms, flags: Marks | None, *, fresh: Baseline | None = None
    ) -> Baseline | None:
        """The baseline to write (None: no write): from a fresh read when it learns or changes a flag (``fresh``:
        the baseline this very call read, not read again: a job whose runs are further apart than the cache, an
        hourly one, read it twice a run)."""
        if not learning_due(known, run.scheduled_at) and flags is None:
            return None
        if fresh is None:
            fresh = self.jobs.health(run.job, consistent=False).baseline or Baseline()
        fresh = flags.on(fresh) if flags is not None else fresh
        if not learning_due(fresh, run.scheduled_at):  # another process learned meanwhile
            return fresh if flags is not None else None
        samples = self._ended_since(fresh, run)
        gap = schedule_gap(terms.spec, run.scheduled_at)
        return learn_runs(fresh, samples, through=run.scheduled_at, zone=terms.zone, gap=gap)

    def _ended_since(self, baseline: Baseline, run: Run) -> list[Sample]:
        """The samples of ``run``'s job's runs ended since ``baseline`` learned (the newest ``LEARN_READ_LIMIT``,
        ``run`` itself as in hand: its record read may predate its end). A run still going is not waited for."""
        done = baseline.mark
        # From the earliest instant a job may name where nothing was learned (a key range's bound is never empty).
        first = scheduled_run_id(done) + LAST_OF_INSTANT if done is not None else scheduled_run_id(EARLIEST)
        last = scheduled_run_id(run.scheduled_at) + LAST_OF_INSTANT
        read = self.runs.history(run.job, limit=LEARN_READ_LIMIT, between=(first, last))
        ended = {other.run_id: other for other in read if other.status in TERMINAL} | {run.run_id: run}
        return [sample_of(other) for other in ended.values()]

    def _baseline(self, job: str) -> tuple[Baseline, bool]:
        """The job's baseline, and whether it was read from the table just now (not from the cache)."""
        now = self.monotonic()
        with self._lock:
            cached = self._cached.get(job)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1], False
        found = self.jobs.health(job, consistent=False).baseline or Baseline()
        self._remember(job, found)
        return found, True

    def _remember(self, job: str, baseline: Baseline) -> None:
        with self._lock:
            self._cached[job] = (self.monotonic(), baseline)


@dataclass(frozen=True)
class Marks:
    """What a judgement changes on the baseline item: whether an anomaly page is open, and the last anomaly."""

    anomaly_open: bool
    last_anomaly: dict[str, str] | None = None  # None: the one shown stays

    def on(self, baseline: Baseline) -> Baseline:
        return replace(
            baseline, anomaly_open=self.anomaly_open, last_anomaly=self.last_anomaly or baseline.last_anomaly
        )


def schedule_gap(spec: JobSpec | None, at: datetime) -> int | None:
    """The job's usual interval, in seconds, by its schedule: the median of its next gaps after ``at`` (a weekday
    job's is a day). None: it has no schedule (triggered only: the runs' own gaps tell), or one past its step budget
    (the dispatcher quarantines it; the runs' gaps tell here too)."""
    try:
        compiled = preview_schedule(spec, registered_at=at, company=NO_COMPANY) if spec is not None else None
        fires = [occurrence.at for occurrence in compiled.next_fires(at, GAP_FIRES)] if compiled is not None else []
    except ScheduleTooExpensive:
        return None
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(fires)]
    return round(statistics.median(gaps)) if gaps else None


def sample_of(run: Run) -> Sample:
    """An ended run's sample: a success's duration (its last attempt's), and the start lateness of one that started."""
    duration = None
    if run.status is RunStatus.SUCCEEDED and run.started_at is not None and run.finished_at is not None:
        duration = max((run.finished_at - run.started_at).total_seconds(), 0.0)
    lateness = run.lateness_ms / 1000 if run.lateness_ms is not None and run.started_at is not None else None
    return Sample(at=run.scheduled_at, duration=duration, lateness=lateness)


def _event(kind: str, run: Run, now: datetime, **details: str) -> EscalationEvent:
    return EscalationEvent.about_run(kind, run, now, **details)  # type: ignore[arg-type]
