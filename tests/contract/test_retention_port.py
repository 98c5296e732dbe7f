"""ExpiredItemsPort (#51: retention without TTL): both adapters page through the hot tables, delete what has
expired (never an item whose expiry moved on meanwhile), and keep where a pass has got to."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.retention import ExpiredItems
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.retention import MemoryExpiredItems
from jobsched.core.names import JobsKeys, RunsKeys
from jobsched.core.runs import parse_instant
from jobsched.ports import ExpiredItemsPort, SweepState
from jobsched.watch.retention import Sweeper
from tests.contract.conftest import Stores
from tests.contract.test_slo_ledger_port import put_raw

NOW = parse_instant("2027-03-01T10:00:00Z")
PAST, FUTURE = int((NOW - timedelta(days=1)).timestamp()), int((NOW + timedelta(days=1)).timestamp())


def expired_items(stores: Stores) -> ExpiredItemsPort:
    if isinstance(stores.jobs, MemoryJobs):
        assert isinstance(stores.runs.store, MemoryRuns)  # type: ignore[attr-defined]
        return MemoryExpiredItems(stores.jobs.table, stores.runs.store.table)  # type: ignore[attr-defined]
    assert isinstance(stores.jobs, JobsStore)
    runs = stores.runs.store  # type: ignore[attr-defined]
    assert isinstance(runs, RunsStore)
    return ExpiredItems(stores.jobs.table, runs.table, stores.jobs.db)


def put_run(stores: Stores, run_id: str, expires: int) -> None:
    values: dict[str, Any] = {RunsKeys.PK: "data/load", RunsKeys.SK: run_id, JobsKeys.TTL: expires}
    runs = stores.runs.store  # type: ignore[attr-defined]
    if isinstance(runs, MemoryRuns):
        runs.table.put(values)
    else:
        from jobsched.adapters.aws.dynamo import to_item

        runs.db.put_item(TableName=runs.table, Item=to_item(values))


def test_a_sweep_deletes_expired_items_of_both_tables_and_nothing_else(stores: Stores) -> None:
    for number in range(30):
        put_run(stores, f"2027{number:04d}", PAST if number % 3 else FUTURE)
    put_raw(stores, "data/load", "BATCHED#old", {JobsKeys.TTL: PAST})
    put_raw(stores, "data/load", "BATCHED#new", {JobsKeys.TTL: FUTURE})
    put_raw(stores, "data/load", "AUDIT#kept", {})  # no expiry: kept
    store = expired_items(stores)
    sweeper = Sweeper(store, pages=1, page_items=7, pass_every=timedelta(0))
    first = sweeper.sweep(NOW)
    assert first.scanned == 3 + 7 and first.passes_ended == ["Jobs"]  # bounded: a page of 7 a table
    total = first.deleted
    for _ in range(10):
        total += sweeper.sweep(NOW).deleted
    assert total == 20 + 1
    left = store.expired_page("Runs", cursor=None, now=NOW + timedelta(days=2), limit=100)
    assert len(left.keys) == 10  # the unexpired runs, expired by then
    assert store.expired_page("Runs", cursor=None, now=NOW, limit=100).keys == []


def test_an_item_whose_expiry_moved_on_is_not_deleted(stores: Stores) -> None:
    put_run(stores, "20270001", PAST)
    store = expired_items(stores)
    page = store.expired_page("Runs", cursor=None, now=NOW, limit=10)
    assert [key[RunsKeys.SK] for key in page.keys] == ["20270001"]
    put_run(stores, "20270001", FUTURE)  # rewritten meanwhile (kept longer)
    assert store.delete_expired("Runs", page.keys, now=NOW) == 0
    assert store.expired_page("Runs", cursor=None, now=NOW + timedelta(days=2), limit=10).keys


def test_where_a_pass_has_got_to_is_kept(stores: Stores) -> None:
    store = expired_items(stores)
    assert store.sweep_state("Runs") == SweepState()
    kept = SweepState('{"job": "a", "run_id": "b"}', NOW)
    store.save_sweep_state("Runs", kept)
    assert store.sweep_state("Runs") == kept
    store.save_sweep_state("Runs", SweepState(None, NOW))
    assert store.sweep_state("Runs") == SweepState(None, NOW)


def test_a_new_pass_starts_a_pass_interval_after_the_last(stores: Stores) -> None:
    put_run(stores, "20270001", PAST)
    store = expired_items(stores)
    sweeper = Sweeper(store, pages=1, page_items=100, pass_every=timedelta(days=7))
    assert sweeper.sweep(NOW).deleted == 1
    put_run(stores, "20270002", PAST)
    assert sweeper.sweep(NOW + timedelta(days=6)).scanned == 0  # between passes: nothing read
    assert sweeper.sweep(NOW + timedelta(days=7)).deleted == 1


def test_a_pass_still_going_when_the_next_should_start_reads_faster(stores: Stores) -> None:
    for number in range(40):
        put_run(stores, f"2027{number:04d}", FUTURE)
    store = expired_items(stores)
    sweeper = Sweeper(store, pages=1, page_items=5, pass_every=timedelta(days=7))
    assert sweeper.sweep(NOW).scanned == 5  # a page of the runs (the Jobs table is empty: its pass ends at once)
    on_time = sweeper.sweep(NOW + timedelta(days=1)).scanned
    late = sweeper.sweep(NOW + timedelta(days=8)).scanned
    assert on_time == 5  # the Jobs table is between passes
    # The Runs table's pass is late: four pages a call (CATCH_UP); the Jobs table's new pass reads its few items.
    assert 4 * 5 <= late <= 4 * 5 + 5
