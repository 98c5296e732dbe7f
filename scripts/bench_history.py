"""Cost and speed of the dispatcher and the worker against a table holding a year of finished runs (#51).

Runs the same jobs (minutely and hourly, one team) through the dispatcher and the worker on the memory adapters,
whose tables bill read and write units as DynamoDB on-demand does (by item size, index writes included), first
with empty tables, then with ``--history`` finished runs seeded in the past year (the jobs' own partitions). Prints
each one's units per run for the dispatcher and the worker apart, and their CPU time per run, then the ratio.

Modelled for DynamoDB: a request's units depend on the items it reads and writes, never on how many others the table
holds (a Query reads a key range, the sparse indexes hold only due jobs, running and waiting runs): so the memory
tables' units are DynamoDB's. The memory table finds a key range by bisection, as DynamoDB's B-tree does.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues
from jobsched.core.names import JOBS_TABLE, RUNS_TABLE
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.runs import TERMINAL, RunMessage, RunStatus, parse_instant, scheduled_run_id
from jobsched.core.spec import JobSpec
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.worker import Worker
from jobsched.schedule.company import NO_COMPANY
from jobsched.schedule.fires import first_fire
from tests.helpers import Clock

START = "2027-01-04T08:59:30Z"
MINUTELY, HOURLY = 8, 8


class Succeeding:
    def execute(self, target: Any, context: RunContext) -> TargetResult:
        return TargetResult("succeeded", output="ok")


@dataclass(frozen=True)
class Units:
    runs: int
    dispatcher_reads: float
    dispatcher_writes: float
    worker_reads: float
    worker_writes: float
    dispatcher_cpu_ms: float
    worker_cpu_ms: float
    history: int
    finished_on_index: int  # finished runs on a Runs index at the end (a hot index carries only live runs)

    def per_run(self) -> dict[str, float]:
        return {
            "dispatcher read units/run": self.dispatcher_reads / self.runs,
            "dispatcher write units/run": self.dispatcher_writes / self.runs,
            "worker read units/run": self.worker_reads / self.runs,
            "worker write units/run": self.worker_writes / self.runs,
            "dispatcher cpu ms/run": self.dispatcher_cpu_ms / self.runs,
            "worker cpu ms/run": self.worker_cpu_ms / self.runs,
        }


def jobs() -> list[JobSpec]:
    expressions = [f"{n * 7} * * * *" if n < HOURLY else "* * * * *" for n in range(HOURLY + MINUTELY)]
    return [
        JobSpec.model_validate(
            {
                "name": f"job-{n}",
                "team": "data",
                "schedule": {"expression": expression},
                "target": {"type": "lambda", "function": "echo"},
            }
        )
        for n, expression in enumerate(expressions)
    ]


def seed_history(runs: MemoryRuns, specs: list[JobSpec], count: int) -> None:
    """``count`` finished runs over the past year, spread over the jobs (their own partitions), as the worker
    leaves them: ended, off every index."""
    start = parse_instant(START)
    each = max(1, count // len(specs))
    for spec in specs:
        step = timedelta(days=365) / each
        for index in range(each):
            at = start - timedelta(days=365) + step * index
            message = RunMessage.scheduled(job=spec.key, team=spec.team, at=at, fire_at=at, spec_version=1)
            runs.create(message, status=RunStatus.SUCCEEDED, now=at, retention=timedelta(days=400))


def measure(history: int, minutes: int) -> Units:
    clock = Clock(START)
    store, runs = MemoryJobs(), MemoryRuns()
    queues, escalations = MemoryWorkQueues(clock), MemoryEscalations()
    specs = jobs()
    now = clock()
    for spec in specs:
        store.create(spec, now=now, principal="bench", cursor=now,
                     next_visit_at=first_fire(spec, registered_at=now, after=now, company=NO_COMPANY))  # fmt: skip
    seed_history(runs, specs, history)
    # The seeded items live in this process only because the tables are in memory: kept out of Python's cyclic
    # garbage collector, which would otherwise scan them all on each collection (DynamoDB's items cost nothing).
    gc.collect()
    gc.freeze()
    dispatcher = Dispatcher(store, runs, queues, escalations=escalations)
    worker = Worker(store, runs, queues, escalations, Succeeding(), clock)
    tables = (store.table.capacity, runs.table.capacity)
    for capacity in tables:
        capacity.reset()
    totals = {"dr": 0.0, "dw": 0.0, "wr": 0.0, "ww": 0.0, "dc": 0.0, "wc": 0.0}
    for _ in range(minutes):
        before = [(c.read_units, c.write_units) for c in tables]
        started = time.process_time()
        dispatcher.tick(clock())
        totals["dc"] += time.process_time() - started
        totals["dr"] += sum(c.read_units - b[0] for c, b in zip(tables, before, strict=True))
        totals["dw"] += sum(c.write_units - b[1] for c, b in zip(tables, before, strict=True))
        for second in range(0, 60, 5):
            clock.now = clock.now.replace(second=0) + timedelta(seconds=second) if second else clock.now
            before = [(c.read_units, c.write_units) for c in tables]
            started = time.process_time()
            for queued in queues.receive("normal", limit=1000):
                if isinstance(queued.message, RunMessage):
                    worker.process(queued.message)
            totals["wc"] += time.process_time() - started
            totals["wr"] += sum(c.read_units - b[0] for c, b in zip(tables, before, strict=True))
            totals["ww"] += sum(c.write_units - b[1] for c, b in zip(tables, before, strict=True))
        clock.now = clock.now.replace(second=30) + timedelta(minutes=1)
    ended = sum(
        1
        for key, item in runs.table.items.items()
        if item.get("status") in {status.value for status in TERMINAL}
        and key[1] >= scheduled_run_id(parse_instant(START))
    )
    gc.unfreeze()
    return Units(
        ended,
        totals["dr"],
        totals["dw"],
        totals["wr"],
        totals["ww"],
        totals["dc"] * 1000,
        totals["wc"] * 1000,
        history,
        indexed_finished_runs(runs),
    )


def indexed_finished_runs(runs: MemoryRuns) -> int:
    """Finished runs on any of the Runs table's indexes (none may be: a hot index carries only live runs)."""
    on_index = {key for index in runs.table._indexes.values() for shard in index.values() for key in shard}
    return sum(1 for key in on_index if runs.table.items[key].get("status") in {s.value for s in TERMINAL})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=200_000, help="finished runs seeded in the past year")
    parser.add_argument("--minutes", type=int, default=90)
    args = parser.parse_args()
    empty = measure(0, args.minutes)
    full = measure(args.history, args.minutes)
    print(f"tables: {JOBS_TABLE.logical_name}, {RUNS_TABLE.logical_name} (memory adapters, DynamoDB's units)")
    print(f"runs measured: {empty.runs} on empty tables, {full.runs} with {full.history:,} finished runs seeded")
    for (name, before), after in zip(empty.per_run().items(), full.per_run().values(), strict=True):
        print(f"  {name:32s} empty {before:8.3f}   history {after:8.3f}   ratio {after / before if before else 1:5.2f}")
    same = all(
        abs(a - b) < 1e-9
        for a, b in zip(list(empty.per_run().values())[:4], list(full.per_run().values())[:4], strict=True)
    )
    print(f"finished runs on a hot index: {empty.finished_on_index} and {full.finished_on_index}")
    print(f"units_per_run_unchanged_by_history={str(same).lower()}")


if __name__ == "__main__":
    main()
