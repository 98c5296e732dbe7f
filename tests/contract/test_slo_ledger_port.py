"""A team's SLO ledger: counts added per team, tier and day, each job's bad runs kept, read by day range."""

from __future__ import annotations

from datetime import date

from jobsched.adapters.aws.dynamo import to_item
from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.memory.jobs import MemoryJobs
from jobsched.core.names import JobsKeys
from jobsched.core.slo import RunCount, SloDay
from tests.contract.conftest import Stores

DAY = date(2027, 1, 4)


def test_runs_add_up_per_team_tier_and_day_with_each_jobs_bad_runs(stores: Stores) -> None:
    ledger = stores.jobs
    ledger.count_run("data", "critical", DAY, RunCount(), job="data/load")
    ledger.count_run("data", "critical", DAY, RunCount(bad=1, late=1), job="data/etl")
    ledger.count_run("data", "critical", DAY, RunCount(bad=1, with_deadline=1, past_deadline=1), job="data/etl")
    ledger.count_run("data", "critical", DAY, RunCount(bad=1), job="data/load")
    ledger.count_run("data", "important", DAY, RunCount(bad=1), job="data/other")  # another tier
    ledger.count_run("web", "critical", DAY, RunCount(bad=1), job="web/etl")  # another team
    ledger.count_run("data", "critical", date(2027, 1, 6), RunCount(), job="data/load")
    days = ledger.slo_days("data", "critical", date(2027, 1, 1), date(2027, 1, 5))
    assert days == [
        SloDay(DAY, ended=4, bad=3, late=1, with_deadline=1, past_deadline=1, bad_by_job={"etl": 2, "load": 1})
    ]
    later = ledger.slo_days("data", "critical", DAY, date(2027, 1, 31))
    assert [entry.day for entry in later] == [DAY, date(2027, 1, 6)]
    assert ledger.slo_days("data", "best-effort", DAY, DAY) == []


def test_a_runs_end_is_one_write_of_its_usage_and_its_slo_count(stores: Stores) -> None:
    """#51: the ledger's count and the ending attempt's usage go to the job's item of the day together; usage
    alone (an attempt whose run has not ended) is no SLO event, and the chargeback sees the counts' item as usage."""
    jobs = stores.jobs
    jobs.add_usage("data", "data/etl", DAY, {"attempts": 1.0, "runs": 1.0}, tier="critical", target_type="http")
    assert jobs.slo_days("data", "critical", DAY, DAY) == []
    jobs.add_usage("data", "data/etl", DAY, {"attempts": 1.0}, tier="critical", target_type="http", count=RunCount())
    jobs.count_run("data", "critical", DAY, RunCount(ended=0, judged=1, stale=1), job="data/etl")  # freshness
    assert jobs.slo_days("data", "critical", DAY, DAY) == [
        SloDay(DAY, ended=1, judged=1, stale=1, bad_by_job={"etl": 1})
    ]
    (usage,) = jobs.usage_between("data", DAY, DAY)
    assert (usage.job, usage.tier, usage.target_type) == ("data/etl", "critical", "http")
    assert usage.counters == {"attempts": 2.0, "runs": 1.0}


def test_ledger_items_of_the_layout_before_51_are_still_read(stores: Stores) -> None:
    """An upgrade loses no count: a day's legacy item (one a tier a day) adds to the jobs' items of that day."""
    legacy: dict[str, object] = {"ended": 3, "bad": 1, JobsKeys.SLO_JOB_PREFIX + "etl": 1}
    put_raw(stores, JobsKeys.TEAM_PREFIX + "data", JobsKeys.slo_day("critical", DAY), legacy)
    stores.jobs.count_run("data", "critical", DAY, RunCount(bad=1), job="data/etl")
    assert stores.jobs.slo_days("data", "critical", DAY, DAY) == [SloDay(DAY, ended=4, bad=2, bad_by_job={"etl": 2})]


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


def put_raw(stores: Stores, pk: str, sk: str, values: dict[str, object]) -> None:
    """An item as an older version of the adapters wrote it."""
    item = {JobsKeys.PK: pk, JobsKeys.SK: sk, **values}
    if isinstance(stores.jobs, MemoryJobs):
        stores.jobs.table.put(item)
    else:
        assert isinstance(stores.jobs, JobsStore)
        stores.jobs.db.put_item(TableName=stores.jobs.table, Item=to_item(item))
