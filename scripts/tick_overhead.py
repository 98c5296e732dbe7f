"""What a dispatcher tick costs with no job due: its reads of the due index and the timing wheel, its wheel marks,
its wakeups (#51). A deployment pays it every minute whatever its jobs (about $0.10 a month a stage: the idle cost,
``scripts/idle_cost.py``); a benchmark of a few dozen jobs that amortizes it over their runs shows it as a run's
cost. ``bench_pipeline`` prints each run's units with and without it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from moto import mock_aws

from jobsched.core.names import JOBS_TABLE, RUNS_TABLE
from scripts.dynamo_meter import Meter
from tests.aws.harness import Clock, FakeLambdas, Stack

TICKS = 30


@dataclass(frozen=True)
class TickOverhead:
    write_units: float  # a tick's, with no job due
    read_units: float


def tick_overhead(step: timedelta, start: str) -> TickOverhead:
    """A tick's units on an empty deployment ticking every ``step``, averaged over ``TICKS`` ticks."""
    with mock_aws():
        clock = Clock(start)
        stack = Stack(clock, FakeLambdas())
        meter = Meter({stack.jobs_table: JOBS_TABLE, stack.runs_table: RUNS_TABLE})
        stack.tick()  # the first tick reads the whole wheel once and writes its first marks
        meter.wrap(stack.dynamodb, "dynamodb")
        for _ in range(TICKS):
            clock.advance(step)
            stack.tick()
    return TickOverhead(sum(meter.write_units.values()) / TICKS, sum(meter.read_units.values()) / TICKS)
