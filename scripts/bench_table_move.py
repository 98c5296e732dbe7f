"""What moving a live stage onto its global tables costs (#51), against moto.

A stage of ``--jobs`` minutely jobs runs ``--minutes`` on its previous tables; then the move is announced and the
scheduler goes on while the copier moves what the functions did not touch. Every DynamoDB call is metered by item
size (scripts/dynamo_meter.py): the copier's on a client of its own, the scheduler's on the stack's. A Scan's read
units are modelled from the bytes it reads (its answer leaves out what its filter dropped): the copier reads each
previous table twice, strongly consistent (its pass, and the pass that finds nothing left).

Prints: items moved by the copier and by first touch; the copier's write and read units an item and its price per
million items on demand; the scheduler's write and read units a run before the move, while it moves keys on first
touch, and once the move is clean.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the offline stack lives with the tests

import boto3
from moto import mock_aws

from jobsched.adapters.aws.moves.client import MovingClient, table_pairs
from jobsched.adapters.aws.moves.copier import TableMover
from jobsched.adapters.aws.moves.phase import LEAD, Mode, PhaseReader
from jobsched.core.names import JOBS_TABLE, MOVE_MARK, RUNS_TABLE
from jobsched.core.prices import US_EAST_1
from scripts.bench_pipeline import offline_environment
from scripts.dynamo_meter import Meter, item_size
from tests.aws.harness import REGION, Clock, FakeLambdas, Stack

NEW_JOBS, NEW_RUNS = "jobsched-test-Jobs", "jobsched-test-Runs"  # the offline stack's
OLD_JOBS, OLD_RUNS = "jobsched-test-old-Jobs", "jobsched-test-old-Runs"
PAIRS = table_pairs(NEW_JOBS, NEW_RUNS, OLD_JOBS, OLD_RUNS)
TABLES = {NEW_JOBS: JOBS_TABLE, NEW_RUNS: RUNS_TABLE, OLD_JOBS: JOBS_TABLE, OLD_RUNS: RUNS_TABLE}


def units(meter: Meter) -> tuple[float, float]:
    return float(sum(meter.write_units.values())), float(sum(meter.read_units.values()))


def per_run(stack: Stack, meter: Meter, minutes: int) -> tuple[float, float]:
    """Write and read units a run over ``minutes`` of the scheduler's work."""
    writes, reads = units(meter)
    calls = len(stack.lambdas.calls)
    stack.minutes(minutes)
    runs = len(stack.lambdas.calls) - calls
    after = units(meter)
    return (after[0] - writes) / runs, (after[1] - reads) / runs


def items_of(db: Any, table: str) -> list[dict[str, Any]]:
    return [item for page in db.get_paginator("scan").paginate(TableName=table) for item in page["Items"]]


def scan_read_units(db: Any, table: str) -> float:
    """A strongly consistent Scan of ``table``: 1 read unit per 4 KB it reads."""
    return math.ceil(sum(item_size(item) for item in items_of(db, table)) / 4096)


def measure(jobs: int, minutes: int) -> dict[str, float]:
    clock = Clock("2027-01-04T08:59:00Z")

    def moving(db: Any) -> MovingClient:
        for name in (OLD_JOBS, OLD_RUNS):
            db.create_table(**TABLES[name].create_table_kwargs(name))
        return MovingClient(db, PAIRS, PhaseReader(db, NEW_JOBS, clock))

    stack = Stack(clock, FakeLambdas(functions={"echo": lambda event: {"ok": True}}), dynamodb=moving)
    for index in range(jobs):
        stack.register(
            {
                "name": f"j{index:03d}",
                "team": "bench",
                "schedule": {"expression": "* * * * *"},
                "target": {"type": "lambda", "function": "echo"},
            }
        )
    stack.minutes(minutes)  # history on the previous tables
    raw = stack.dynamodb._db
    meter = Meter(TABLES)
    meter.wrap(raw, "dynamodb")
    figures: dict[str, float] = {}
    figures["before write units a run"], figures["before read units a run"] = per_run(stack, meter, 5)

    copier_db = boto3.client("dynamodb", region_name=REGION)
    copier_meter = Meter(TABLES)
    copier_meter.wrap(copier_db, "dynamodb")
    mover = TableMover(
        MovingClient(copier_db, PAIRS, PhaseReader(copier_db, NEW_JOBS, clock)), copier_db, PAIRS, NEW_JOBS
    )
    old_items = sum(
        1
        for table in (OLD_JOBS, OLD_RUNS)
        for page in raw.get_paginator("scan").paginate(TableName=table)
        for _ in page["Items"]
    )
    scans = 2 * sum(scan_read_units(raw, table) for table in (OLD_JOBS, OLD_RUNS))
    mover.announce(clock())
    clock.advance(LEAD)
    assert stack.dynamodb.phases.mode() is Mode.MOVING
    figures["moving write units a run"], figures["moving read units a run"] = per_run(stack, meter, 5)
    moved = 0
    while (step := mover.step(clock(), page=200)).phase != "clean":
        moved += step.moved
        while step.wait_until and clock() < step.wait_until:
            stack.minutes(1)  # the scheduler goes on meanwhile (a jump of the clock would leave it a backlog)
    figures["after write units a run"], figures["after read units a run"] = per_run(stack, meter, 5)
    copier_writes, copier_reads = units(copier_meter)
    marked = sum(
        1
        for table in (OLD_JOBS, OLD_RUNS)
        for page in raw.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
        if MOVE_MARK in item
    )
    figures |= {
        "items before the move": old_items,
        "moved by the copier": moved,
        "moved on first touch": old_items - moved,
        "marked": marked,
        "copier write units an item": copier_writes / max(1, moved),
        "copier read units an item": (copier_reads + scans) / max(1, old_items),
    }
    figures["copier $ per million items"] = 1e6 * (
        figures["copier write units an item"] * US_EAST_1.write_unit
        + figures["copier read units an item"] * US_EAST_1.read_unit
    )
    return figures


def main(argv: list[str] | None = None, say: Callable[[str], None] = print) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--minutes", type=int, default=30)
    args = parser.parse_args(argv)
    offline_environment()
    with mock_aws():
        figures = measure(args.jobs, args.minutes)
    for name, value in figures.items():
        say(f"{name}: {value:,.2f}" if isinstance(value, float) and not value.is_integer() else f"{name}: {value:,.0f}")
    return figures


if __name__ == "__main__":
    main()
