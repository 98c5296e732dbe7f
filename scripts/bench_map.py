"""What one wide map task costs in the runs table, on moto's Step Functions interpreter: read and write units
per item and for the whole run, and the seconds it took here.

    AWS_DEFAULT_REGION=us-east-1 .venv/bin/python scripts/bench_map.py --items 1000
    AWS_DEFAULT_REGION=us-east-1 .venv/bin/python scripts/bench_map.py --items 5000 --mode distributed

A DAG of three tasks: ``list`` returns the list (inline) or the s3:// URI of a JSON list in the team's bucket
(distributed), ``each`` maps over it, ``report`` runs after. Read units are what DynamoDB would bill for the
requests made (strongly consistent: 1 unit per 4 KB read, rounded up per item for GetItem/BatchGetItem and per
request for a Query), from the sizes moto returned.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from jobsched.core.names import JOBS_TABLE, OWNER_TAG, RUNS_TABLE  # noqa: E402
from scripts.bench_pipeline import offline_environment  # noqa: E402
from scripts.dynamo_meter import Meter  # noqa: E402
from tests.aws.harness import Clock, FakeLambdas, Stack  # noqa: E402

JOB, RUN = "bench/wide", "20270104T090000Z"


def scenario(items: int, mode: str) -> list[str]:
    from infra.local.moto_patches import fresh_task_token_per_attempt

    fresh_task_token_per_attempt()
    parts = [{"n": n} for n in range(items)]
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        clock = Clock("2027-01-04T08:59:00Z")
        listing: Any = {"parts": parts}
        over = "{{ tasks.list.output.parts }}"
        if mode == "distributed":
            s3 = boto3.client("s3", region_name="us-east-1")
            s3.create_bucket(Bucket="bench-lists")
            s3.put_bucket_tagging(Bucket="bench-lists", Tagging={"TagSet": [{"Key": OWNER_TAG, "Value": "bench"}]})
            s3.put_object(Bucket="bench-lists", Key="parts.json", Body=json.dumps(parts).encode())
            listing, over = {"manifest": "s3://bench-lists/parts.json"}, "{{ tasks.list.output.manifest }}"
        lambdas = FakeLambdas(
            functions={"list": lambda event: listing, "part": lambda event: {"ok": 1}, "report": lambda e: {}}
        )
        stack = Stack(clock, lambdas)
        each: dict[str, Any] = {"over": over, "max_concurrency": 40}
        if mode == "distributed":
            each |= {"mode": "distributed", "max_concurrency": 100}
        stack.register(
            {
                "name": "wide",
                "team": "bench",
                "schedule": {"expression": "rate(1 hour)", "start_at": "2027-01-04T09:00:00Z"},
                "retry": {"max_attempts": 1},
                "dag": {
                    "tasks": [
                        {"name": "list", "target": {"type": "lambda", "function": "list"}},
                        {
                            "name": "each",
                            "depends_on": ["list"],
                            "map": each,
                            "target": {"type": "lambda", "function": "part", "payload": {"n": "{{ item.n }}"}},
                        },
                        {"name": "report", "depends_on": ["each"], "target": {"type": "lambda", "function": "report"}},
                    ]
                },
            }
        )
        meter = Meter({stack.jobs_table: JOBS_TABLE, stack.runs_table: RUNS_TABLE})
        meter.wrap(stack.dynamodb, "dynamodb")
        began = time.monotonic()
        stack.tick()
        clock.set("2027-01-04T09:00:00Z")
        while time.monotonic() - began < 1800:
            stack.pump()
            run = stack.runs.get(JOB, RUN)
            if run is not None and run.status.value not in ("RUNNING", "SCHEDULED"):
                break
            time.sleep(0.02)
        seconds = time.monotonic() - began
        assert run is not None and run.status.value == "SUCCEEDED", run
    reads, writes = sum(meter.read_units.values()), sum(meter.write_units.values())
    return [
        f"== one run: list -> {mode} map over {items} items -> report (moto's interpreter)",
        f"  runs table and jobs table: {reads:,.0f} read units ({reads / items:.1f} an item), "
        f"{writes:,.0f} write units ({writes / items:.1f} an item); {seconds:.0f} s here",
        f"map_read_units_per_item[{mode},{items}]={reads / items:.1f}",
    ]


def object_memory() -> list[str]:
    """Peak memory of checking a distributed map's object (what a worker shared by every team holds while it
    counts): the largest objects allowed, shaped to be costly."""
    import tracemalloc

    from jobsched.core.item_lists import MAX_ITEMS_OBJECT_BYTES, BadItems, count_items

    size = MAX_ITEMS_OBJECT_BYTES - 16
    shapes = {
        "8 MB of {} (millions of tiny items)": b"[" + b"{}," * (size // 3 - 1) + b"{}]",
        "10,000 items of 800 bytes": json.dumps([{"key": "k" * 780} for _ in range(10_000)]).encode(),
        "8 MB CSV of one-letter rows": b"a\n" + b"x\n" * (size // 2 - 1),
        "a CSV header of 1.1 M columns": b",".join(b"%d" % column for column in range(1_100_000))[:size],
        "a JSON list whose first item is 7.6 MB": b'[{"k": "' + b"x" * 7_600_000 + b'"}, 1]',
    }
    lines = ["== checking a distributed map's object: peak memory (tracemalloc), beyond the object's bytes"]
    for label, data in shapes.items():
        tracemalloc.start()
        try:
            outcome = f"{count_items(data, 'csv' if 'CSV' in label else 'json')} items"
        except BadItems as refused:
            outcome = f"refused: {refused}"
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        lines.append(f"  {label} ({len(data) / 1024 / 1024:.1f} MB): peak {peak / 1024 / 1024:.1f} MB; {outcome}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description="Read and write units of one wide map task, against moto.")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--mode", choices=("inline", "distributed"), default="inline")
    parser.add_argument("--memory", action="store_true", help="only the peak memory of checking an object")
    args = parser.parse_args()
    if args.memory:
        print("\n".join(object_memory()))
        return
    offline_environment()
    print("\n".join(scenario(args.items, args.mode)))


if __name__ == "__main__":
    main()
