"""#50: a team's chargeback from its usage items (one a job and day): a seeded month priced by the one price table
matches the price model worked out by hand within 1%, grouped by job, tier and target type, only that month's days;
a Lambda target's billed GB-seconds from its log tail; a Fargate task billed for a minute at least."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from jobsched.adapters.memory.jobs import MemoryJobs
from jobsched.core.prices import US_EAST_1, price_table
from jobsched.core.usage import (
    TARGET_FUNCTION_GB_SECONDS,
    TARGET_FUNCTION_REQUESTS,
    TARGET_GB_SECONDS,
    TARGET_VCPU_SECONDS,
    attempt_usage,
    lambda_report_usage,
    task_usage,
    work_usage,
)
from jobsched.planning.chargeback import chargeback, month_days

REPORT = (
    "START RequestId: 8f5 Version: $LATEST\nEND RequestId: 8f5\n"
    "REPORT RequestId: 8f5\tDuration: 102.35 ms\tBilled Duration: 103 ms\tMemory Size: 128 MB\tMax Memory Used: 70 MB"
)


def seed_month(store: MemoryJobs) -> None:
    """January 2027: a minutely Lambda job (1,440 runs a day, 128 MB for 103 ms each), an hourly Fargate job
    (0.25 vCPU, 0.5 GB, 10 minutes), and days either side of the month that must not count."""
    lambda_attempt = attempt_usage(lambda_report_usage(REPORT), first_attempt=True)
    fargate_attempt = attempt_usage(task_usage(0.25, 0.5, 600), first_attempt=True)
    for offset in range(-1, 32):
        day = date(2027, 1, 1) + timedelta(days=offset)
        minutely = {name: value * 1440 for name, value in lambda_attempt.items()}
        hourly = {name: value * 24 for name, value in fargate_attempt.items()}
        store.add_usage("ops", "ops/sync", day, minutely, tier="critical", target_type="lambda")
        store.add_usage("ops", "ops/export", day, hourly, tier="best-effort", target_type="ecs")
        store.add_usage("data", "data/other", day, minutely, tier="critical", target_type="lambda")


def test_a_seeded_month_matches_the_price_model_worked_out_by_hand() -> None:
    store = MemoryJobs()
    seed_month(store)
    bill = chargeback(store, "ops", "2027-01", by="job", prices=US_EAST_1)
    runs = {line.key: line.runs for line in bill.lines}
    assert runs == {"ops/sync": 1440 * 31, "ops/export": 24 * 31}  # December 31 and February 1 left out
    # By hand, per attempt: 5.6 write units, 3.8 read units, 3 queue requests, 0.2 invocations and 0.03072 GB-s of
    # the scheduler's arm64 functions, one event; a 128 MB Lambda billed 103 ms on x86; Fargate 0.25 vCPU 0.5 GB.
    scheduler = 5.6 * 0.625e-6 + 3.5 * 0.125e-6 + 3 * 0.40e-6 + 0.2 * 0.20e-6 + 0.03072 * 0.0000133334 + 1e-6
    lambda_target = 0.20e-6 + 0.103 * 0.125 * 0.0000166667
    fargate_target = 600 * (0.25 * 0.04048 + 0.5 * 0.004445) / 3600
    expected = {
        "ops/sync": 1440 * 31 * (scheduler + lambda_target),
        "ops/export": 24 * 31 * (scheduler + fargate_target),
    }
    for line in bill.lines:
        assert line.total == pytest.approx(expected[line.key], rel=0.01), line
    assert bill.total == pytest.approx(sum(expected.values()), rel=0.01)
    assert bill.lines[0].key == "ops/export"  # most expensive first: ten minutes of Fargate an hour
    assert bill.scheduler == pytest.approx(1464 * 31 * scheduler, rel=0.01)
    assert bill.prices == "us-east-1 list prices of 2026-12-01"


def test_grouped_by_tier_and_by_target_type() -> None:
    store = MemoryJobs()
    seed_month(store)
    by_tier = {line.key: line.runs for line in chargeback(store, "ops", "2027-01", by="tier", prices=US_EAST_1).lines}
    assert by_tier == {"critical": 1440 * 31, "best-effort": 24 * 31}
    by_target = {line.key for line in chargeback(store, "ops", "2027-01", by="target", prices=US_EAST_1).lines}
    assert by_target == {"lambda", "ecs"}


def test_what_a_target_reports_and_what_it_does_not() -> None:
    assert lambda_report_usage(REPORT) == {
        TARGET_FUNCTION_REQUESTS: 1.0,
        TARGET_FUNCTION_GB_SECONDS: pytest.approx(0.103 * 128 / 1024),
    }
    assert lambda_report_usage("no report line") == {}  # never guessed
    assert task_usage(1, 2, 5) == {TARGET_VCPU_SECONDS: 60.0, TARGET_GB_SECONDS: 120.0}  # a minute at least
    assert attempt_usage({}, first_attempt=False)["runs"] == 0.0  # a retry is an attempt, not a run
    assert price_table("ap-south-2").region == "us-east-1"  # no table: priced at us-east-1's, and it says so
    assert month_days("2028-02") == (date(2028, 2, 1), date(2028, 2, 29))
    with pytest.raises(ValueError):
        month_days("2027-13")


def test_a_batch_job_on_fargate_is_billed_by_its_requirements_and_ec2_capacity_is_not_guessed() -> None:
    batch = {
        "jobId": "j-1",
        "platformCapabilities": ["FARGATE"],
        "container": {"resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "2048"}]},
        "startedAt": 1799053200000,
        "stoppedAt": 1799053500000,  # five minutes
    }
    measured = work_usage(batch)
    assert measured is not None
    counters, stopped = measured
    assert counters == {TARGET_VCPU_SECONDS: 300.0, TARGET_GB_SECONDS: 600.0} and stopped.year == 2027
    assert work_usage(batch | {"platformCapabilities": ["EC2"]}) is None
    assert work_usage({"taskArn": "t", "launchType": "EC2", "cpu": "256", "memory": "512"}) is None


def test_a_dag_run_counts_once_with_its_transitions_and_its_tasks_as_attempts() -> None:
    from pathlib import Path

    from jobsched.cli.harness import Harness, JobTest
    from jobsched.core.usage import ATTEMPTS, RUNS, TRANSITIONS
    from jobsched.pipeline.usage import DagRunUsage
    from jobsched.registry.jobfile import load_job_file

    spec = load_job_file(Path(__file__).resolve().parents[2] / "examples" / "jobs" / "nightly-etl.yaml")
    window = {"from": "2027-07-02T00:00:00Z", "to": "2027-07-03T00:00:00Z"}
    stubs = {"extract": {"output": {"rows": 3, "files": ["s3://lake/a.csv"]}}, "load": {"output": {}}}
    harness = Harness(spec, JobTest.model_validate({"job": "x", "window": window, "stubs": stubs, "expect": {}}))
    harness.worker.usage = harness.jobs  # as deployed: every task attempt metered
    harness.runs.lifecycle.subscribe(DagRunUsage(harness.jobs, harness.clock))
    harness.run()
    [run] = harness.store.history(spec.key, limit=10)
    tasks = harness.store.tasks(spec.key, run.run_id)
    [day] = harness.jobs.usage_between(spec.team, date(2027, 7, 1), date(2027, 7, 31))
    assert day.counters[RUNS] == 1 and day.counters[ATTEMPTS] == len(tasks)
    assert run.graph is not None and day.counters[TRANSITIONS] == 1 + len(run.graph)
    assert day.target_type == "dag"


def test_the_executive_view_lists_the_months_top_teams_and_jobs_by_cost() -> None:
    from jobsched.console.cost_page import top_costs
    from jobsched.core.runs import parse_instant

    store = MemoryJobs()
    seed_month(store)
    html = top_costs(
        store, ["data", "ops"], now=parse_instant("2027-01-31T12:00:00Z"), prices=US_EAST_1, links=lambda path: None
    )
    assert html.index("ops/export") < html.index("ops/sync")  # most expensive first
    assert ">ops<" in html and ">data<" in html and "2027-01 so far" in html
    assert html.index(">ops<") < html.index(">data<")  # ops spends more (it has the Fargate job)
    empty = top_costs(store, ["ops"], now=parse_instant("2026-06-01T00:00:00Z"), prices=US_EAST_1, links=lambda p: None)
    assert "No usage recorded in 2026-06" in empty
