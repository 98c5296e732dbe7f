"""Alerts that learn: a job's baseline from its own runs (robust statistics, hour-of-day seasons), an anomaly found
in a seeded history and none in a steady one, shown on the run and the job, paged only where the job asks, and
bounded: one item per job under 1 KB, written at most once per ten minutes of a frequent job."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.core.baseline import (
    POOL_SPACING,
    Baseline,
    Sample,
    judge,
    learn,
    learn_runs,
    learning_due,
    settled_baseline,
)
from jobsched.core.run_records import Run
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.paging.rules import Policy, decide_open, page_severity
from jobsched.pipeline import baselines
from jobsched.pipeline.baselines import HealthWatch, schedule_gap
from jobsched.pipeline.lifecycle import AnnouncedRuns, Lifecycle
from jobsched.pipeline.slo_ledger import JobTerms
from jobsched.schedule.steps import ScheduleTooExpensive
from scripts import bench_anomaly  # the figures the script prints are the ones tested here

START = parse_instant("2027-01-04T00:00:00Z")


def test_no_anomaly_in_a_steady_history_and_the_injected_ones_found_in_a_seeded_one() -> None:
    for name in ("steady-hourly", "steady-minutely"):
        steady = bench_anomaly.run_profile(next(p for p in bench_anomaly.PROFILES if p.name == name), seed=1)
        assert steady.flagged == 0, name
    seeded = bench_anomaly.run_profile(next(p for p in bench_anomaly.PROFILES if p.name == "hourly"), seed=1)
    assert seeded.injected >= 5
    assert seeded.precision == 1.0 and seeded.recall >= 0.9
    assert seeded.max_item_bytes <= 1024  # one write unit
    assert seeded.writes / seeded.runs <= 1.0


def test_a_nightly_batch_that_is_always_slow_at_night_is_not_an_anomaly_then() -> None:
    baseline = Baseline()
    for day in range(7):
        for hour in range(24):
            at = START + timedelta(days=day, hours=hour)
            took = 1800.0 if hour == 2 else 300.0
            baseline = learn(baseline, Sample(at, took + (day % 3) * 10, 1.0)) or baseline
    night = START + timedelta(days=7, hours=2)
    assert judge(baseline, Sample(night, 1850.0, 1.0)) is None  # usual at 02:00
    found = judge(baseline, Sample(night + timedelta(hours=10), 1850.0, 1.0))  # at noon it is 6x the usual
    assert found is not None and found.kind == "slow" and found.text.startswith("took 31 min, usual 5")
    assert judge(baseline, Sample(night, 300.0, 1.0)).kind == "fast"  # type: ignore[union-attr]  # 5 of 30 min
    late = judge(baseline, Sample(night + timedelta(hours=10), 300.0, 720.0))
    assert late is not None and late.kind == "late" and late.text.startswith("started 12 min late")


def test_learning_is_bounded_one_pool_sample_per_ten_minutes_and_one_a_day_per_hour() -> None:
    baseline = Baseline()
    writes = 0
    for minute in range(24 * 60):
        learned = learn(baseline, Sample(START + timedelta(minutes=minute), 20.0, 0.5))
        if learned is not None:
            writes += 1
            baseline = learned
    assert writes == 24 * 6  # every tenth minute (each hour's first sample falls on one of them)
    assert len(baseline.durations) == 16 and all(len(samples) == 1 for samples in baseline.hours.values())


class Pages(list[EscalationEvent]):
    def __call__(self, event: EscalationEvent) -> None:
        self.append(event)


class Now:
    def __init__(self) -> None:
        self.at = START

    def __call__(self) -> datetime:
        return self.at


def test_an_anomaly_is_shown_on_the_run_and_the_job_and_paged_at_warning_only_where_the_job_asks() -> None:
    now, jobs, store, pages = Now(), MemoryJobs(), MemoryRuns(), Pages()
    for name, extra in (("quiet", {}), ("loud", {"anomalies": "page"})):
        document: dict[str, Any] = {"name": name, "team": "data", "target": {"type": "lambda", "function": "f"}}
        spec = JobSpec.model_validate(document | extra)
        jobs.create(spec, now=START, principal="t", next_visit_at=None, cursor=START)
    watch = HealthWatch(jobs, store, pages, now, JobTerms(jobs), monotonic=lambda: now.at.timestamp())
    runs = AnnouncedRuns(store, Lifecycle([watch]))

    def ran(job: str, index: int, took: float) -> str:
        at = START + timedelta(hours=index)
        message = RunMessage.scheduled(job=f"data/{job}", team="data", at=at, fire_at=at, spec_version=1)
        now.at = at + timedelta(seconds=2)
        runs.create(message, status=RunStatus.RUNNING, now=now.at, retention=timedelta(days=1))
        now.at += timedelta(seconds=took)
        runs.finish(message.job, message.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=now.at)
        return message.run_id

    for index in range(20):
        for job in ("quiet", "loud"):
            ran(job, index, 400 + (index % 5) * 20)
    assert pages == []
    quiet_run, loud_run = ran("quiet", 20, 2460), ran("loud", 20, 2460)  # 41 minutes
    for job, run_id in (("quiet", quiet_run), ("loud", loud_run)):
        stored = store.get(f"data/{job}", run_id)
        assert stored is not None and stored.anomaly is not None
        assert stored.anomaly.startswith("took 41 min, usual 7-8 min"), stored.anomaly
        shown = jobs.health(f"data/{job}").baseline
        assert shown is not None and shown.last_anomaly is not None and shown.last_anomaly["run_id"] == run_id
    assert [(page.kind, page.job) for page in pages] == [("run_anomalous", "data/loud")]
    opened = decide_open(None, pages[0], Policy.for_job(None, "arn:aws:sns:eu-west-1:123456789012:t"), now.at)
    assert opened.incident is not None and opened.pages
    assert page_severity({"class": opened.incident.incident_class}) == "warning"
    assert opened.pages[0].title.startswith("[jobsched, warning] data/loud")
    # The next usual run resolves it (and the quiet job, never paged, sends nothing).
    ran("quiet", 21, 410)
    ran("loud", 21, 410)
    assert [page.kind for page in pages] == ["run_anomalous", "run_usual"]
    assert pages[1].resolves() == ("anomaly",)
    ordinary = store.get("data/loud", RunMessage.scheduled(
        job="data/loud", team="data", at=START + timedelta(hours=21), fire_at=START, spec_version=1
    ).run_id)  # fmt: skip
    assert ordinary is not None and ordinary.anomaly is None


def _hourly_samples(count: int) -> list[Sample]:
    return [
        Sample(START + timedelta(hours=index), 300.0 + (index * 37) % 90, float(index % 7)) for index in range(count)
    ]


def test_learning_in_batches_takes_the_samples_learning_each_run_takes() -> None:
    samples = _hourly_samples(24 * 5)
    one_at_a_time = Baseline()
    for sample in samples:
        one_at_a_time = learn(one_at_a_time, sample) or one_at_a_time
    batched, start = Baseline(), 0
    for size in (1, 3, 4, 7, 4, 4, 30, 1, 66):  # 120 runs in uneven batches, each batch handed over shuffled
        batch = samples[start : start + size]
        start += size
        # Runs learned already (a stale read, a second process) are handed again and left out.
        again = samples[max(0, start - size - 3) : start]
        batched = learn_runs(batched, list(reversed(again)), through=batch[-1].at)
    assert start == len(samples)
    batched = learn_runs(batched, samples, through=samples[-1].at)  # the whole history again: nothing new
    assert (batched.durations, batched.lateness, batched.sampled_at) == (
        one_at_a_time.durations,
        one_at_a_time.lateness,
        one_at_a_time.sampled_at,
    )
    assert batched.hours == one_at_a_time.hours and batched.hour_days == one_at_a_time.hour_days
    assert batched.learned_through == samples[-1].at and batched.gap_seconds == 3600


def test_learning_is_due_once_in_four_runs_of_an_hourly_or_daily_job_and_once_an_hour_of_a_minutely_one() -> None:
    for every, due_after in ((timedelta(hours=1), 4), (timedelta(days=1), 4), (timedelta(minutes=1), 60)):
        count = 16 * max(1, round(POOL_SPACING / every))  # enough for a full pool (one sample in ten minutes)
        learned = learn_runs(Baseline(), [Sample(START + i * every, 60.0, 1.0) for i in range(count)], through=START)
        assert learned.gap_seconds == every.total_seconds() and len(learned.durations) == 16
        through = START + (count - 1) * every
        learned = learn_runs(learned, [], through=through)
        due = [index for index in range(1, 2 * due_after + 1) if learning_due(learned, through + index * every)]
        assert due[0] == due_after, every
    # While neither pool can judge, at each pool sample it would take (a minutely job: every tenth run).
    young = learn_runs(Baseline(), [Sample(START, 20.0, 1.0)], through=START)
    assert [m for m in range(1, 21) if learning_due(young, START + timedelta(minutes=m))] == list(range(10, 21))
    assert learning_due(Baseline(), START)


class StaleRuns(MemoryRuns):
    """Reads run records as an eventually consistent query may: the newest run's end not seen yet."""

    def history(
        self, job: str, *, limit: int = 50, newest_first: bool = True, between: tuple[str, str] | None = None
    ) -> list[Run]:
        read = super().history(job, limit=limit, newest_first=newest_first, between=between)
        newest = max((run.run_id for run in read), default=None)
        return [replace(run, status=RunStatus.RUNNING) if run.run_id == newest else run for run in read]


