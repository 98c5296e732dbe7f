"""The arithmetic behind the prices `scripts/bench_pipeline.py` prints: billed Lambda time is never negative, CPU
is stretched to the function's share of a vCPU, and a scenario's total is the sum of its priced parts."""

from __future__ import annotations

import pytest

from jobsched.core.names import JOBS_TABLE, RUNS_TABLE
from scripts.bench_pipeline import (
    AWS_CALL_SECONDS,
    ESM_BATCH,
    PRICE_GB_SECOND,
    PRICE_LAMBDA_REQUEST,
    PRICE_READ_UNIT,
    PRICE_SQS_REQUEST,
    PRICE_WRITE_UNIT,
    TARGET_GB_SECONDS,
    TARGET_SECONDS,
    Scenario,
    billed_seconds,
    cost_lines,
)
from scripts.dynamo_meter import Meter, item_kind


def test_billed_time_stretches_cpu_to_the_functions_share_and_is_never_negative() -> None:
    # 256 MB is 256/1769 of a vCPU: 10 ms of a full core's CPU takes 69 ms there.
    assert billed_seconds(cpu_seconds=0.010, aws_calls=0, memory_gb=0.256) == pytest.approx(0.010 * 1769 / 256)
    # Calls in flight together cost their latency once per wave; a target's duration is added as waited.
    assert billed_seconds(cpu_seconds=0, aws_calls=32, memory_gb=1.769, concurrency=16) == pytest.approx(
        2 * AWS_CALL_SECONDS
    )
    assert billed_seconds(cpu_seconds=0, aws_calls=0, memory_gb=0.256, fixed_seconds=0.1) == pytest.approx(0.1)
    # A measurement below zero (the old wall-minus-calls estimate went to -0.2 $/million) bills nothing for it.
    assert billed_seconds(cpu_seconds=-0.5, aws_calls=-3, memory_gb=0.256) == 0.0


def test_a_scenarios_total_is_its_priced_parts() -> None:
    meter = Meter({})
    meter.requests.update({"dynamodb.UpdateItem": 40, "dynamodb.GetItem": 20, "sqs.SendMessageBatch": 3})
    meter.write_units.update({"Runs table": 20, "Jobs table": 30})
    meter.read_units.update({"jobsched-Runs": 10.0})
    meter.write_units_by_item.update({"run": 20, "job state": 30})
    scenario = Scenario(
        "synthetic",
        runs=10,
        ticks=2,
        worker_compute_seconds=-1.0,  # a measurement gone wrong must not make a cost negative
        dispatcher_compute_seconds=-1.0,
        messages_delivered=10,
        dispatcher_calls=30,
    )
    lines, total, _ = cost_lines(scenario, meter)
    per_run_calls = (40 + 20 + 3) / 10
    worker = PRICE_LAMBDA_REQUEST / ESM_BATCH + (per_run_calls * AWS_CALL_SECONDS + TARGET_SECONDS) / ESM_BATCH * (
        0.256 * PRICE_GB_SECOND
    )
    dispatcher = 2 / 10 * PRICE_LAMBDA_REQUEST + (30 / 16 * AWS_CALL_SECONDS) / 10 * 0.256 * PRICE_GB_SECOND
    expected = (
        5 * PRICE_WRITE_UNIT
        + 1 * PRICE_READ_UNIT
        + 0.3 * PRICE_SQS_REQUEST
        + worker
        + dispatcher
        + PRICE_LAMBDA_REQUEST
        + TARGET_GB_SECONDS * PRICE_GB_SECOND
    )
    assert total == pytest.approx(expected * 1e6)
    assert all(not line.strip().startswith("$/million runs") or "-" not in line.split()[-1] for line in lines)
    assert any("by item: run" in line and "the claim" in line for line in lines)


def test_each_written_item_is_named_by_what_it_guarantees() -> None:
    assert item_kind(RUNS_TABLE.logical_name, "team/job", "20270104T0900Z") == "run"
    assert item_kind(JOBS_TABLE.logical_name, "TEAM#data", "QUOTA") == "team quota"
    assert item_kind(JOBS_TABLE.logical_name, "data/etl", "STATE") == "job state"
