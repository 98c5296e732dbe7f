"""A team's SLO ledger: counts added per team, tier and day, each job's bad runs kept, read by day range."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

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


def test_the_days_teams_are_kept_in_shards_written_once_a_team_and_read_with_the_items_before_them(
    stores: Stores,
) -> None:
    """The executive view's rows: 200 teams noted on a day (each twice, as two worker processes would) are all read
    back, from items that each hold a shard of them (one write unit however many teams), each team written once: the
    second notice reads that it is there. A day's item of one a day (before the shards) is read with them."""
    jobs = stores.jobs
    writes = count_team_set_writes(stores)
    names = [f"team{n:03d}" for n in range(200)]
    for name in names + names:
        jobs.note_team_day(name, DAY)
    assert writes() == 200
    put_raw(stores, JobsKeys.SLO_TEAMS, date(2027, 1, 3).isoformat(), {"teams": {"legacy"}})
    put_raw(stores, JobsKeys.SLO_TEAMS, date(2027, 1, 5).isoformat(), {"teams": {"later"}})
    assert jobs.teams_between(date(2027, 1, 3), DAY) == {*names, "legacy"}
    assert jobs.teams_between(DAY, DAY) == set(names) and jobs.teams_between(date(2027, 1, 5), date(2027, 1, 6)) == {
        "later"
    }
    shards = {JobsKeys.slo_teams_day(DAY, name) for name in names}
    assert len(shards) == JobsKeys.SLO_TEAM_SHARDS
    assert max(sum(JobsKeys.slo_teams_day(DAY, name) == shard for name in names) for shard in shards) < 30


def count_team_set_writes(stores: Stores) -> Callable[[], int]:
    """How many writes the day's team items have taken from here on."""
    if isinstance(stores.jobs, MemoryJobs):
        table = stores.jobs.table
        before = table.capacity.writes
        return lambda: table.capacity.writes - before
    assert isinstance(stores.jobs, JobsStore)
    written = [0]

    def count(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["pk"]["S"] == JobsKeys.SLO_TEAMS:
            written[0] += 1

    stores.jobs.db.meta.events.register("provide-client-params.dynamodb.UpdateItem", count)
    return lambda: written[0]