def test_the_watch_learns_an_hourly_job_once_in_four_runs_and_loses_no_sample() -> None:
    now, jobs, store, pages = Now(), MemoryJobs(), StaleRuns(), Pages()
    spec = JobSpec.model_validate({"name": "etl", "team": "data", "target": {"type": "lambda", "function": "f"}})
    jobs.create(spec, now=START, principal="t", next_visit_at=None, cursor=START)
    terms = JobTerms(jobs, monotonic=lambda: now.at.timestamp())
    # Two worker processes, each with its own cache, ending the job's runs in turn.
    watches = [HealthWatch(jobs, store, pages, now, terms, monotonic=lambda: now.at.timestamp()) for _ in range(2)]
    lifecycles = [AnnouncedRuns(store, Lifecycle([watch])) for watch in watches]
    samples, writes = [], 0
    for index, sample in enumerate(_hourly_samples(24 * 4)):
        message = RunMessage.scheduled(job=spec.key, team="data", at=sample.at, fire_at=sample.at, spec_version=1)
        now.at = sample.at + timedelta(seconds=sample.lateness or 0)
        runs = lifecycles[index % 2]
        runs.create(message, status=RunStatus.RUNNING, now=now.at, retention=timedelta(days=1))
        now.at += timedelta(seconds=sample.duration or 0)
        before = jobs.table.capacity.writes
        runs.finish(spec.key, message.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=now.at)
        writes += jobs.table.capacity.writes - before
        samples.append(sample)
    stored = jobs.health(spec.key).baseline
    assert stored is not None and stored.learned_through is not None
    # What it holds is what learning each run up to its mark would hold: no sample lost, none twice.
    one_at_a_time = Baseline()
    for sample in samples:
        if sample.at <= stored.learned_through:
            one_at_a_time = learn(one_at_a_time, replace(sample, lateness=round(sample.lateness or 0))) or one_at_a_time
    assert (stored.durations, stored.hours, stored.hour_days) == (
        one_at_a_time.durations,
        one_at_a_time.hours,
        one_at_a_time.hour_days,
    )
    assert stored.learned_through >= samples[-4].at
    assert writes <= 8 + len(samples) / 4  # the first eight runs each, then once in four
    assert pages == []


