"""Every schedule's cost is bounded where it enters: the engine's work between fires, and PUT's year simulation."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.spec import Schedule
from jobsched.schedule.cost_check import schedule_cost_problem
from jobsched.schedule.engine import MAX_STEPS_BETWEEN_FIRES, compile_schedule
from jobsched.schedule.steps import ScheduleTooExpensive
from tests.helpers import utc

NOW = utc("2026-11-30T12:00:00Z")
DECEMBER_BLACKOUT = {"expression": "* * * * *", "blackouts": [{"cron": "* * 1 12 *", "duration": "31d"}]}


def compiled(document: dict[str, Any]) -> Any:
    return compile_schedule(Schedule.model_validate(document), hash_key="noisy/job", anchor=NOW)


def test_the_reported_blackout_stops_within_the_step_limit_instead_of_walking_for_minutes() -> None:
    started = time.perf_counter()
    with pytest.raises(ScheduleTooExpensive, match=f"more than {MAX_STEPS_BETWEEN_FIRES} candidate instants"):
        compiled(DECEMBER_BLACKOUT).next_fires(utc("2026-11-30T23:58:00Z"), 3)
    assert time.perf_counter() - started < 10, "bounded (it used to take ~1,600 s)"


def test_a_short_blackout_over_a_minutely_job_is_cheap() -> None:
    schedule = compiled({"expression": "* * * * *", "blackouts": [{"cron": "0 22 * * 5", "duration": "2d"}]})
    started = time.perf_counter()
    fires = schedule.next_fires(utc("2026-12-04T21:59:00Z"), 2)  # a Friday: the window opens at 22:00
    assert [o.at for o in fires] == [utc("2026-12-06T22:00:00Z"), utc("2026-12-06T22:01:00Z")]
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize(
    "document",
    [
        DECEMBER_BLACKOUT,
        {"expression": "* * * * *", "blackouts": [{"start": "2027-01-01T00:00:00Z", "end": "2027-01-30T00:00:00Z"}]},
        {
            "expression": "0 * * * *",
            "calendar": {"exclude_dates": [], "business_days_only": True},
            "blackouts": [{"cron": "0 0 * * 1", "duration": "31d"}],
        },
        {"expression": "0 0 * * 6,0", "calendar": {"business_days_only": True}},  # excludes every instant
    ],
)
def test_put_refuses_schedules_whose_next_fire_costs_unbounded_work(document: dict[str, Any]) -> None:
    started = time.perf_counter()
    problem = schedule_cost_problem(Schedule.model_validate(document), hash_key="noisy/job", now=NOW)
    assert problem is not None and ("candidate instants" in problem or "takes longer" in problem)
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize(
    "document",
    [
        {"expression": "* * * * *"},
        {"expression": "*/5 * * * *", "blackouts": [{"cron": "0 22 * * 5", "duration": "2d"}]},
        {"expression": "0 9 * * *", "calendar": {"skip_holidays": "US", "business_days_only": True}},
        {"expression": "at(2999-01-01T00:00:00)"},
        {"expression": "0 0 29 2 *"},
        {"expression": "rate(7 days)", "start_at": "2026-01-01T00:00:00Z"},
    ],
)
def test_ordinary_schedules_pass_the_simulation(document: dict[str, Any]) -> None:
    assert schedule_cost_problem(Schedule.model_validate(document), hash_key="team/job", now=NOW) is None


def test_the_simulation_has_a_cpu_deadline() -> None:
    ticks = iter(range(1000))
    problem = schedule_cost_problem(
        Schedule.model_validate({"expression": "* * * * *"}),
        hash_key="team/job",
        now=NOW,
        deadline_seconds=5,
        monotonic=lambda: float(next(ticks)),
    )
    assert problem == "evaluating a year of this schedule takes longer than 5 s of CPU"
    assert timedelta(0) is not None
