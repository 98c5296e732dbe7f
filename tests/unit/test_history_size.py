"""#51: a year of finished runs in the tables leaves the dispatcher's and the worker's units per run unchanged (no
hot index carries a finished run); scripts/bench_history.py prints the figures at 200,000 runs."""

from __future__ import annotations

from scripts.bench_history import measure


def test_units_per_run_do_not_grow_with_finished_runs() -> None:
    empty, full = measure(0, minutes=12), measure(30_000, minutes=12)
    assert empty.runs == full.runs >= 90
    for name in ("dispatcher_reads", "dispatcher_writes", "worker_reads", "worker_writes"):
        assert getattr(full, name) == getattr(empty, name), name
    assert empty.finished_on_index == full.finished_on_index == 0
