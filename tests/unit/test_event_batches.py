"""Batched triggers on the memory adapters: every event in exactly one batch, each batch one run that starts
when its window has passed or it is full, whatever is redelivered, raced or crashed.

The AWS path (moto's DynamoDB transactions, the worker handing the list to a Lambda) is
tests/aws/test_event_triggers.py.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from jobsched.core.errors import BatchContention
from jobsched.core.event_batches import MAX_BATCH_PAYLOAD_BYTES, BatchedEvent, batch_named, batch_payload
from jobsched.core.events import trigger_summary
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.core.spec import JobSpec
from tests.unit.test_event_intake import LANDING, ORDERS, T0, Stack, object_created, order_event

BATCHED_ORDERS = ORDERS | {"batch": {"window": "5m", "max_events": 3}}
BATCHED_LANDING = LANDING | {"batch": {"window": "1m", "max_events": 500}}


def run_messages(stack: Stack) -> list[RunMessage]:
    return [message for message in stack.sent() if isinstance(message, RunMessage)]


def batch_of(message: RunMessage) -> dict[str, Any]:
    assert message.trigger_detail is not None
    batch = message.trigger_detail["batch"]
    assert isinstance(batch, dict)
    return batch


def close(stack: Stack, message: RunMessage) -> list[BatchedEvent]:
    """What the worker does when the batch's run starts."""
    batch = batch_named(message.trigger_detail)
    assert batch is not None
    return stack.jobs.close_batch(message.job, *batch)


def test_events_inside_the_window_start_one_run_that_receives_their_list() -> None:
    stack = Stack(BATCHED_LANDING)
    for i in range(5):
        stack.now = T0 + timedelta(seconds=i)
        got = stack.intake.receive(stack.envelope(object_created(f"exports/{i}.csv", f"0{i}")), now=stack.now)
        assert got.action == "batched"
    [message] = run_messages(stack)
    run = stack.runs.get("data/load", message.run_id)
    assert run is not None and run.status is RunStatus.SCHEDULED and "-b-" in run.run_id
    # The run waits for the window's end; its logical instant is the batch's first event's arrival.
    assert parse_instant(message.fire_at) == T0 + timedelta(minutes=1)
    assert run.scheduled_at == T0
    payload = batch_payload(dict(message.trigger_detail or {}), close(stack, message), events_ref="/ref")
    assert "events_ref" not in payload and "omitted" not in payload
    assert payload["trigger"]["count"] == 5 and payload["trigger"]["kind"] == "s3"
    assert sorted(event["key"] for event in payload["events"]) == [f"exports/{i}.csv" for i in range(5)]
    assert {"bucket", "size", "etag", "time", "event_id"} <= set(payload["events"][0])
    assert trigger_summary(dict(message.trigger_detail or {})) == (
        "batch 1 of s3 events (window 1m, at most 500 events)"
    )


def test_a_redelivered_event_is_one_entry_of_its_batch() -> None:
    stack = Stack(BATCHED_ORDERS)
    event = order_event()
    actions = [stack.intake.receive(stack.envelope(event), now=stack.now).action for _ in range(3)]
    assert actions == ["batched", "duplicate", "duplicate"]
    [message] = run_messages(stack)
    assert len(close(stack, message)) == 1


def test_a_full_batch_starts_at_once_and_the_next_event_opens_the_next_batch() -> None:
    stack = Stack(BATCHED_ORDERS)  # at most 3 events
    for _ in range(4):
        stack.intake.receive(stack.envelope(order_event()), now=stack.now)
    messages = run_messages(stack)
    numbers = Counter(batch_of(m)["number"] for m in messages)
    assert numbers == {1: 2, 2: 1}  # batch 1: sent for its window's end, and again at once when full
    assert sorted(parse_instant(m.fire_at) for m in messages if batch_of(m)["number"] == 1) == [
        stack.now,
        stack.now + timedelta(minutes=5),
    ]
    first, second = (next(m for m in messages if batch_of(m)["number"] == n) for n in (1, 2))
    assert first.run_id != second.run_id
    assert (len(close(stack, first)), len(close(stack, second))) == (3, 1)


def test_an_event_after_the_window_or_after_the_run_closed_its_batch_goes_into_the_next() -> None:
    stack = Stack(BATCHED_ORDERS)
    stack.intake.receive(stack.envelope(order_event()), now=T0)
    late = stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(minutes=5, seconds=1))
    messages = run_messages(stack)
    [first] = [m for m in messages if batch_of(m)["number"] == 1]
    assert late.run_id != first.run_id
    # The run of batch 2 starts (its batch is closed and read); an event in flight meanwhile is not lost.
    stack.now = T0 + timedelta(minutes=6)
    [second] = [m for m in messages if batch_of(m)["number"] == 2]
    assert len(close(stack, second)) == 1
    after = stack.intake.receive(stack.envelope(order_event()), now=stack.now)
    assert after.action == "batched" and after.run_id not in (first.run_id, second.run_id)
    assert len(close(stack, second)) == 1  # the closed batch's list did not change
    assert len(close(stack, first)) == 1


