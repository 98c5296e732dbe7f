"""jobsched simulate (#17): every instant in a range, no cap; reasons, DST events and the busiest minutes."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.core.spec import JobSpec
from jobsched.planning.simulate import simulate
from tests.helpers import utc


def spec(expression: str, name: str = "job", **schedule: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": name,
            "team": "ops",
            "schedule": {"expression": expression, **schedule},
            "target": {"type": "callback"},
        }
    )


def test_a_year_of_a_fifteen_minute_job_is_every_instant_without_a_cap() -> None:
    result = simulate([spec("*/15 * * * *")], start=utc("2027-01-01T00:00:00Z"), end=utc("2028-01-01T00:00:00Z"))
    assert result.fires == 35_040 and result.jobs[0].fires == 35_040


def test_skips_moves_and_dst_events_are_counted_by_reason() -> None:
    new_york = spec("30 2 * * *", "gap", timezone="America/New_York")
    berlin = spec("0 9 * * *", "weekdays", timezone="Europe/Berlin", calendar={"business_days_only": True})
    blackout = spec("0 * * * *", "blackout", blackouts=[{"cron": "0 0 1 * *", "duration": "2h", "action": "defer"}])
    result = simulate([new_york, berlin, blackout], start=utc("2027-03-01T00:00:00Z"), end=utc("2027-04-01T00:00:00Z"))
    gap, weekdays, deferred = result.jobs
    assert gap.fires == 31 and gap.moved == {"dst gap": 1} and gap.dst_events[0].startswith("2027-03-14 02:30")
    assert weekdays.skipped["not a business day"] == 8 and weekdays.fires == 23
    assert deferred.skipped["blackout"] >= 1 and deferred.moved["blackout"] >= 1


def test_the_busiest_minutes_across_jobs() -> None:
    jobs = [spec("0 9 * * *", f"j{index}") for index in range(3)] + [spec("5 9 * * *", "other")]
    result = simulate(jobs, start=utc("2027-01-04T00:00:00Z"), end=utc("2027-01-05T00:00:00Z"))
    assert result.busiest(2) == [(utc("2027-01-04T09:00:00Z"), 3), (utc("2027-01-04T09:05:00Z"), 1)]


def test_the_command_prints_the_summary_and_streams_every_fire(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec("0 * * * *").model_dump(mode="json", exclude_none=True)))
    args = ["simulate", str(tmp_path), "--from", "2027-01-04T00:00:00Z", "--to", "2027-01-05T00:00:00Z"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0 and "24 fires" in result.output and "busiest minutes" in result.output
    streamed = CliRunner().invoke(cli, [*args, "--fires"])
    lines = [json.loads(line) for line in streamed.output.splitlines()]
    assert len([line for line in lines if "at" in line]) == 24 and lines[-1]["fires"] == 24
    summary = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)
    assert summary["jobs"][0] == {"job": "ops/job", "fires": 24, "skipped": {}, "moved": {}, "dst_events": []}
    backwards = CliRunner().invoke(
        cli, ["simulate", str(tmp_path), "--from", "2027-01-05T00:00Z", "--to", "2027-01-04T00:00Z"]
    )
    assert backwards.exit_code == 2
