"""What a DAG run costs, measured against moto's Step Functions interpreter (``scripts/bench_pipeline.py`` prints it
after the scheduled runs): a 5-task diamond's state transitions per run (billed at $25 per million), with and without
a retried task, and the DynamoDB work per DAG run; then the example pipeline (examples/jobs/cost-cleanup.yaml:
checks, data between tasks, a map, an approval), approved at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import yaml
from moto import mock_aws

from infra.local.examples import EXAMPLE_BUCKET, EXAMPLE_INVENTORY_ROWS, put_example_inventory
from jobsched.core.names import JOBS_TABLE, OWNER_TAG, RUNS_TABLE
from jobsched.core.prices import US_EAST_1
from scripts.dynamo_meter import Meter
from tests.aws.harness import Clock, FakeLambdas, Stack

ROOT = Path(__file__).resolve().parents[1]
PIPELINE_EXAMPLE = "examples/jobs/cost-cleanup.yaml"  # checks, data between tasks, a map, an approval
PRICE_STATE_TRANSITION = US_EAST_1.state_transition  # Step Functions Standard
PRICE_WRITE_UNIT = US_EAST_1.write_unit


def minute_of_a_dag(
    stack: Stack, clock: Clock, job: str, *, meanwhile: Callable[[str], None] = lambda run_id: None, seconds: float = 30
) -> int:
    """A tick, a minute, then the DAG run of that minute driven to its end (``meanwhile`` acts while it runs, e.g.
    answers its approval); the execution's billed transitions."""
    stack.tick()
    clock.advance(timedelta(minutes=1))
    run_id = clock().strftime("%Y%m%dT%H%M00Z")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stack.pump()
        run = stack.runs.get(job, run_id)
        if run is not None and run.status.value not in ("RUNNING", "SCHEDULED"):
            break
        if run is not None:
            meanwhile(run_id)
        time.sleep(0.02)
    assert run is not None and run.execution_arn, f"run {run_id} did not start"
    assert run.status.value == "SUCCEEDED", f"{run_id}: {run.status} {run.error}"
    while stack.stepfunctions.describe_execution(executionArn=run.execution_arn)["status"] == "RUNNING":
        time.sleep(0.02)
    return stack.workflows.billed_transitions(run.execution_arn)


def child_transitions(tasks: dict[str, Any], distributed: list[str]) -> int:
    """What the child executions of a run's distributed maps bill, from the item records: each child enters its
    item state once per attempt, and its "item failed" state when the item finally failed."""
    total = 0
    for name, state in tasks.items():
        if name.split("[", 1)[0] in distributed and "[" in name:
            total += state.attempt + (state.status.value in ("FAILED", "TIMED_OUT"))
    return total


def dag_scenario(runs: int) -> list[str]:
    """A 5-task diamond (extract -> three transforms -> load) on moto's Step Functions interpreter: state
    transitions per run (each state entered), with and without one retried task, and what a DAG run costs."""
    from infra.local.moto_patches import fresh_task_token_per_attempt

    fresh_task_token_per_attempt()
    lines = [f"== DAG: 5-task diamond, {runs} runs each (Step Functions Standard, moto's interpreter)"]
    for label, fail_times in (("all succeed", 0), ("one task retried once", 1)):
        with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
            clock = Clock("2027-01-04T08:59:00Z")

            def flaky(event: dict[str, Any], fail_times: int = fail_times) -> dict[str, Any]:
                if event["jobsched"]["attempt"] <= fail_times:
                    raise RuntimeError("fails once")
                return {"ok": True}

            stack = Stack(clock, FakeLambdas(functions={"echo": lambda event: {"ok": True}, "flaky": flaky}))
            echo = {"type": "lambda", "function": "echo"}
            stack.register(
                {
                    "name": "diamond",
                    "team": "bench",
                    "schedule": {"expression": "* * * * *"},
                    "retry": {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}},
                    "dag": {
                        "tasks": [
                            {"name": "extract", "target": echo},
                            {"name": "t1", "depends_on": ["extract"], "target": echo},
                            {
                                "name": "t2",
                                "depends_on": ["extract"],
                                "target": {"type": "lambda", "function": "flaky"},
                            },
                            {"name": "t3", "depends_on": ["extract"], "target": echo},
                            {"name": "load", "depends_on": ["t1", "t2", "t3"], "target": echo},
                        ]
                    },
                }
            )
            meter = Meter({stack.jobs_table: JOBS_TABLE, stack.runs_table: RUNS_TABLE})
            meter.wrap(stack.dynamodb, "dynamodb")
            meter.wrap(stack.sqs, "sqs")
            counts = [minute_of_a_dag(stack, clock, "bench/diamond") for _ in range(runs)]
            per_run = sum(counts) / len(counts)
            writes = sum(meter.write_units.values()) / runs
            # Sends only (the worker's and the state machine's): the harness polls an empty queue while the
            # interpreter sleeps through a retry interval, which Lambda's event source does not bill per run.
            sqs = sum(v for k, v in meter.requests.items() if k.lower().startswith("sqs.send")) / runs
            transitions_cost = per_run * PRICE_STATE_TRANSITION * 1e6
            lines.append(
                f"  {label}: transitions/run {per_run:.1f} (limit: 5 tasks + 2 = 7, +1 per retry); "
                f"Step Functions ${transitions_cost:,.0f} per million runs; "
                f"DynamoDB write units/run {writes:.1f} (${writes * PRICE_WRITE_UNIT * 1e6:,.0f}/M); "
                f"SQS sends/run by the worker {sqs:.1f}"
            )
            lines.append(f"dag_transitions_per_run[{label}]={per_run:.1f}")
    return lines


