"""#51: a stage moves onto new tables while it runs. The scheduler ticks and its worker runs jobs every minute
before, during and after the move (a retry waiting across it, an incident open through it, the copier crashing
once mid-page): every instant runs exactly once, nothing written before the move is lost, and afterwards the new
tables alone (as the release after the move reads them, with no moving client) hold it all."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.clients import reset_clients
from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.moves.client import MovingClient, table_pairs
from jobsched.adapters.aws.moves.copier import TableMover
from jobsched.adapters.aws.moves.phase import Mode, PhaseReader
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.core.names import JOBS_TABLE, MOVE_MARK, MOVE_TOMBSTONE, RUNS_TABLE
from jobsched.core.run_records import Run
from jobsched.core.runs import RunStatus
from tests.aws.harness import REGION, Clock, Crash, FakeLambdas, Stack
from tests.aws.test_pipeline import job
from tests.aws.test_table_move import CrashAfter

OLD_JOBS, OLD_RUNS = "jobsched-test-old-Jobs", "jobsched-test-old-Runs"
NEW_JOBS, NEW_RUNS = "jobsched-test-Jobs", "jobsched-test-Runs"  # the harness's tables
PAIRS = table_pairs(NEW_JOBS, NEW_RUNS, OLD_JOBS, OLD_RUNS)


class Flaky:
    """Fails the first attempt of every run (its retry waits a minute, across whatever happens meanwhile)."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        run = event["jobsched"]["run_id"]
        self.attempts[run] += 1
        if self.attempts[run] == 1:
            raise RuntimeError("first attempt fails")
        return {"ok": run}


def broken(event: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("always fails")


@pytest.fixture
def moving(clock: Clock) -> Iterator[Stack]:
    lambdas = FakeLambdas(
        functions={"echo": lambda event: {"echo": event["payload"]}, "flaky": Flaky(), "broken": broken}
    )
    with mock_aws():
        reset_clients()
        raw = boto3.client("dynamodb", region_name=REGION)
        for definition, name in ((JOBS_TABLE, OLD_JOBS), (RUNS_TABLE, OLD_RUNS)):
            raw.create_table(**definition.create_table_kwargs(name))
        yield Stack(clock, lambdas, dynamodb=lambda db: MovingClient(db, PAIRS, PhaseReader(db, NEW_JOBS, clock)))
    reset_clients()


def count(db: Any, table: str) -> int:
    return sum(page["Count"] for page in db.get_paginator("scan").paginate(TableName=table, Select="COUNT"))


def test_a_running_stage_moves_to_new_tables_with_no_run_lost_or_run_twice(moving: Stack, clock: Clock) -> None:
    stack = moving
    raw = stack.dynamodb._db
    jobs = {
        "minutely": job("minutely"),
        "hourly": job("hourly", "0 * * * *"),
        "flaky": job("flaky", "*/5 * * * *", target={"type": "lambda", "function": "flaky"})
        | {"retry": {"max_attempts": 3, "backoff": {"initial": "60s"}}},
        "broken": job("broken", "*/10 * * * *", target={"type": "lambda", "function": "broken"})
        | {"retry": {"max_attempts": 1}},
    }
    for document in jobs.values():
        stack.register(document)
    sent: Counter[tuple[str, str, int]] = Counter()
    send_each = stack.dispatcher.queues.send_each

    def counted(priority: str, messages: Any) -> Any:
        sent.update((m.job, m.run_id, m.attempt) for m, _ in messages)
        return send_each(priority, messages)

    stack.dispatcher.queues.send_each = counted  # type: ignore[method-assign]
    stack.minutes(12)  # 08:59 .. 09:10 on the old tables
    stack.handle_escalations()
    assert count(raw, NEW_JOBS) == count(raw, NEW_RUNS) == 0
    incidents = stack.jobs.open_incidents("payments/broken")
    assert incidents, "a failing job has an open incident to carry across"

    move_while_running(stack, raw)
    stack.minutes(70)  # on the new tables, past another hour

    # The release after the move: plain clients on the new tables only.
    after_runs, after_jobs = RunsStore(NEW_RUNS, raw), JobsStore(NEW_JOBS, raw)
    end = clock()
    for name, every in (("minutely", 1), ("hourly", 60), ("flaky", 5), ("broken", 10)):
        assert_every_instant_once(after_runs.history(f"payments/{name}", limit=1000, newest_first=False), every, end)
    flaky_runs = after_runs.history("payments/flaky", limit=1000, newest_first=False)
    assert all(run.attempt == 2 for run in flaky_runs if run.status is RunStatus.SUCCEEDED)
    assert incidents <= after_jobs.open_incidents("payments/broken")
    assert [key for key, times in sent.items() if times > 1] == []  # no instant sent twice: its listing read once
    for function in ("echo", "flaky", "broken"):
        executions = stack.lambdas.executions(function)
        assert len(executions) == len(set(executions)), f"{function}: an attempt was made twice"
    for table in (NEW_JOBS, NEW_RUNS):
        for page in raw.get_paginator("scan").paginate(TableName=table):
            assert not [i for i in page["Items"] if MOVE_MARK in i or MOVE_TOMBSTONE in i]


def move_while_running(stack: Stack, raw: Any) -> None:
    """The command's pages, a few a minute beside the scheduler's work, until the move is clean; the copier
    crashes once mid-page."""
    clock = stack.clock
    mover = TableMover(stack.dynamodb, raw, PAIRS, NEW_JOBS)
    mover.announce(clock())
    crashed = False
    for _ in range(120):
        stack.tick()
        for _ in range(3):
            if not crashed and stack.dynamodb.phases.mode() is Mode.MOVING and count(raw, NEW_RUNS) > 5:
                crashed = True
                with pytest.raises(Crash):
                    TableMover(stack.dynamodb, CrashAfter(raw, "scan", 1), PAIRS, NEW_JOBS).step(clock(), page=4)
            mover.step(clock(), page=4)
        clock.advance(timedelta(minutes=1))
        stack.pump()
        stack.handle_escalations()
        if mover.phase().phase == "clean":  # type: ignore[union-attr]
            break
    assert crashed and mover.phase().phase == "clean"  # type: ignore[union-attr]


def assert_every_instant_once(runs: list[Run], every_minutes: int, end: datetime) -> None:
    instants = [run.scheduled_at for run in runs]
    assert len(instants) == len(set(instants)), f"{runs[0].job}: an instant ran twice"
    gaps = {later - earlier for earlier, later in itertools.pairwise(instants)}
    assert gaps == {timedelta(minutes=every_minutes)}, f"{runs[0].job}: an instant was lost ({gaps})"
    assert instants[-1] > end - timedelta(minutes=every_minutes + 2)
    if not runs[0].job.endswith("broken"):
        assert {run.status for run in runs[:-1]} == {RunStatus.SUCCEEDED}, runs[0].job
