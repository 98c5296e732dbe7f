"""Alerts that learn: a job's baseline of duration and start lateness from its own runs, and the runs far outside
it ("took 41 min, usual 6-9 min"). Pure.

Robust statistics: the median and the median absolute deviation (MAD) of recent samples, so one slow run in the
history does not move the baseline, and a run is anomalous only when it is far from the median in MADs *and* in
plain terms (a ratio and an absolute floor: 3 s against a usual 1 s is not worth anyone's attention).

Bounded: one item per job holds it (under 1 KB: ``MAX_ITEM_BYTES`` in the tests). ``POOL`` recent samples of
any hour (at most one per ``POOL_SPACING``), and per hour of the day (in the schedule's time zone) one duration a
day over the last ``PER_HOUR`` days: where a job runs hourly or more, a run is judged against its own hour's
history once that has ``MIN_HOUR_SAMPLES`` (the 02:00 batch that is always slow is not an anomaly at 02:00).
Durations are learned from successful runs only (a failure may end at once); lateness from every run that started.

Learned in batches: every run is judged as it ends, but the baseline takes the runs ended since it last learned
(its ``mark``, read from the run records: ``learn_runs``) only once ``LEARN_RUNS`` runs' worth of the job's
interval and at least ``LEARN_SPACING`` have passed (``learning_due``), or at each pool sample while it is too
short to judge. A sample is a statistic, not an event: taken a few runs late it is the same sample, and an hourly
or daily job writes its baseline once in four runs instead of at each (a minutely job once an hour).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.tz import get_zone

POOL = 16
PER_HOUR = 6
MIN_SAMPLES = 8
MIN_HOUR_SAMPLES = 5
POOL_SPACING = timedelta(minutes=10)
MADS = 6.0  # how far from the median, in robust standard deviations (1.4826 MAD), a sample must be
LOG_FLOOR = 0.1  # the least spread of log durations (about +-10%): a job that always takes 60.0 s may take 75
SLOWER = 1.5  # ... and how many times the median at least (durations)
FLOOR_SECONDS = 60.0  # ... and by how many seconds at least (durations and lateness)
FASTER = 0.25  # a run this fraction of the usual duration or less is anomalous (a silent no-op) ...
FAST_MIN_USUAL_SECONDS = 120.0  # ... when the usual duration is at least this
MAX_TENTHS = 31 * 86400 * 10  # samples are kept in tenths of a second, bounded
LEARN_RUNS = 4  # the baseline learns once this many of the job's intervals have passed ...
LEARN_SPACING = timedelta(hours=1)  # ... and at least this long (a minutely job: sixty runs at once)
LEARN_READ_LIMIT = 64  # run records read at most to learn (the newest: a minutely job's hour yields 6 pool samples)


@dataclass(frozen=True)
class Sample:
    """What one ended run says: its duration (a success's) and its start lateness, in seconds."""

    at: datetime  # when the run was due (its scheduled instant): its hour of day
    duration: float | None
    lateness: float | None


@dataclass(frozen=True)
class Anomaly:
    kind: str  # "slow", "fast" or "late"
    text: str  # as users read it: "took 41 min, usual 6-9 min"


@dataclass(frozen=True)
class Baseline:
    durations: tuple[int, ...] = ()  # tenths of a second, oldest first
    lateness: tuple[int, ...] = ()
    sampled_at: datetime | None = None  # the last pool sample (spacing)
    hours: dict[int, tuple[int, ...]] = field(default_factory=dict)  # hour of day -> durations, one a day
    hour_days: dict[int, int] = field(default_factory=dict)  # hour of day -> ordinal day of its last sample
    anomaly_open: bool = False  # paged for an anomaly: the next usual run resolves it
    last_anomaly: dict[str, str] | None = None  # {run_id, kind, text, at}
    learned_through: datetime | None = None  # the instant of the newest run learned (``learn_runs``)
    gap_seconds: int | None = None  # the job's usual interval between runs, as last learned

    @property
    def mark(self) -> datetime | None:
        """The instant through which runs were learned: a baseline written before batches (no ``learned_through``)
        took every run up to its last pool sample, and those after it learn again as nothing new (the same pool
        spacing, the same hour and day)."""
        return self.learned_through or self.sampled_at

    def as_values(self) -> dict[str, Any]:
        values: dict[str, Any] = {"d": list(self.durations), "l": list(self.lateness)}
        if self.sampled_at is not None:
            values["at"] = self.sampled_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.learned_through is not None:
            values["t"] = self.learned_through.strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.gap_seconds is not None:
            values["g"] = self.gap_seconds
        if self.hours:
            values["h"] = {str(hour): list(samples) for hour, samples in self.hours.items()}
            values["hd"] = {str(hour): day for hour, day in self.hour_days.items()}
        if self.anomaly_open:
            values["open"] = True
        if self.last_anomaly:
            values["last"] = dict(self.last_anomaly)
        return values

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Baseline:
        at, through = values.get("at"), values.get("t")
        return cls(
            durations=tuple(int(v) for v in values.get("d", ())),
            lateness=tuple(int(v) for v in values.get("l", ())),
            sampled_at=datetime.fromisoformat(at.replace("Z", "+00:00")) if at else None,
            hours={int(hour): tuple(int(v) for v in samples) for hour, samples in values.get("h", {}).items()},
            hour_days={int(hour): int(day) for hour, day in values.get("hd", {}).items()},
            anomaly_open=bool(values.get("open", False)),
            last_anomaly={str(k): str(v) for k, v in values["last"].items()} if values.get("last") else None,
            learned_through=datetime.fromisoformat(through.replace("Z", "+00:00")) if through else None,
            gap_seconds=int(values["g"]) if values.get("g") is not None else None,
        )

    def usual(self, zone: str = "UTC", at: datetime | None = None) -> dict[str, Any]:
        """The baseline as users read it: usual duration and lateness ranges (10th to 90th percentile)."""
        hour = self.hours.get(_hour(at, zone), ()) if at is not None else ()
        reference = hour if len(hour) >= MIN_HOUR_SAMPLES else self.durations
        return {
            "samples": len(self.durations),
            "duration": _range_text(reference) if len(reference) >= MIN_HOUR_SAMPLES else None,
            "lateness": _range_text(self.lateness) if len(self.lateness) >= MIN_SAMPLES else None,
            "learning": len(self.durations) < MIN_SAMPLES,
        }


def judge(baseline: Baseline, sample: Sample, zone: str = "UTC") -> Anomaly | None:
    """The first way ``sample`` is far outside ``baseline`` (None: usual, or too little history to say)."""
    if sample.duration is not None and len(baseline.durations) >= MIN_SAMPLES:
        found = _duration_anomaly(baseline, baseline.hours.get(_hour(sample.at, zone), ()), sample.duration)
        if found is not None:
            return found
    if sample.lateness is not None and len(baseline.lateness) >= MIN_SAMPLES:
        seconds = [tenths / 10 for tenths in baseline.lateness]
        median, spread = statistics.median(seconds), _robust_sd(seconds, floor=5.0)
        if sample.lateness - median >= FLOOR_SECONDS and sample.lateness > median + MADS * spread:
            return Anomaly("late", f"started {_span(sample.lateness)} late, usual {_range_text(baseline.lateness)}")
    return None


def learn(baseline: Baseline, sample: Sample, zone: str = "UTC") -> Baseline | None:
    """``baseline`` with ``sample`` in it, or None when it takes nothing (spacing, one a day an hour): no write."""
    changed = baseline
    pool_due = baseline.sampled_at is None or sample.at - baseline.sampled_at >= POOL_SPACING
    if pool_due:
        durations = baseline.durations
        if sample.duration is not None:
            durations = (*durations, _tenths(sample.duration))[-POOL:]
        lateness = baseline.lateness
        if sample.lateness is not None:
            lateness = (*lateness, _tenths(max(sample.lateness, 0.0)))[-POOL:]
        changed = replace(changed, durations=durations, lateness=lateness, sampled_at=sample.at)
    if sample.duration is not None:
        hour, day = _hour(sample.at, zone), sample.at.astimezone(get_zone(zone)).date().toordinal()
        if baseline.hour_days.get(hour) != day:
            samples = (*baseline.hours.get(hour, ()), _tenths(sample.duration))[-PER_HOUR:]
            changed = replace(
                changed, hours={**changed.hours, hour: samples}, hour_days={**changed.hour_days, hour: day}
            )
    return changed if changed != baseline else None


def learning_due(baseline: Baseline, at: datetime) -> bool:
    """Whether the run due at ``at`` has the baseline learn the runs ended since it last did: while neither pool can
    judge yet, at each pool sample it would take; then once ``LEARN_RUNS`` intervals (at least ``LEARN_SPACING``)
    have passed."""
    if baseline.learned_through is None:
        return True
    if max(len(baseline.durations), len(baseline.lateness)) < MIN_SAMPLES:
        return baseline.sampled_at is None or at - baseline.sampled_at >= POOL_SPACING
    spacing = max(LEARN_SPACING, LEARN_RUNS * timedelta(seconds=baseline.gap_seconds or 0))
    return at - baseline.learned_through >= spacing


def learn_runs(
    baseline: Baseline, samples: list[Sample], *, through: datetime, zone: str = "UTC", gap: int | None = None
) -> Baseline:
    """``baseline`` having learned ``samples`` (the runs ended since it last learned, any order) in the order they
    were due, as ``learn`` one at a time, and marked learned through ``through``, with the job's interval: ``gap``
    seconds (its schedule's), else the median gap between the instants learned. A sample at or before the mark
    was learned already and is left out."""
    done = baseline.mark
    fresh = sorted((sample for sample in samples if done is None or sample.at > done), key=lambda sample: sample.at)
    learned = baseline
    for sample in fresh:
        if sample.duration is not None or sample.lateness is not None:
            learned = learn(learned, sample, zone) or learned
    if gap is None:  # no schedule says it: the median gap between the instants learned
        instants = sorted({sample.at for sample in fresh} | ({done} if done is not None else set()))
        gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(instants)]
        gap = round(statistics.median(gaps)) if gaps else baseline.gap_seconds
    return replace(learned, learned_through=max(through, done) if done is not None else through, gap_seconds=gap)