def pipeline_scenario(runs: int) -> list[str]:
    """The example pipeline (examples/jobs/cost-cleanup.yaml: checks, data between tasks, a map over three
    accounts, an approval) on moto's Step Functions interpreter: transitions and work per run, approved at once."""
    from infra.local.moto_patches import fresh_task_token_per_attempt
    from jobsched.core.runs import TaskStatus
    from jobsched.pipeline.approvals import decide

    fresh_task_token_per_attempt()
    document = yaml.safe_load((ROOT / PIPELINE_EXAMPLE).read_text())
    document["schedule"] = {"expression": "* * * * *"}
    distributed = [
        task["name"] for task in document["dag"]["tasks"] if task.get("map", {}).get("mode") == "distributed"
    ]
    lines = [f"== DAG: the example pipeline ({PIPELINE_EXAMPLE}), {runs} runs"]
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        clock = Clock("2027-01-04T08:59:00Z")
        stack = Stack(clock, FakeLambdas(functions={"jobsched-example-echo": lambda event: {"echo": event}}))
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=EXAMPLE_BUCKET)
        s3.put_bucket_tagging(Bucket=EXAMPLE_BUCKET, Tagging={"TagSet": [{"Key": OWNER_TAG, "Value": "examples"}]})
        put_example_inventory(s3)
        stack.register(document)
        job = f"{document['team']}/{document['name']}"
        meter = Meter({stack.jobs_table: JOBS_TABLE, stack.runs_table: RUNS_TABLE})
        meter.wrap(stack.dynamodb, "dynamodb")
        meter.wrap(stack.sqs, "sqs")

        def approve(run_id: str) -> None:
            waiting = stack.runs.tasks(job, run_id).get("approve-deletion")
            if waiting is not None and waiting.status is TaskStatus.RUNNING:
                decide(stack.jobs, stack.worker.dags, job, run_id, "approve-deletion", approved=True, principal="bench",
                       now=clock())  # fmt: skip

        parents, children = [], []
        for _ in range(runs):
            parents.append(minute_of_a_dag(stack, clock, job, meanwhile=approve, seconds=60))
            children.append(child_transitions(stack.runs.tasks(job, clock().strftime("%Y%m%dT%H%M00Z")), distributed))
        parent, child = sum(parents) / runs, sum(children) / runs
        per_run = parent + child
        writes = sum(meter.write_units.values()) / runs
        lines.append(
            f"  approved at once: transitions/run {per_run:.1f}: the execution {parent:.1f} (1 + find-idle 1 + map: "
            f"list 1, Map 1, 3 items, judgement 1 + distributed map: list 1, choice 1, Map 1, judgement 1 + approval "
            f"1 + delete 1 = 14) and its distributed map's {EXAMPLE_INVENTORY_ROWS} child executions {child:.1f} "
            "(one item state each; counted from the item records, as moto keeps no child executions)"
        )
        lines.append(
            f"  Step Functions ${per_run * PRICE_STATE_TRANSITION * 1e6:,.0f} per million runs; DynamoDB write "
            f"units/run {writes:.1f}"
        )
        lines.append(f"pipeline_transitions_per_run={per_run:.1f}")
    return lines
