"""#50: the worker records each attempt's usage on its job's item of the day (one write an attempt, whatever its
outcome); `GET /teams/{team}/cost` and `jobsched cost` price the month from those items, runs and attempts apart,
another team's usage never in it."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.core.usage import TARGET_FUNCTION_REQUESTS, WRITE_UNITS
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack


def every_minute(name: str, team: str, function: str) -> dict[str, Any]:
    return {
        "name": name,
        "team": team,
        "schedule": {"expression": "* * * * *"},
        "target": {"type": "lambda", "function": function},
        "retry": {"max_attempts": 3, "backoff": {"initial": "10s", "max": "10s", "jitter": "none"}},
    }


def fails_first_attempts(event: dict[str, Any]) -> Any:
    if event["jobsched"]["attempt"] == 1:
        raise RuntimeError("first attempts fail")
    return {"ok": True}


def test_each_attempt_is_metered_and_the_month_is_priced(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.lambdas.functions["flaky"] = fails_first_attempts
    clock.set("2027-01-04T08:59:30Z")
    stack.register(every_minute("sync", "ops", "echo"))
    stack.register(every_minute("flaky", "ops", "flaky"))
    stack.register(every_minute("other", "data", "echo"))
    stack.minutes(5)
    clock.advance(timedelta(seconds=20))
    stack.pump()  # the last run's retry, ten seconds after its first attempt failed
    days = {day.job: day for day in stack.jobs.usage_between("ops", date(2027, 1, 1), date(2027, 1, 31))}
    assert set(days) == {"ops/sync", "ops/flaky"}
    sync, flaky_day = days["ops/sync"].counters, days["ops/flaky"].counters
    assert sync["runs"] == sync["attempts"] == sync[TARGET_FUNCTION_REQUESTS] == 5
    assert flaky_day["runs"] == 5 and flaky_day["attempts"] == 10 and flaky_day[TARGET_FUNCTION_REQUESTS] == 10
    assert sync[WRITE_UNITS] == pytest.approx(5 * 5.6)
    assert days["ops/sync"].tier == "important" and days["ops/sync"].target_type == "lambda"

    api = ApiClient(stack)
    bill = api.call("GET", "/teams/ops/cost?month=2027-01", principal=team_role("ops")).body
    lines = {line["key"]: line for line in bill["lines"]}
    assert set(lines) == {"ops/sync", "ops/flaky"} and lines["ops/flaky"]["attempts"] == 10
    assert lines["ops/flaky"]["total_usd"] > lines["ops/sync"]["total_usd"] > 0  # twice the attempts
    assert bill["prices"] == "us-east-1 list prices of 2026-12-01"
    refused = api.call("GET", "/teams/data/cost?month=2027-01", principal=team_role("ops"))
    assert refused.status == 403
    assert api.call("GET", "/teams/ops/cost?month=2027-13", principal=team_role("ops")).status == 422

    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))
    printed = CliRunner().invoke(cli, ["cost", "ops", "--month", "2027-01", "--by", "target"])
    assert printed.exit_code == 0, printed.output
    assert printed.output.startswith("ops 2027-01: $") and "lambda" in printed.output and "15" in printed.output


def test_a_runs_end_writes_its_usage_and_its_slo_count_in_one_write(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#51: the ending attempt's usage waits for the run's end and goes with its SLO count, one write a run; an
    attempt that retries writes its usage alone (its run has not ended), so nothing is counted twice or lost."""
    stack.subscribe_as_deployed()  # the SLO ledger, as deployed
    writes: list[tuple[str, bool]] = []
    real_add = type(stack.jobs).add_usage

    def add_usage(self: Any, team: str, job: str, day: date, counters: dict[str, float], **rest: Any) -> None:
        writes.append((job, rest.get("count") is not None))
        real_add(self, team, job, day, counters, **rest)

    monkeypatch.setattr(type(stack.jobs), "add_usage", add_usage)

    stack.lambdas.functions["flaky"] = fails_first_attempts
    clock.set("2027-01-04T08:59:30Z")
    stack.register(every_minute("sync", "ops", "echo"))
    stack.register(every_minute("flaky", "ops", "flaky"))
    stack.minutes(3)
    clock.advance(timedelta(seconds=20))
    stack.pump()
    assert writes.count(("ops/sync", True)) == 3 and ("ops/sync", False) not in writes  # one write a run
    assert writes.count(("ops/flaky", False)) == 3 and writes.count(("ops/flaky", True)) == 3  # retry, then end
    days = {day.job: day for day in stack.jobs.usage_between("ops", date(2027, 1, 4), date(2027, 1, 4))}
    assert days["ops/sync"].counters["runs"] == 3 and days["ops/flaky"].counters["attempts"] == 6
    (slo_day,) = stack.jobs.slo_days("ops", "important", date(2027, 1, 4), date(2027, 1, 4))
    assert slo_day.ended == 6 and slo_day.bad == 0