def settled_baseline(
    every: timedelta, at: datetime, phase: int, *, seconds: float = 60.0, late: float = 1.0
) -> Baseline:
    """A job's baseline as weeks of runs every ``every`` leave it at ``at`` (for models and benchmarks), its runs
    taking about ``seconds`` and starting about ``late`` seconds late: its pools and hours full, its last learning
    ``phase`` runs ago, counted modulo its learning spacing (jobs registered at different times learn at different
    runs: the one in ``phase`` 0 learns at ``at``'s run)."""
    spacing = max(LEARN_SPACING, LEARN_RUNS * every)
    runs_apart = max(1, math.ceil(spacing / every))
    through = at - (runs_apart - phase % runs_apart) * every
    step = max(every, POOL_SPACING)  # the samples learning keeps: the pool's spacing, one an hour a day
    count = math.ceil(max(timedelta(days=PER_HOUR + 1), (POOL + 4) * every) / step)
    samples = [
        Sample(through - index * step, seconds * (1 + index % 5 / 10), late + index % 3) for index in range(count)
    ]
    return learn_runs(Baseline(), samples, through=through, gap=round(every.total_seconds()))


def _duration_anomaly(baseline: Baseline, hour: tuple[int, ...], duration: float) -> Anomaly | None:
    """Durations vary by a factor, so they are judged in log space: the distance from the usual (the hour's median
    once it has ``MIN_HOUR_SAMPLES``, else the pool's) in robust standard deviations of the log, at least
    ``LOG_FLOOR``. A pool verdict is checked against an hour with fewer samples (a nightly batch is not slow at
    night however few nights were seen)."""
    seasonal = len(hour) >= MIN_HOUR_SAMPLES
    reference = hour if seasonal else baseline.durations
    logs = [math.log(max(tenths, 1) / 10) for tenths in reference]
    pool_logs = [math.log(max(tenths, 1) / 10) for tenths in baseline.durations]
    center = statistics.median(logs)
    spread = max(_robust_sd(logs, floor=LOG_FLOOR), _robust_sd(pool_logs, floor=LOG_FLOOR))
    usual, median = _range_text(reference), math.exp(center)
    distance = (math.log(max(duration, 0.1)) - center) / spread
    seen = [tenths / 10 for tenths in hour]
    slow = distance > MADS and duration >= SLOWER * median and duration - median >= FLOOR_SECONDS
    if slow and (seasonal or not seen or duration >= SLOWER * max(seen)):
        return Anomaly("slow", f"took {_span(duration)}, usual {usual}")
    fast = distance < -MADS and median >= FAST_MIN_USUAL_SECONDS and duration <= FASTER * median
    if fast and (seasonal or not seen or duration <= FASTER * min(seen)):
        return Anomaly("fast", f"took {_span(duration)}, usual {usual}")
    return None


def _robust_sd(values: list[float], *, floor: float) -> float:
    median = statistics.median(values)
    mad = statistics.median(abs(value - median) for value in values)
    return max(1.4826 * mad, floor)


def _range_text(tenths: tuple[int, ...]) -> str:
    ordered = sorted(tenths)
    low = ordered[int(0.1 * (len(ordered) - 1))] / 10
    high = ordered[round(0.9 * (len(ordered) - 1))] / 10
    first, last = _span(low), _span(high)
    if first == last:
        return first
    for unit in (" s", " min"):
        if first.endswith(unit) and last.endswith(unit) and " h " not in first + last:
            return f"{first.removesuffix(unit)}-{last}"
    return f"{first}-{last}"


def _span(seconds: float) -> str:
    """Seconds as people say them: 12 s, 6 min, 1 h 05 min."""
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes = seconds / 60
    if minutes < 90:
        return f"{minutes:.0f} min"
    return f"{int(minutes // 60)} h {int(minutes % 60):02d} min"


def _hour(at: datetime, zone: str) -> int:
    return at.astimezone(get_zone(zone)).hour


def _tenths(seconds: float) -> int:
    return min(max(round(seconds * 10), 0), MAX_TENTHS)
