"""The health computation itself: strip cells, nearest-rank percentiles, streaks."""

from __future__ import annotations

from datetime import timedelta

from jobsched.core.run_records import Run
from jobsched.core.runs import RunStatus
from jobsched.watch.health import job_health, percentile, worst_first
from tests.helpers import utc

NOW = utc("2027-01-10T00:00Z")


def run(minute: int, status: RunStatus, *, attempt: int = 1, late_ms: int = 0, took_s: int = 1) -> Run:
    at = NOW - timedelta(hours=1) + timedelta(minutes=minute)
    finished = status not in (RunStatus.RUNNING, RunStatus.SKIPPED, RunStatus.MISSED)
    return Run(
        job="t/j",
        run_id=f"{minute:04d}",
        team="t",
        status=status,
        attempt=attempt,
        scheduled_at=at,
        fire_at=at,
        trigger="schedule",
        spec_version=1,
        correlation_id="c",
        started_at=at if finished or status is RunStatus.RUNNING else None,
        finished_at=at + timedelta(seconds=took_s) if finished else None,
        lateness_ms=late_ms if finished or status is RunStatus.RUNNING else None,
    )


def test_percentiles_are_nearest_rank() -> None:
    assert percentile([], 0.95) is None
    assert percentile([5.0], 0.95) == 5.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50 and percentile(values, 0.95) == 95 and percentile(values, 1.0) == 100


def test_a_retried_success_skips_and_misses_show_in_the_strip_and_only_the_due_count() -> None:
    runs = [
        run(1, RunStatus.SUCCEEDED, late_ms=100, took_s=2),
        run(2, RunStatus.SUCCEEDED, attempt=2, late_ms=300, took_s=10),
        run(3, RunStatus.SKIPPED),
        run(4, RunStatus.MISSED),
        run(5, RunStatus.CANCELLED),
        run(6, RunStatus.RUNNING),
    ]
    health = job_health("t/j", list(reversed(runs)), now=NOW)
    assert health.strip == ("succeeded", "retried", "skipped", "missed", "cancelled", "running")
    assert health.success_rate == round(2 / 3, 4), "skipped and cancelled are not due to succeed; missed is"
    assert health.streak == "1 failed" and health.runs == 6
    assert health.duration_p95_s == 10 and health.lateness_p95_s == 0.3


def test_worst_first_puts_open_incidents_then_low_success_rates_first() -> None:
    fine = job_health("t/fine", [run(1, RunStatus.SUCCEEDED)], now=NOW)
    flaky = job_health("t/flaky", [run(2, RunStatus.FAILED), run(1, RunStatus.SUCCEEDED)], now=NOW)
    paged = job_health("t/paged", [run(1, RunStatus.SUCCEEDED)], now=NOW, open_incidents=["late"])
    assert [h.job for h in worst_first([fine, flaky, paged])] == ["t/paged", "t/flaky", "t/fine"]
