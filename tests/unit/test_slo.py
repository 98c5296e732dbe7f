"""SLO tiers: the platform's objectives, a team's error budget per tier from a seeded ledger, and the lifecycle's
ledger subscriber counting each ended run once, by its job's tier."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any

import pytest

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.core.slo import BadSloConfig, SloDay, SloTiers, tier_budget
from jobsched.core.spec import JobSpec
from jobsched.pipeline.lifecycle import AnnouncedRuns, Lifecycle
from jobsched.pipeline.slo_ledger import SloLedger
from jobsched.watch import signals

TODAY = date(2027, 1, 28)


def test_the_platform_sets_each_tiers_objectives_and_a_bad_configuration_is_refused() -> None:
    tiers = SloTiers.parse('{"window_days": 7, "critical": {"success": 0.9995, "start_lateness": "30s"}}')
    assert tiers.window_days == 7
    assert tiers.objectives["critical"].success == 0.9995
    assert tiers.objectives["critical"].start_lateness == timedelta(seconds=30)
    assert tiers.objectives["important"] == SloTiers().objectives["important"]  # untouched
    assert SloTiers.parse(None) == SloTiers()
    assert (tiers.fast_burn, tiers.slow_burn) == (14.4, 6.0)  # SRE practice unless the platform says otherwise
    four = SloTiers.parse('{"fast_burn": 4, "slow_burn": 2}')  # the reference's "x4 faster"
    assert (four.fast_burn, four.slow_burn) == (4.0, 2.0) and SloTiers.parse(json.dumps(four.as_dict())) == four
    for bad in (
        '{"fast_burn": 1}',
        '{"slow_burn": 5000}',
        '{"critical": {"success": 1.0}}',
        '{"critical": {"uptime": 0.9}}',
        '{"window_days": 0}',
    ):
        with pytest.raises(BadSloConfig):
            SloTiers.parse(bad)


def test_a_tiers_budget_over_its_window_from_a_seeded_ledger() -> None:
    tiers = SloTiers()  # critical: 99.9% success over 28 days
    seeded = [SloDay(TODAY - timedelta(days=n), ended=400, bad=0) for n in range(2, 25)] + [
        SloDay(TODAY - timedelta(days=1), ended=400, bad=2, bad_by_job={"etl": 2}),
        SloDay(TODAY, ended=400, bad=4, late=3, bad_by_job={"etl": 1, "load": 3}),
        SloDay(TODAY - timedelta(days=40), ended=400, bad=400),  # outside the window: not counted
    ]
    budget = tier_budget("critical", tiers, seeded, today=TODAY)
    assert budget.runs == 25 * 400 and budget.bad == 6 and budget.late == 3
    # 10,000 runs may hold 10 bad ones; 6 spent 60% of the budget.
    assert budget.budget_left == pytest.approx(0.4)
    assert budget.burn_rate_1d == pytest.approx(10.0)  # 4 of 400 today: 1% bad, 10x the 0.1% allowed
    assert budget.burn_rate_7d == 2.14  # 6 of 2,800 in the last 7 days
    assert budget.top_jobs == [("etl", 3), ("load", 3)]  # most first, then by name
    assert len(budget.days) == 28 and budget.days[0].day == TODAY - timedelta(days=27) and budget.days[0].ended == 0
    steady = tier_budget("important", tiers, [SloDay(TODAY, ended=1000)], today=TODAY)
    assert steady.budget_left == 1.0 and steady.burn_rate_1d == 0.0
    empty = tier_budget("best-effort", tiers, [], today=TODAY)
    assert empty.runs == 0 and empty.budget_left == 1.0


@pytest.fixture
def emitted() -> Iterator[list[tuple[str, dict[str, str]]]]:
    seen: list[tuple[str, dict[str, str]]] = []

    def sink(name: str, value: float, dimensions: dict[str, str]) -> None:
        seen.append((name, dimensions))

    signals.add_sink(sink)
    yield seen
    signals.remove_sink(sink)


def job(name: str, **extra: Any) -> JobSpec:
    document = {"name": name, "team": "data", "target": {"type": "lambda", "function": "f"}} | extra
    return JobSpec.model_validate(document)


def test_each_ended_run_is_counted_once_in_its_teams_ledger_by_its_jobs_tier(
    emitted: list[tuple[str, dict[str, str]]],
) -> None:
    jobs, start = MemoryJobs(), parse_instant("2027-01-28T09:00:00Z")
    for spec in (job("etl", tier="critical", deadline="10m"), job("report")):
        jobs.create(spec, now=start, principal="test", next_visit_at=None, cursor=start)
    runs = AnnouncedRuns(MemoryRuns(), Lifecycle([SloLedger(jobs, SloTiers())]))

    def ended(name: str, minute: int, status: RunStatus, *, late: int = 0, took: int = 1) -> None:
        at = start + timedelta(minutes=minute)
        message = RunMessage.scheduled(job=f"data/{name}", team="data", at=at, fire_at=at, spec_version=1)
        began = at + timedelta(seconds=late)
        runs.create(message, status=RunStatus.RUNNING, now=began, retention=timedelta(days=1))
        ended_at: datetime = began + timedelta(minutes=took)
        runs.finish(message.job, message.run_id, attempt=1, status=status, now=ended_at)

    ended("etl", 0, RunStatus.SUCCEEDED)
    ended("etl", 1, RunStatus.FAILED, late=90)  # late for critical (1 min), and bad
    ended("etl", 2, RunStatus.SUCCEEDED, took=15)  # past its 10-minute deadline
    ended("etl", 3, RunStatus.CANCELLED)  # a decision: not counted
    ended("report", 4, RunStatus.TIMED_OUT, late=90)  # important: 90 s is not late (5 min)
    critical = jobs.slo_days("data", "critical", TODAY, TODAY)
    assert critical == [SloDay(TODAY, ended=3, bad=1, late=1, with_deadline=3, past_deadline=1, bad_by_job={"etl": 1})]
    assert jobs.slo_days("data", "important", TODAY, TODAY) == [SloDay(TODAY, ended=1, bad=1, bad_by_job={"report": 1})]
    tiers = [dims for name, dims in emitted if name == "TierRunsEnded"]
    assert tiers == [
        {"tier": "critical", "outcome": "good"},
        {"tier": "critical", "outcome": "bad"},
        {"tier": "critical", "outcome": "good"},
        {"tier": "important", "outcome": "bad"},
    ]
