"""Catch-up after downtime never floods; jitter is stable and keeps instants in order."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import timedelta

import pytest

from jobsched.schedule.catchup import LATE_GRACE, DuePlan, plan_due
from jobsched.schedule.engine import Occurrence
from tests.helpers import compiled, utc

MINUTE = timedelta(minutes=1)


def plan(
    policy: str,
    *,
    window: str = "6h",
    max_runs: int = 10,
    expression: str = "*/15 * * * *",
    last: str = "2027-01-01T00:00Z",
    now: str = "2027-01-01T03:00:30Z",
) -> DuePlan:
    schedule = compiled(expression, catchup={"policy": policy, "window": window, "max_runs": max_runs})
    return plan_due(schedule, last=utc(last), now=utc(now), lookahead=MINUTE)


def times(occurrences: Iterable[Occurrence]) -> list[str]:
    return [f"{o.at:%H:%M}" for o in occurrences]


class TestCatchupAfterAThreeHourOutage:
    """Last fired 00:00, back at 03:00:30: 00:15 ... 02:45 were missed, 03:00 is just due."""

    def test_none_runs_only_what_is_due_now(self) -> None:
        decided = plan("none")
        assert times(decided.due) == ["03:00"]
        assert len(decided.missed) == 11
        assert all("policy is none" in reason for _, reason in decided.missed)

    def test_latest_runs_the_most_recent_missed_instant_once(self) -> None:
        decided = plan("latest")
        assert times(decided.due) == ["02:45", "03:00"]
        assert (
            times(o for o, _ in decided.missed) == [f"{h:02d}:{m:02d}" for h in range(3) for m in (0, 15, 30, 45)][1:-1]
        )

    def test_all_is_bounded_by_max_runs_keeping_the_most_recent(self) -> None:
        decided = plan("all", max_runs=5)
        assert times(decided.due) == ["01:45", "02:00", "02:15", "02:30", "02:45", "03:00"]
        assert len(decided.missed) == 6 and all("at most 5" in reason for _, reason in decided.missed)

    def test_all_within_cap_runs_everything_in_order(self) -> None:
        decided = plan("all", max_runs=100)
        assert len(decided.due) == 12 and not decided.missed
        assert [o.at for o in decided.due] == sorted(o.at for o in decided.due)

    def test_window_bounds_how_far_back_anything_is_run(self) -> None:
        decided = plan("all", window="1h", max_runs=100)
        assert times(decided.due) == ["02:15", "02:30", "02:45", "03:00"]
        assert decided.missed_before == utc("2027-01-01T02:00:30Z")

    def test_a_week_long_outage_of_a_minutely_job_stays_bounded(self) -> None:
        decided = plan(
            "all",
            window="1h",
            max_runs=10,
            expression="* * * * *",
            last="2027-01-01T00:00Z",
            now="2027-01-08T00:00:00Z",
        )
        # Ten caught up (23:48-23:57), then within the grace (23:58, 23:59), now and the lookahead.
        assert times(decided.due) == [f"23:{m}" for m in range(48, 60)] + ["00:00", "00:01"]
        assert len(decided.missed) == 47  # 23:01-23:57 less the ten run: only the window is examined
        assert decided.missed_before == utc("2027-01-07T23:00Z")

    def test_on_time_instants_and_lookahead(self) -> None:
        decided = plan("latest", last="2027-01-01T02:59:00Z", now="2027-01-01T03:14:30Z")
        assert times(decided.due) == ["03:00", "03:15"]
        assert decided.cursor == utc("2027-01-01T03:15:30Z")

    def test_late_tick_within_grace_is_not_a_miss(self) -> None:
        decided = plan("none", last="2027-01-01T02:59:00Z", now="2027-01-01T03:01:00Z")
        assert times(decided.due) == ["03:00"] and not decided.missed
        assert timedelta(minutes=1) <= LATE_GRACE

    def test_planning_twice_from_the_cursor_never_repeats_an_instant(self) -> None:
        schedule = compiled("*/5 * * * *", catchup={"policy": "all", "max_runs": 1000})
        last = utc("2027-01-01T00:00Z")
        seen: list[str] = []
        for tick in range(1, 40):
            decided = plan_due(schedule, last=last, now=utc("2027-01-01T00:00Z") + tick * MINUTE, lookahead=MINUTE)
            seen += [o.at.isoformat() for o in decided.due]
            last = decided.cursor
        assert len(seen) == len(set(seen)) == 8


class TestJitter:
    def test_stable_for_the_same_job_and_instant(self) -> None:
        first = compiled("0 * * * *", jitter="10m", key="a/b").next_fires(utc("2027-01-01T00:00Z"), 24)
        second = compiled("0 * * * *", jitter="10m", key="a/b").next_fires(utc("2027-01-01T00:00Z"), 24)
        assert [f.fire_at for f in first] == [f.fire_at for f in second]

    def test_within_bounds_and_spread(self) -> None:
        fires = compiled("0 * * * *", jitter="10m", key="a/b").next_fires(utc("2027-01-01T00:00Z"), 200)
        offsets = [(f.fire_at - f.at).total_seconds() for f in fires]
        assert all(0 <= offset <= 600 for offset in offsets)
        assert len(set(offsets)) > 100

    def test_never_reaches_the_next_instant(self) -> None:
        fires = compiled("*/2 * * * *", jitter="1h", key="a/b").next_fires(utc("2027-01-01T00:00Z"), 100)
        assert all(f.fire_at < g.at for f, g in itertools.pairwise(fires))
        assert [f.fire_at for f in fires] == sorted(f.fire_at for f in fires)

    def test_identity_is_the_nominal_instant(self) -> None:
        fires = compiled("0 * * * *", jitter="10m").next_fires(utc("2027-01-01T00:00Z"), 3)
        assert [f"{f.at:%H:%M:%S}" for f in fires] == ["01:00:00", "02:00:00", "03:00:00"]


def test_engine_rejects_naive_datetimes() -> None:
    from datetime import datetime

    with pytest.raises(ValueError, match="timezone-aware"):
        compiled("* * * * *").next_fires(datetime(2027, 1, 1), 1)  # noqa: DTZ001


def test_rate_without_anchor_is_refused() -> None:
    with pytest.raises(ValueError, match="needs start_at or an anchor"):
        compiled("rate(5 minutes)")


def test_jitter_does_not_depend_on_how_far_ahead_one_looks() -> None:
    """The dispatcher asks for a short window, preview for a long one: same fire_at for each instant."""
    schedule = compiled("*/2 * * * *", jitter="1h", key="a/b")
    far = {f.at: f.fire_at for f in schedule.next_fires(utc("2027-01-01T00:00Z"), 30)}
    for minutes in range(1, 50, 7):
        until = utc("2027-01-01T00:00Z") + timedelta(minutes=minutes)
        for fire in schedule.fires(utc("2027-01-01T00:00Z"), until=until):
            assert fire.fire_at == far[fire.at], (minutes, fire.at)


def test_sqs_delays_round_up_so_nothing_fires_early() -> None:
    from jobsched.ports import delay_seconds

    assert [delay_seconds(timedelta(seconds=s)) for s in (-5, 0, 0.2, 3.999, 4, 899.5, 5000)] == [
        0,
        0,
        1,
        4,
        4,
        900,
        900,
    ]
