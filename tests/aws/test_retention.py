"""#51: the hot tables keep no TTL; the heartbeat checker's sweeper deletes finished runs past their job's retention
(and every other item past its expiry), a bounded page at a time, and leaves the rest."""

from __future__ import annotations

from datetime import timedelta

from jobsched.adapters.aws.retention import ExpiredItems
from jobsched.pipeline.worker import heartbeat_checker
from jobsched.watch.retention import Sweeper
from tests.aws.harness import Clock, Stack
from tests.aws.test_pipeline import job


def test_finished_runs_past_their_retention_are_swept_and_the_job_stays(stack: Stack, clock: Clock) -> None:
    stack.register(job("short", run_retention="1d"))
    stack.register(job("long", run_retention="30d"))
    stack.minutes(3)
    assert len(stack.run_list("payments/short")) == 3 and len(stack.run_list("payments/long")) == 3
    sweeper = Sweeper(
        ExpiredItems(stack.jobs_table, stack.runs_table, stack.dynamodb), pages=1, page_items=4, pass_every=timedelta(0)
    )
    checker = heartbeat_checker(stack.runs, stack.worker, sweep=lambda now: sweeper.sweep(now).deleted)
    clock.advance(timedelta(days=2))
    swept = 0
    for _ in range(20):  # a bounded page a minute: a few minutes for these tables
        swept += checker.check(clock()).swept
        clock.advance(timedelta(minutes=1))
    assert stack.run_list("payments/short") == [] and len(stack.run_list("payments/long")) == 3
    assert swept >= 3
    assert stack.jobs.get("payments/short") is not None and stack.jobs.get_state("payments/short") is not None
    history, _ = stack.jobs.history("payments/short", limit=10)
    assert [entry.action for entry in history] == ["create"]
