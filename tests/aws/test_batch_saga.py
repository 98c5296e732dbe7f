"""#51: an event joins its batch through single-item conditional writes, no transaction. A delivery that dies after
any write is completed by the event's redelivery; a close racing an add decides the event's batch; every event is
in exactly one batch's list, once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.core.event_batches import BatchedEvent, EventBatch
from jobsched.core.runs import parse_instant
from tests.aws.harness import Crash, Stack, record_operations

T0 = parse_instant("2027-03-01T10:00:00Z")
JOB, TRIGGER = "data/load", "0123456789abcdef"
WINDOW = timedelta(minutes=5)
STEPS = ("reserved", "event", "counted", "in batch")


def event(n: int) -> BatchedEvent:
    return BatchedEvent(key=f"{n:032d}", time=T0 + timedelta(seconds=n), entry={"n": n})


def at_step(store: JobsStore, step: str, then: Callable[[], None]) -> None:
    def hook(name: str) -> None:
        if name == step:
            store.after_batch_step = None
            then()

    store.after_batch_step = hook


def died_adding(store: JobsStore, step: str) -> EventBatch:
    """Batch 1 started, and an add of event 1 that died right after ``step``."""
    batch, _ = store.start_batch(JOB, TRIGGER, after=0, run_id="r1", now=T0)

    def die() -> None:
        raise Crash(step)

    at_step(store, step, die)
    with pytest.raises(Crash):
        store.add_to_batch(batch, event(1), now=T0, window=WINDOW, max_events=10)
    return batch


def listed(store: JobsStore, *numbers: int) -> list[int]:
    return [e.entry["n"] for number in numbers for e in store.batch_events(JOB, TRIGGER, number)]


@pytest.mark.parametrize("step", STEPS)
def test_a_delivery_that_died_after_any_write_is_completed_by_its_redelivery(stack: Stack, step: str) -> None:
    store, batch = stack.jobs, died_adding(stack.jobs, step)
    again = store.add_to_batch(batch, event(1), now=T0, window=WINDOW, max_events=10)
    assert again.status in ("added", "duplicate")
    assert store.add_to_batch(batch, event(1), now=T0, window=WINDOW, max_events=10).status == "duplicate"
    assert [e.entry["n"] for e in store.close_batch(JOB, TRIGGER, 1)] == [1]


@pytest.mark.parametrize("step", STEPS)
def test_a_delivery_that_died_before_its_batch_closed_lands_in_the_next_batch_once(stack: Stack, step: str) -> None:
    store = stack.jobs
    died_adding(store, step)
    first = store.close_batch(JOB, TRIGGER, 1)
    second, _ = store.start_batch(JOB, TRIGGER, after=1, run_id="r2", now=T0 + timedelta(seconds=30))
    redelivered = store.add_to_batch(second, event(1), now=T0, window=WINDOW, max_events=10)
    in_first = [e.entry["n"] for e in first]
    # Counted before it died: the first batch has it and the redelivery is a duplicate; else the second has it.
    assert (in_first, redelivered.status) in (([1], "duplicate"), ([], "added"))
    assert sorted(listed(store, 1, 2)) == [1]
    assert listed(store, 1) == in_first  # the closed batch's list never changes


@pytest.mark.parametrize("step", ("event", "counted"))
def test_a_close_racing_an_add_decides_which_batch_has_the_event(stack: Stack, step: str) -> None:
    """The worker closes the batch while an intake is between two writes of its add: the close bounces the event
    (not yet in the batch), and the intake, told closed, puts it in the next batch."""
    store = stack.jobs
    batch, _ = store.start_batch(JOB, TRIGGER, after=0, run_id="r1", now=T0)
    closed: list[list[int]] = []
    at_step(store, step, lambda: closed.append([e.entry["n"] for e in store.close_batch(JOB, TRIGGER, 1)]))
    added = store.add_to_batch(batch, event(1), now=T0, window=WINDOW, max_events=10)
    assert closed == [[]] and added.status == "closed"
    second, _ = store.start_batch(JOB, TRIGGER, after=1, run_id="r2", now=T0 + timedelta(seconds=30))
    assert store.add_to_batch(second, event(1), now=T0, window=WINDOW, max_events=10).status == "added"
    assert listed(store, 1) == [] and listed(store, 2) == [1]


def test_two_deliveries_of_one_event_at_once_are_one_entry(stack: Stack) -> None:
    store = stack.jobs
    batch, _ = store.start_batch(JOB, TRIGGER, after=0, run_id="r1", now=T0)
    answers: list[str] = []
    at_step(
        store,
        "counted",
        lambda: answers.append(store.add_to_batch(batch, event(1), now=T0, window=WINDOW, max_events=10).status),
    )
    answers.append(store.add_to_batch(batch, event(1), now=T0, window=WINDOW, max_events=10).status)
    assert sorted(answers) == ["added", "duplicate"]
    assert [e.entry["n"] for e in store.close_batch(JOB, TRIGGER, 1)] == [1]


def test_adding_an_event_is_no_transaction(stack: Stack) -> None:
    calls = record_operations(stack)
    store = stack.jobs
    batch, _ = store.start_batch(JOB, TRIGGER, after=0, run_id="r1", now=T0)
    for n in range(3):
        store.add_to_batch(batch, event(n), now=T0, window=WINDOW, max_events=10)
    store.close_batch(JOB, TRIGGER, 1)
    assert calls and not any(call.startswith("Transact") for call in calls)
