"""#51: what scripts/bench_table_move.py prints holds on a small stage: the move leaves a run's units as they were
before it, and the copier writes three units an item (mark, copy, mark copied)."""

from __future__ import annotations

from moto import mock_aws

from scripts.bench_table_move import measure


def test_a_move_costs_the_copier_three_writes_an_item_and_runs_nothing_after() -> None:
    with mock_aws():
        figures = measure(jobs=3, minutes=5)
    assert figures["after write units a run"] == figures["before write units a run"]
    assert abs(figures["after read units a run"] - figures["before read units a run"]) < 0.2
    assert figures["moving write units a run"] > figures["before write units a run"]  # first touches fence and copy
    assert 2.9 <= figures["copier write units an item"] <= 3.5
    assert figures["moved by the copier"] + figures["moved on first touch"] == figures["items before the move"]