def test_concurrent_deliveries_put_every_event_in_exactly_one_batch_and_no_batch_over_its_limit() -> None:
    stack = Stack(BATCHED_ORDERS)
    events = [order_event() for _ in range(40)]
    barrier, actions = threading.Barrier(8), Counter[str]()
    lock = threading.Lock()

    def deliver(worker: int) -> None:
        barrier.wait()
        for event in events[worker::4]:  # every event delivered by two threads
            while True:
                try:
                    got = stack.intake.receive(stack.envelope(event), now=stack.now).action
                    break
                except BatchContention:
                    continue  # the intake message comes back, as SQS brings back one whose handling raised
            with lock:
                actions[got] += 1

    threads = [threading.Thread(target=deliver, args=(i % 4,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert actions == {"batched": 40, "duplicate": 40}
    batches = {m.run_id: m for m in run_messages(stack)}
    contents = [close(stack, message) for message in batches.values()]
    assert all(1 <= len(content) <= 3 for content in contents)
    in_batches = Counter(event.entry["event_id"] for content in contents for event in content)
    assert set(in_batches) == {event["id"] for event in events} and set(in_batches.values()) == {1}


def test_the_run_of_a_batch_whose_starter_died_before_sending_is_sent_by_the_next_event() -> None:
    stack = Stack(BATCHED_ORDERS)
    fingerprint = stack.envelope(order_event()).jobsched.trigger
    # The starter stored batch 1 and died: no run, no message.
    stack.jobs.start_batch("data/load", fingerprint, after=0, run_id="20270301T100000Z-b-dead", now=T0)
    got = stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(seconds=2))
    assert got.run_id == "20270301T100000Z-b-dead"
    [message] = run_messages(stack)
    assert message.run_id == got.run_id and parse_instant(message.fire_at) == T0 + timedelta(minutes=5)
    assert stack.runs.get("data/load", got.run_id or "") is not None


def test_a_storm_into_batches_is_bounded_by_max_runs_per_minute() -> None:
    stack = Stack(ORDERS | {"batch": {"window": "5m", "max_events": 10}}, concurrency={"max_runs_per_minute": 60})
    actions = Counter(
        stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(seconds=i * 0.005)).action
        for i in range(10_000)
    )
    assert actions["batched"] == 600 and actions["dropped"] == 9_400
    runs = {m.run_id: m for m in run_messages(stack)}
    assert len(runs) == 60
    # A refused batch is closed, so no event waits in a batch without a run.
    assert sum(len(close(stack, m)) for m in runs.values()) == 600


def test_a_batch_on_a_dag_job_or_out_of_bounds_is_a_field_error() -> None:
    dag = {"tasks": [{"name": "a", "target": {"type": "callback"}}]}
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate({"name": "j", "team": "data", "dag": dag, "triggers": [BATCHED_ORDERS]})
    assert [(e["loc"], e["type"]) for e in refused.value.errors()] == [(("triggers", 0, "batch"), "batch_on_dag")]
    for batch, field in (({"window": "16m"}, "window"), ({"max_events": 501}, "max_events")):
        with pytest.raises(ValidationError) as refused:
            JobSpec.model_validate(
                {"name": "j", "team": "data", "target": {"type": "callback"}, "triggers": [ORDERS | {"batch": batch}]}
            )
        assert refused.value.errors()[0]["loc"] == ("triggers", 0, "batch", field)


def test_a_batch_list_is_bounded_and_says_how_many_it_left_out() -> None:
    big = [
        BatchedEvent(key=f"{i:04d}", time=T0, entry={"event_id": str(i), "detail": {"pad": "x" * 900}})
        for i in range(500)
    ]
    payload = batch_payload({"kind": "event"}, big, events_ref="/teams/data/jobs/load/runs/r/events")
    assert payload["events_ref"] == "/teams/data/jobs/load/runs/r/events"
    assert payload["trigger"]["count"] == 500
    assert 0 < len(payload["events"]) < 500 and payload["omitted"] == 500 - len(payload["events"])
    assert len(json.dumps(payload["events"], separators=(",", ":")).encode()) <= MAX_BATCH_PAYLOAD_BYTES


def test_an_event_that_slips_into_a_batch_the_limit_refused_still_gets_its_run() -> None:
    stack = Stack(ORDERS | {"batch": {"window": "5m", "max_events": 1}}, concurrency={"max_runs_per_minute": 1})
    assert stack.intake.receive(stack.envelope(order_event()), now=T0).action == "batched"  # batch 1: the limit
    fingerprint = stack.envelope(order_event()).jobsched.trigger
    slipped = stack.envelope(order_event()).batched("event")
    count = stack.jobs.count_event_run

    def refuse_after_another_intake_added(job: str, *, now: Any, limit: int) -> bool:
        # Another intake found batch 2 open in the moment between its start and this refusal.
        current = stack.jobs.current_batch(job, fingerprint)
        assert current is not None and current.number == 2
        added = stack.jobs.add_to_batch(current, slipped, now=now, window=timedelta(minutes=5), max_events=1)
        assert added.status == "filled"
        return count(job, now=now, limit=limit)

    stack.jobs.count_event_run = refuse_after_another_intake_added  # type: ignore[method-assign]
    refused = stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(seconds=1))
    assert (refused.action, refused.reason) == ("dropped", "rate_limited")
    runs = {batch_of(m)["number"]: m for m in run_messages(stack)}
    assert set(runs) == {1, 2}  # batch 2 has its run: the slipped event is not lost
    assert [e.key for e in close(stack, runs[2])] == [slipped.key]
