"""The scale model and the sizing built on it: properties a reader of its figures relies on."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobsched.cli import app as cli_module
from jobsched.cli import cli
from jobsched.core.spec import JobSpec
from jobsched.planning.capacity import load_profile, size_for
from jobsched.planning.scale_model import AwsLimits, Calibration, Deployment, simulate
from tests.helpers import utc

SIZED = Deployment(
    dispatchers=8,
    due_shards=16,
    dispatcher_memory_mb=1769,
    worker_memory_mb=1769,
    worker_max_concurrency=1000,
    warm_wcu=40000,
    account_concurrency=3000,
)
CALIBRATION = Calibration()


def p99(runs: int, deployment: Deployment, **options: object) -> float:
    return simulate([0.0] * runs, deployment, CALIBRATION, **options).percentile(0.99)  # type: ignore[arg-type]


def test_a_bigger_burst_is_never_earlier_and_more_workers_never_later() -> None:
    assert p99(1_000, SIZED) <= p99(10_000, SIZED) <= p99(50_000, SIZED)
    narrow = replace(SIZED, worker_max_concurrency=50)
    assert p99(20_000, SIZED) < p99(20_000, narrow)
    assert p99(20_000, replace(SIZED, queues_per_class=4)) < p99(20_000, SIZED)


def test_the_result_names_the_limit_that_held_runs_back() -> None:
    assert (
        "maximum concurrency (50)"
        in simulate([0.0] * 20_000, replace(SIZED, worker_max_concurrency=50), CALIBRATION).binding
    )
    assert "scaling" in simulate([0.0] * 20_000, SIZED, CALIBRATION).binding
    starved = simulate([0.0] * 20_000, SIZED, CALIBRATION, AwsLimits(ddb_table_quota_wcu=400))
    assert starved.binding == "DynamoDB write throughput (jobs)", "the busiest store: the jobs table"
    one_dispatcher = simulate([0.0] * 200_000, replace(SIZED, dispatchers=1, dispatcher_memory_mb=512), CALIBRATION)
    assert one_dispatcher.late_sends > 0 and one_dispatcher.dispatcher_seconds_per_tick == pytest.approx(40, abs=1)


def test_runs_dispatched_ahead_never_start_before_their_instant() -> None:
    result = simulate([600.0] * 5_000, SIZED, CALIBRATION)
    assert result.late_sends == 0 and min(result.lateness) >= 0 and len(result.lateness) == 5_000


def spec(name: str, expression: str, **fields: object) -> JobSpec:
    return JobSpec.model_validate(
        {"name": name, "team": "t", "schedule": {"expression": expression, **fields}, "target": {"type": "callback"}}
    )


def test_the_peak_minute_counts_every_copy_of_a_shared_schedule_once_computed() -> None:
    specs = [spec(f"nightly{i}", "0 0 * * *") for i in range(1_000)] + [spec(f"m{i}", "* * * * *") for i in range(3)]
    profile = load_profile(specs, start=utc("2027-01-04T12:00:00Z"), days=2)
    minute, runs = profile.peak()
    assert (minute, runs) == (utc("2027-01-05T00:00:00Z"), 1_003)
    assert profile.total == 2 * 1_000 + 3 * 2 * 1440
    assert profile.sparse_per_minute[minute] == 1_000, "the nightly jobs are visited ahead, the minutely ones not"
    jittered = load_profile([spec(f"j{i}", "0 0 * * *", jitter="5m") for i in range(50)], start=minute, days=1)
    assert jittered.peak()[1] < 50, "jitter spreads a burst (each job has its own offset)"


def test_sizing_keeps_the_defaults_for_a_small_load_and_grows_for_a_burst() -> None:
    small = size_for(load_profile([spec("a", "0 * * * *")], start=utc("2027-01-04T00:00:00Z"), days=1))
    assert small.deployment.worker_max_concurrency == 50 and small.deployment.worker_memory_mb == 256
    assert small.context() == "-c dispatchers=1 -c due_shards=8 -c worker_concurrency='{\"normal\": 50}'"
    profile = load_profile(
        [spec(f"n{i}", "0 0 * * *") for i in range(60_000)], start=utc("2027-01-04T00:00:00Z"), days=1
    )
    big = size_for(profile)
    assert big.deployment.worker_memory_mb == 1769 and big.deployment.worker_max_concurrency > 50
    assert big.p99_lateness_s <= 60 and big.account_concurrency > big.deployment.worker_max_concurrency
    assert "-c worker_memory=1769" in big.context()


def test_jobsched_capacity_prints_the_peak_the_settings_and_the_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_module, "clock", lambda: utc("2027-01-04T12:00:00Z"))
    for index in range(3):
        (tmp_path / f"n{index}.yaml").write_text(
            f"name: n{index}\nteam: t\nschedule:\n  expression: '0 0 * * *'\ntarget:\n  type: callback\n"
        )
    result = CliRunner().invoke(cli, ["capacity", str(tmp_path), "--days", "2"])
    assert result.exit_code == 0, result.output
    assert "peak minute: 2027-01-05T00:00:00Z with 3 runs due" in result.output
    assert "cdk deploy -c dispatchers=1" in result.output and "monthly cost: $" in result.output
    (tmp_path / "bad.yaml").write_text("name: Bad Name\n")
    failed = CliRunner().invoke(cli, ["capacity", str(tmp_path)])
    assert failed.exit_code == 1 and "fix the job files first" in failed.output


def test_each_table_and_index_takes_writes_at_its_own_throughput() -> None:
    """The same five units a run, on one store or split over two: the split starts the burst sooner, and the
    result names the store that was short."""
    limits = AwsLimits(ddb_table_quota_wcu=4000)
    one = replace(CALIBRATION, worker_wcu_by_store=(("jobs", 5.0),))
    two = replace(CALIBRATION, worker_wcu_by_store=(("jobs", 3.0), ("runs", 2.0)))
    assert one.worker_wcu_per_run == two.worker_wcu_per_run == 5.0
    on_one, split = (simulate([0.0] * 50_000, SIZED, calibration, limits) for calibration in (one, two))
    assert split.percentile(0.99) < 0.7 * on_one.percentile(0.99)
    assert split.binding == "DynamoDB write throughput (jobs)"


def test_the_memory_table_counts_each_index_write_apart() -> None:
    from jobsched.adapters.memory import MemoryRuns
    from jobsched.core.names import RunsKeys
    from jobsched.core.runs import RunMessage, RunStatus

    runs = MemoryRuns()
    at = utc("2027-01-04T00:00:00Z")
    message = RunMessage.scheduled(job="t/j", team="t", at=at, fire_at=at, spec_version=1)
    runs.create(message, status=RunStatus.RUNNING, now=at, retention=timedelta(days=1), lease_until=at, external=True)
    on_lease_index = {"runs": 1.0, f"runs/{RunsKeys.LEASE_INDEX}": 1.0}
    assert runs.table.capacity.by_store("runs") == on_lease_index, "a callback's run waits on the lease index"


def test_an_index_left_cold_paces_the_dispatchers_and_warming_it_does_not() -> None:
    """A million nightly jobs; every part moves its due keys at once (two index writes a job): 32 parts on an
    index that serves 4,000 units a second send 200,000 late; warmed to 40,000 (CDK warms the indexes with the
    tables), none."""
    load = [600.0] * 1_000_000
    cold = simulate(load, replace(SIZED, dispatchers=32, due_shards=64, warm_wcu=None), CALIBRATION)
    assert cold.late_sends > 0 and "dispatcher tick budget (DynamoDB write throughput, jobs/due)" in cold.held_back
    warm = simulate(load, replace(SIZED, dispatchers=32, due_shards=64), CALIBRATION)
    assert warm.late_sends == 0
