"""`jobsched validate` and `jobsched preview`, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobsched.cli import app as cli_module
from jobsched.cli import cli
from tests.helpers import utc

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[datetime]:
    now = utc("2027-01-01T00:00Z")
    monkeypatch.setattr(cli_module, "clock", lambda: now)
    yield now


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


class TestValidate:
    def test_examples_are_ok_one_line_each(self) -> None:
        code, output = run("validate", str(EXAMPLES))
        lines = output.strip().splitlines()
        assert code == 0
        assert len(lines) == len(list(EXAMPLES.glob("*.yaml")))
        assert all(": OK " in line for line in lines)
        assert (
            f"{EXAMPLES / 'nightly-invoices.yaml'}: OK payments/nightly-invoices (next: 2027-01-04T06:30:00Z)" in lines
        )

    def test_every_error_as_file_path_message(self, tmp_path: Path) -> None:
        bad = tmp_path / "bad.yaml"
        bad.write_text(
            "name: Bad_Name\nteam: payments\nschedule: {expression: '61 * * * *', timezone: Mars/Base}\n"
            "target: {type: lambda}\npriority: urgent\n"
        )
        good = tmp_path / "good.yaml"
        good.write_text("name: ok\nteam: payments\ntarget: {type: callback}\n")
        code, output = run("validate", str(tmp_path))
        assert code == 1
        lines = output.strip().splitlines()
        assert f"{good}: OK payments/ok (no schedule: runs when triggered)" in lines
        errors = [line for line in lines if line.startswith(f"{bad}: ")]
        paths = [line.split(": ")[1] for line in errors]
        assert paths == [
            "name",
            "schedule.expression",
            "schedule.timezone",
            "target.function",
            "priority",
        ]

    def test_duplicate_jobs_across_files(self, tmp_path: Path) -> None:
        for name in ("a.yaml", "b.yaml"):
            (tmp_path / name).write_text("name: same\nteam: t\ntarget: {type: callback}\n")
        code, output = run("validate", str(tmp_path))
        assert code == 1 and "job t/same is also defined in" in output

    def test_missing_file_and_syntax_error(self, tmp_path: Path) -> None:
        broken = tmp_path / "broken.yaml"
        broken.write_text("name: [x\n")
        code, output = run("validate", str(broken), str(tmp_path / "nope.yaml"))
        assert code == 1
        assert f"{broken}: line " in output and f"{tmp_path / 'nope.yaml'}: no such file" in output

    def test_empty_directory(self, tmp_path: Path) -> None:
        code, output = run("validate", str(tmp_path))
        assert code == 1 and "no job files" in output


class TestPreview:
    def test_text_lines_utc_and_local(self) -> None:
        code, output = run(
            "preview",
            "30 1 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2027-11-06T12:00:00Z",
            "--count",
            "2",
        )
        assert code == 0
        lines = [line for line in output.splitlines() if not line.startswith("#")]
        assert lines[0] == "2027-11-07T05:30:00Z  Sun 2027-11-07 01:30:00 EDT"
        assert lines[1].startswith("  skipped 2027-11-07T06:30:00Z  Sun 2027-11-07 01:30:00 EST  01:30 occurs twice")
        assert lines[2] == "2027-11-08T06:30:00Z  Mon 2027-11-08 01:30:00 EST"

    def test_json(self) -> None:
        code, output = run(
            "preview",
            "cron(30 1 * * ? *)",
            "--tz",
            "America/New_York",
            "--after",
            "2027-11-06T12:00:00Z",
            "--count",
            "3",
            "--json",
        )
        assert code == 0
        entries = json.loads(output)
        assert [e["utc"] for e in entries] == [
            "2027-11-07T05:30:00Z",
            "2027-11-08T06:30:00Z",
            "2027-11-09T06:30:00Z",
        ]
        assert entries[0]["local"] == "2027-11-07T01:30:00-04:00"
        assert entries[1]["skipped"][0]["utc"] == "2027-11-07T06:30:00Z"

    def test_strictly_after(self) -> None:
        _code, output = run("preview", "0 * * * *", "--after", "2027-01-01T05:00:00Z", "--count", "1", "--json")
        assert json.loads(output)[0]["utc"] == "2027-01-01T06:00:00Z"

    def test_shifted_instant_says_why(self) -> None:
        _code, output = run(
            "preview",
            "30 2 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2027-03-14T00:00:00Z",
            "--count",
            "1",
            "--json",
        )
        [entry] = json.loads(output)
        assert entry["utc"] == "2027-03-14T07:00:00Z" and "DST gap" in entry["reason"]
        assert entry["moved_from"] == ["2027-03-14T02:30:00"]

    def test_default_after_is_now(self, fixed_clock: datetime) -> None:
        _code, output = run("preview", "@daily", "--count", "1", "--json")
        assert json.loads(output)[0]["utc"] == "2027-01-02T00:00:00Z"

    def test_naive_after_is_read_in_the_schedule_zone(self) -> None:
        _code, output = run(
            "preview",
            "0 9 * * *",
            "--tz",
            "Europe/Berlin",
            "--after",
            "2027-01-05T09:00",
            "--count",
            "1",
            "--json",
        )
        assert json.loads(output)[0]["utc"] == "2027-01-06T08:00:00Z"

    def test_file(self) -> None:
        code, output = run(
            "preview",
            "--file",
            str(EXAMPLES / "nightly-invoices.yaml"),
            "--after",
            "2027-12-22T12:00:00Z",
            "--count",
            "2",
        )
        assert code == 0
        assert "2027-12-24 is an excluded date" in output
        assert "2027-12-25 (Saturday) is not a business day" in output
        assert output.splitlines()[-1].startswith("2027-12-27T06:30:00Z")

    def test_bad_expression_exits_1_with_the_reason(self) -> None:
        code, output = run("preview", "cron(0 0 * * * *)")
        assert code == 1 and "EXPRESSION: cron(0 0 * * * *): AWS cron needs '?'" in output

    def test_bad_zone(self) -> None:
        code, output = run("preview", "@daily", "--tz", "Europe/Pariss")
        assert code == 1 and "--tz: unknown time zone 'Europe/Pariss'" in output and "Europe/Paris" in output

    def test_needs_expression_or_file(self) -> None:
        code, output = run("preview")
        assert code == 2 and "give an EXPRESSION or --file" in output

    def test_fewer_than_asked(self) -> None:
        code, output = run("preview", "at(2027-06-01T09:00:00)", "--count", "3", "--json")
        assert code == 0 and len(json.loads(output.split("\nonly")[0])) == 1


def test_console_script_is_installed() -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("jobsched")),
            "preview",
            "@hourly",
            "--after",
            "2027-01-01T00:00:00Z",
            "--count",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.startswith("2027-01-01T01:00:00Z")


def test_local_alarms_lists_alarms_worst_first(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from jobsched.cli import cli

    rows = [
        {"alarm": "jobsched-local-SloFastBurn", "state": "OK", "since": 1796090000.0, "reason": "0 of 1 breaching"},
        {"alarm": "jobsched-local-DlqNormalNotEmpty", "state": "ALARM", "since": 1796090100.0, "reason": "1 of 1"},
    ]
    (tmp_path / "alarms.json").write_text(json.dumps(rows))
    result = CliRunner().invoke(cli, ["local", "alarms", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0
    first, second = result.stdout.splitlines()
    assert first.split()[:2] == ["ALARM", "jobsched-local-DlqNormalNotEmpty"] and "since 01:55:00" in first
    assert second.split()[:2] == ["OK", "jobsched-local-SloFastBurn"]
    empty = CliRunner().invoke(cli, ["local", "alarms", "--state-dir", str(tmp_path / "none")])
    assert "no alarms evaluated yet" in empty.output


@pytest.mark.parametrize(("given", "seconds"), [("5s", 5.0), ("1m", 60.0), ("0.5", 0.5), ("2", 2.0)])
def test_the_tick_takes_a_duration_or_seconds(given: str, seconds: float) -> None:
    from jobsched.cli.local import TickInterval

    assert TickInterval().convert(given, None, None) == seconds


@pytest.mark.parametrize("given", ["soon", "0s", "-1", "2h"])
def test_a_tick_that_is_no_duration_or_out_of_range_is_a_usage_error(given: str) -> None:
    code, output = run("local", "up", "--tick", given)
    assert code == 2 and "--tick" in output


def test_local_up_says_what_no_examples_leaves_out() -> None:
    code, output = run("local", "up", "--help")
    assert code == 0 and "example functions" in output and "example jobs" in output
