"""A team's SLO ledger: counts added per team, tier and day, each job's bad runs kept, read by day range."""

from __future__ import annotations

from datetime import date

from jobsched.core.slo import RunCount, SloDay
from tests.contract.conftest import Stores

DAY = date(2027, 1, 4)


def test_runs_add_up_per_team_tier_and_day_with_each_jobs_bad_runs(stores: Stores) -> None:
    ledger = stores.jobs
    ledger.count_run("data", "critical", DAY, RunCount())
    ledger.count_run("data", "critical", DAY, RunCount(bad=1, late=1), job="etl")
    ledger.count_run("data", "critical", DAY, RunCount(bad=1, with_deadline=1, past_deadline=1), job="etl")
    ledger.count_run("data", "critical", DAY, RunCount(bad=1), job="load")
    ledger.count_run("data", "important", DAY, RunCount(bad=1), job="other")  # another tier
    ledger.count_run("web", "critical", DAY, RunCount(bad=1), job="etl")  # another team
    ledger.count_run("data", "critical", date(2027, 1, 6), RunCount())
    days = ledger.slo_days("data", "critical", date(2027, 1, 1), date(2027, 1, 5))
    assert days == [
        SloDay(DAY, ended=4, bad=3, late=1, with_deadline=1, past_deadline=1, bad_by_job={"etl": 2, "load": 1})
    ]
    later = ledger.slo_days("data", "critical", DAY, date(2027, 1, 31))
    assert [entry.day for entry in later] == [DAY, date(2027, 1, 6)]
    assert ledger.slo_days("data", "best-effort", DAY, DAY) == []


def test_a_teams_drills_keep_the_last_outcome_of_each_destination(stores: Stores) -> None:
    jobs = stores.jobs
    assert jobs.drills("ops") == {}
    topic, hook = "arn:aws:sns:us-east-1:123456789012:ops", "https://hooks.example.com/ops"
    jobs.record_drills(
        "ops",
        {
            topic: {"outcome": "delivered", "at": "2027-01-04T09:00:00Z", "job": "ops/a", "destination": "topic"},
            hook: {"outcome": "failed", "at": "2027-01-04T09:00:00Z", "job": "ops/a", "destination": "webhook"},
        },
    )
    jobs.record_drills(
        "ops", {hook: {"outcome": "delivered", "at": "2027-01-04T10:00:00Z", "job": "ops/b", "destination": "webhook"}}
    )
    kept = jobs.drills("ops")
    assert kept[topic]["outcome"] == "delivered" and kept[hook] == {
        "outcome": "delivered",
        "at": "2027-01-04T10:00:00Z",
        "job": "ops/b",
        "destination": "webhook",
    }
    assert jobs.drills("data") == {}
