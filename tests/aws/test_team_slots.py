"""Team slots (#31): taken by a worker batch in one write, and handed on at once when a run ends.

The team slot used to be one conditional write per run. A batch of ten delivered to one worker invocation now
takes the slots of its runs that are ready to claim, team by team, in one write; the runs that then do not claim
(their job's slot is full, a duplicate) give theirs back when the batch ends.

A run held back by max_running used to look again only after its backoff (1 s, 1 s, 2 s... up to 30 s). It now
waits on its team's slot waits, and a run of the team that ends sends the longest-waiting one at once.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.names import JobsKeys
from jobsched.core.outcome import Outcome
from jobsched.core.runs import RunStatus
from jobsched.pipeline.ends import AttemptRef, Reported
from tests.aws.harness import Clock, Stack
from tests.aws.test_worker_specs import cold_worker

TEAM_ITEM = f"{JobsKeys.TEAM_PREFIX}batch"


def minutely(name: str, team: str = "batch", **extra: Any) -> dict[str, Any]:
    return {"name": name, "team": team, "schedule": {"expression": "* * * * *"}, **extra}


def first_minute(stack: Stack, clock: Clock, names: list[str], target: dict[str, Any]) -> list[Outcome]:
    """Minutely jobs of the team registered, and their first instant delivered (every message once)."""
    for name in names:
        stack.register(minutely(name, target=target))
    stack.tick()
    clock.advance(timedelta(minutes=1))
    return stack.pump(rounds=1)


def count_writes(stack: Stack) -> Counter[str]:
    """Writes per item key (pk#sk) from here on."""
    writes: Counter[str] = Counter()

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in ("UpdateItem", "PutItem") and params["TableName"] == stack.jobs_table:
            key = params.get("Key") or params["Item"]
            writes[f"{key['pk']['S']}#{key['sk']['S']}"] += 1

    stack.dynamodb.meta.events.register("provide-client-params.dynamodb.*", count)
    return writes


def test_ten_runs_of_one_team_in_a_batch_take_their_team_slots_in_one_write(stack: Stack, clock: Clock) -> None:
    for index in range(10):
        stack.register(minutely(f"job{index}", target={"type": "lambda", "function": "echo"}))
    stack.minutes(1)  # the team's quota item is written for the first time (its slots map made)
    stack.tick()
    clock.advance(timedelta(minutes=1))
    writes = count_writes(stack)
    outcomes = stack.pump()
    assert [o.action for o in outcomes] == ["succeeded"] * 10
    assert writes[f"{TEAM_ITEM}#{JobsKeys.QUOTA}"] == 1, "one write for the batch's ten team slots, not ten"
    assert sum(writes[f"batch/job{index}#{JobsKeys.STATE}"] for index in range(10)) == 10, "each job's own slot"


@pytest.mark.in_memory_queues
def test_a_batch_never_holds_more_than_the_team_limit_and_the_rest_wait(stack: Stack, clock: Clock) -> None:
    stack.jobs.set_team_limits("batch", {"max_running": 3})
    outcomes = first_minute(stack, clock, [f"hold{i}" for i in range(8)], {"type": "callback", "timeout": "1h"})
    assert Counter(o.action for o in outcomes) == {"pending": 3, "waiting": 5}
    assert len(stack.jobs.slot_holders(TEAM_ITEM, JobsKeys.QUOTA)) == 3
    running = [r for i in range(8) for r in stack.run_list(f"batch/hold{i}") if r.status is RunStatus.RUNNING]
    assert len(running) == 3


@pytest.mark.in_memory_queues
def test_slots_taken_for_runs_that_could_not_claim_are_given_back_when_the_batch_ends(
    stack: Stack, clock: Clock
) -> None:
    """hold's run still runs (a callback) when its next instant comes: that run waits for its job's slot, so the
    team slot the batch took for it is released, and the other job's run keeps its own."""
    queue: dict[str, Any] = {"concurrency": {"overlap": "queue"}}
    stack.register(minutely("hold", target={"type": "callback", "timeout": "1h"}, **queue))
    stack.register(minutely("quick", target={"type": "lambda", "function": "echo"}))
    stack.tick()
    clock.advance(timedelta(minutes=1))
    first = stack.pump(rounds=1)
    assert Counter(o.action for o in first) == {"pending": 1, "succeeded": 1}
    clock.advance(timedelta(minutes=1))
    second = stack.pump(rounds=1)
    assert Counter(o.action for o in second) == {"waiting": 1, "succeeded": 1}
    [waiting] = [o for o in second if o.action == "waiting"]
    assert "max_running 1 reached" in waiting.detail
    holders = stack.jobs.slot_holders(TEAM_ITEM, JobsKeys.QUOTA)
    held_by_hold = sorted(h for h in holders if h.startswith("batch/hold/"))
    assert len(held_by_hold) == 1, "only the running one: the waiting run's slot went back at the batch's end"
    [running] = [r for r in stack.run_list("batch/hold") if r.status is RunStatus.RUNNING]
    assert held_by_hold == [f"batch/hold/{running.run_id}"]


def test_a_batch_delivered_twice_runs_each_run_once(stack: Stack, clock: Clock, lambdas: Any) -> None:
    for index in range(6):
        stack.register(minutely(f"job{index}", target={"type": "lambda", "function": "echo"}))
    stack.tick()
    clock.advance(timedelta(minutes=1))
    outcomes = stack.pump(deliveries=2)  # SQS delivers at least once: every record of the batch twice
    assert Counter(o.action for o in outcomes) == {"succeeded": 6, "duplicate": 6}
    assert len(lambdas.calls) == 6


def limited_team_with_a_waiting_run(stack: Stack, clock: Clock, limit: int) -> tuple[list[Outcome], str]:
    """``limit`` + 1 callback jobs of a team limited to ``limit``: all but one run, that one waits (its id)."""
    stack.jobs.set_team_limits("batch", {"max_running": limit})
    names = [f"hold{i}" for i in range(limit + 1)]
    outcomes = first_minute(stack, clock, names, {"type": "callback", "timeout": "1h"})
    assert Counter(o.action for o in outcomes) == {"pending": limit, "waiting": 1}
    for _ in range(4):  # it looks again after 1 s, 1 s, 2 s, 4 s: its next look is 8 s away
        clock.advance(timedelta(seconds=4))
        assert [o.action for o in stack.pump(rounds=1)] == ["waiting"]
    [(job, run_id)] = stack.runs.slot_waiters("batch", limit=5)
    return [o for o in outcomes if o.action == "pending"], f"{job}#{run_id}"


@pytest.mark.in_memory_queues
def test_a_run_that_ends_starts_its_teams_waiting_run_at_once_not_at_its_next_look(stack: Stack, clock: Clock) -> None:
    running, waiting = limited_team_with_a_waiting_run(stack, clock, 2)
    job, run_id = waiting.split("#")
    ended = running[0].run
    assert ended is not None
    stack.worker.ends.complete(AttemptRef(ended.job, ended.run_id, 1), Reported(succeeded=True))
    woken = stack.pump(rounds=1)  # the clock has not moved: only a message sent with no delay is due
    assert [o.action for o in woken] == ["pending"], [(o.action, o.detail, o.run and o.run.run_id) for o in woken]
    [started] = [r for r in stack.run_list(job) if r.run_id == run_id]
    assert started.status is RunStatus.RUNNING and started.started_at == clock()
    assert stack.runs.slot_waiters("batch", limit=5) == []
    clock.advance(timedelta(seconds=10))
    later = stack.pump()  # its own delayed look comes after all: it finds its run started
    assert [o.action for o in later] == ["duplicate"]
    assert [r.attempt for r in stack.run_list(job) if r.run_id == run_id] == [1]


@pytest.mark.in_memory_queues
def test_a_woken_run_that_finds_the_slot_taken_again_waits_in_its_old_place(stack: Stack, clock: Clock) -> None:
    running, waiting = limited_team_with_a_waiting_run(stack, clock, 1)
    ended = running[0].run
    assert ended is not None
    stack.worker.ends.complete(AttemptRef(ended.job, ended.run_id, 1), Reported(succeeded=True))
    lease = clock() + timedelta(hours=1)
    assert stack.jobs.acquire_slot(
        TEAM_ITEM, JobsKeys.QUOTA, holder="batch/other/x", lease_until=lease, limit=2, now=clock()
    ).acquired
    again = stack.pump(rounds=1)
    assert [o.action for o in again] == ["waiting"]
    assert [f"{job}#{run_id}" for job, run_id in stack.runs.slot_waiters("batch", limit=5)] == [waiting]


def test_a_batch_reads_each_ended_holder_once_for_its_team_slot_and_its_job_slot(stack: Stack, clock: Clock) -> None:
    """The run before holds both its job's slot and its team's: the batch reads its end once (the job slots' holders
    the batch read are asked first, in one request), not once for the team and again for each job. On a worker
    process that did not end them (the worker that did proves them by hearing its own ends: no read at all)."""
    for index in range(5):
        stack.register(minutely(f"job{index}", target={"type": "lambda", "function": "echo"}))
    stack.minutes(2)  # each job's run of a minute ended, holding both its slots (released lazily)
    cold_worker(stack)
    stack.tick()
    clock.advance(timedelta(minutes=1))
    asked: Counter[str] = Counter()

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "BatchGetItem" and stack.runs_table in params["RequestItems"]:
            for key in params["RequestItems"][stack.runs_table]["Keys"]:
                asked[f"{key['job']['S']}/{key['run_id']['S']}"] += 1

    stack.dynamodb.meta.events.register("provide-client-params.dynamodb.BatchGetItem", count)
    outcomes = stack.pump(rounds=1)
    assert [o.action for o in outcomes] == ["succeeded"] * 5
    assert len(asked) == 5 and set(asked.values()) == {1}, asked