def test_a_settled_job_learns_at_one_run_in_four_or_sixty_as_jobs_registered_apart_do() -> None:
    """What the benchmarks seed: weeks of runs, each job learning at its own runs."""
    for every, share in ((timedelta(minutes=1), 1 / 60), (timedelta(hours=1), 1 / 4), (timedelta(days=1), 1 / 4)):
        settled = [settled_baseline(every, START, phase) for phase in range(240)]
        assert sum(learning_due(baseline, START) for baseline in settled) == 240 * share, every
        assert all(
            len(baseline.durations) == 16 and baseline.gap_seconds == every.total_seconds() for baseline in settled
        )
        assert all(not learning_due(baseline, START - every) for baseline in settled)


def test_a_jobs_interval_is_its_schedules_the_runs_gaps_where_it_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def spec(schedule: dict[str, Any] | None) -> JobSpec:
        document = {"name": "j", "team": "data", "target": {"type": "lambda", "function": "f"}}
        return JobSpec.model_validate(document | ({"schedule": schedule} if schedule else {}))

    assert schedule_gap(spec({"expression": "0 9 * * 1-5"}), START) == 86400  # weekdays: a day, the weekend apart
    assert schedule_gap(spec({"expression": "*/5 * * * *"}), START) == 300
    assert schedule_gap(spec(None), START) is None and schedule_gap(None, START) is None

    def past_budget(*_: Any, **__: Any) -> None:
        raise ScheduleTooExpensive(10, START)

    monkeypatch.setattr(baselines, "preview_schedule", past_budget)  # a run's end never fails on its schedule
    assert schedule_gap(spec({"expression": "*/5 * * * *"}), START) is None


def test_a_baseline_learned_run_by_run_before_batches_learns_nothing_twice() -> None:
    """An upgrade: the item has no mark yet; its first batch reads the newest runs, some of days it learned."""
    samples = _hourly_samples(24 * 3)
    before = Baseline()
    for sample in samples[:-5]:
        before = learn(before, sample) or before
    assert before.learned_through is None and learning_due(before, samples[-5].at)
    upgraded = learn_runs(before, samples[-64:], through=samples[-1].at)  # the newest 64, 59 of them known
    one_at_a_time = before
    for sample in samples[-5:]:
        one_at_a_time = learn(one_at_a_time, sample) or one_at_a_time
    assert upgraded.hours == one_at_a_time.hours and upgraded.durations == one_at_a_time.durations
