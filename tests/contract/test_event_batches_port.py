"""EventBatchesPort: moto's DynamoDB (transactions, conditions) and the memory table agree."""

from __future__ import annotations

from datetime import timedelta

from jobsched.core.event_batches import BatchedEvent
from jobsched.core.runs import parse_instant
from tests.contract.conftest import Stores

T0 = parse_instant("2027-03-01T10:00:00Z")
JOB, TRIGGER = "data/load", "0123456789abcdef"
WINDOW = timedelta(minutes=5)


def event(n: int, at: int = 0) -> BatchedEvent:
    return BatchedEvent(key=f"{n:032d}", time=T0 + timedelta(seconds=at), entry={"event_id": str(n), "n": n})


def test_a_batch_takes_events_once_each_until_full_then_says_closed(stores: Stores) -> None:
    jobs = stores.jobs
    assert jobs.current_batch(JOB, TRIGGER) is None
    batch, replaced = jobs.start_batch(JOB, TRIGGER, after=0, run_id="r1", now=T0)
    assert (batch.number, batch.run_id, batch.opened_at, batch.run_sent, replaced) == (1, "r1", T0, False, None)
    add = [
        jobs.add_to_batch(batch, e, now=T0, window=WINDOW, max_events=3).status
        for e in (event(1), event(1), event(2), event(3), event(4))
    ]
    assert add == ["added", "duplicate", "added", "filled", "closed"]
    current = jobs.current_batch(JOB, TRIGGER)
    assert current is not None and (current.number, current.count) == (1, 3)
    assert [e.entry["n"] for e in jobs.close_batch(JOB, TRIGGER, 1)] == [1, 2, 3]


def test_a_batch_past_its_window_or_closed_takes_nothing(stores: Stores) -> None:
    jobs = stores.jobs
    batch, _ = jobs.start_batch(JOB, TRIGGER, after=0, run_id="r1", now=T0)
    late = T0 + WINDOW + timedelta(seconds=1)
    assert jobs.add_to_batch(batch, event(1), now=late, window=WINDOW, max_events=10).status == "closed"
    assert jobs.add_to_batch(batch, event(2, at=1), now=T0, window=WINDOW, max_events=10).status == "added"
    assert [e.key for e in jobs.close_batch(JOB, TRIGGER, 1)] == [event(2).key]
    assert jobs.add_to_batch(batch, event(3), now=T0, window=WINDOW, max_events=10).status == "closed"
    assert len(jobs.close_batch(JOB, TRIGGER, 1)) == 1  # closing again: the same list


def test_starting_the_next_batch_once_returns_the_replaced_one(stores: Stores) -> None:
    jobs = stores.jobs
    first, _ = jobs.start_batch(JOB, TRIGGER, after=0, run_id="r1", now=T0)
    jobs.add_to_batch(first, event(1), now=T0, window=WINDOW, max_events=1)
    jobs.mark_batch_sent(first)
    later = T0 + timedelta(seconds=30)
    second, replaced = jobs.start_batch(JOB, TRIGGER, after=1, run_id="r2", now=later)
    assert (second.number, second.run_id, second.opened_at) == (2, "r2", later)
    assert replaced is not None and (replaced.number, replaced.run_sent, replaced.count) == (1, True, 1)
    # A second caller that also found batch 1 full: nothing changes, it is told the current batch.
    again, none = jobs.start_batch(JOB, TRIGGER, after=1, run_id="r2-other", now=later)
    assert (again.number, again.run_id, none) == (2, "r2", None)
    again, none = jobs.start_batch(JOB, TRIGGER, after=0, run_id="r1-other", now=later)
    assert (again.number, none) == (2, None)
    # An event batched before is a duplicate in the next batch too; the old batch's list is unchanged.
    assert jobs.add_to_batch(second, event(1), now=later, window=WINDOW, max_events=5).status == "duplicate"
    assert jobs.add_to_batch(second, event(2), now=later, window=WINDOW, max_events=5).status == "added"
    assert [e.entry["n"] for e in jobs.close_batch(JOB, TRIGGER, 1)] == [1]
    assert [e.entry["n"] for e in jobs.close_batch(JOB, TRIGGER, 2)] == [2]


def test_marking_a_batch_sent_is_seen_by_the_next_add(stores: Stores) -> None:
    jobs = stores.jobs
    batch, _ = jobs.start_batch(JOB, TRIGGER, after=0, run_id="r1", now=T0)
    assert jobs.add_to_batch(batch, event(1), now=T0, window=WINDOW, max_events=5).run_sent is False
    jobs.mark_batch_sent(batch)
    assert jobs.add_to_batch(batch, event(2), now=T0, window=WINDOW, max_events=5).run_sent is True
