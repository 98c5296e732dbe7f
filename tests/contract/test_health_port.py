"""A job's health item: its freshness written on its version (a racing writer loses, nothing is lost), the sparse
freshness index while a judgement is due, the baseline kept beside it, the team's freshness board, and an
anomaly noted on a run. Both adapters."""

from __future__ import annotations

from datetime import timedelta

from jobsched.core.baseline import Baseline
from jobsched.core.freshness import Freshness, FreshnessState
from jobsched.core.health import fresh_shard
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from tests.contract.conftest import Stores

NOW = parse_instant("2027-01-04T09:00:00Z")


def test_freshness_is_written_on_its_version_and_on_the_index_while_a_judgement_is_due(stores: Stores) -> None:
    jobs, job = stores.jobs, "data/etl"
    assert jobs.health(job).freshness is None and jobs.health(job).version == 0
    state = FreshnessState(since=NOW, check_at=NOW + timedelta(hours=1))
    assert jobs.put_health(job, freshness=state, version=0)
    assert not jobs.put_health(job, freshness=state, version=0)  # someone else wrote the first one
    shard = fresh_shard(job)
    assert list(jobs.freshness_due(shard, NOW)) == []
    assert list(jobs.freshness_due(shard, NOW + timedelta(hours=1))) == [job]
    read = jobs.health(job)
    assert read.freshness == state and read.version == 1
    stale = FreshnessState(since=NOW, state=Freshness.STALE, stale_since=NOW, check_at=None, reason="no run")
    assert not jobs.put_health(job, freshness=stale, version=0)  # a stale version loses
    assert jobs.put_health(job, freshness=stale, version=1)
    assert list(jobs.freshness_due(shard, NOW + timedelta(days=400))) == []  # nothing due: off the index
    baseline = Baseline(durations=(4200, 4300), lateness=(5, 7), sampled_at=NOW, hours={9: (4200,)}, hour_days={9: 1})
    assert jobs.put_health(job, baseline=baseline)  # beside it, unconditionally
    both = jobs.health(job, consistent=False)
    assert both.freshness == stale and both.version == 2 and both.baseline == baseline
    jobs.drop_freshness(job)
    assert jobs.health(job).freshness is None and jobs.health(job).baseline == baseline


def test_a_teams_freshness_board_holds_one_line_per_job(stores: Stores) -> None:
    jobs = stores.jobs
    assert jobs.team_freshness("data") == {}
    jobs.note_team_freshness("data", "etl", {"state": "stale", "policy": "09:00 UTC", "since": "2027-01-04T09:00:00Z"})
    jobs.note_team_freshness("data", "load", {"state": "fresh", "policy": "1h", "since": "2027-01-04T08:00:00Z"})
    jobs.note_team_freshness("web", "etl", {"state": "fresh", "policy": "1h", "since": "2027-01-04T08:00:00Z"})
    jobs.note_team_freshness("data", "load", None)
    assert jobs.team_freshness("data") == {
        "etl": {"state": "stale", "policy": "09:00 UTC", "since": "2027-01-04T09:00:00Z"}
    }


def test_an_anomaly_is_noted_on_an_ended_run(stores: Stores) -> None:
    message = RunMessage.scheduled(job="data/etl", team="data", at=NOW, fire_at=NOW, spec_version=1)
    stores.runs.create(message, status=RunStatus.RUNNING, now=NOW, retention=timedelta(days=1))
    stores.runs.finish(message.job, message.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=NOW)
    stores.runs.note_anomaly(message.job, message.run_id, "took 41 min, usual 6-9 min")
    stored = stores.runs.get(message.job, message.run_id)
    assert stored is not None and stored.anomaly == "took 41 min, usual 6-9 min"
    stores.runs.note_anomaly(message.job, "20270104T100000Z", "no such run")  # nothing created
    assert stores.runs.get(message.job, "20270104T100000Z") is None
