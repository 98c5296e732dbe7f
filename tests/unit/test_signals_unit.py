"""jobsched.watch.signals.emit with zero counts turned off (an idle non-prod stage pays for no custom metric)."""

from __future__ import annotations

import pytest

from jobsched.core.names import Env
from jobsched.watch import signals


def test_zero_counts_are_not_published_when_turned_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str, float]] = []

    def sink(name: str, value: float, dimensions: dict[str, str]) -> None:
        seen.append((name, value))

    signals.add_sink(sink)
    try:
        monkeypatch.setenv(Env.ZERO_METRICS, "off")
        signals.emit("DueJobs", 0)
        signals.emit("FireLatenessSeconds", 0.0, priority="normal")  # a measurement, not a count: kept
        signals.emit("DueJobs", 3)
        monkeypatch.setenv(Env.ZERO_METRICS, "on")
        signals.emit("MissedInstants", 0)
    finally:
        signals.remove_sink(sink)
    printed = capsys.readouterr().out
    assert seen == [("FireLatenessSeconds", 0.0), ("DueJobs", 3), ("MissedInstants", 0)]
    assert printed.count('"DueJobs":[3.0]') == 1 and '"DueJobs":[0.0]' not in printed
