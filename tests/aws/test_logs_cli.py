"""jobsched logs through the API: the run's lines in order, --follow until it ends, 404 for no run."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import logs as cli_logs
from jobsched.cli import remote as cli_remote
from jobsched.core.records import LogLine
from jobsched.pipeline.ends import AttemptRef, Reported
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack


class GrowingLogs:
    """A run's lines as a log store shows them: more appear while the run goes on."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.calls = 0
        self.asked: list[tuple[str, str]] = []

    def lines(self, job: str, run_id: str, *, since: datetime, until: datetime, limit: int) -> list[LogLine]:
        self.asked.append((job, run_id))
        self.calls += 1
        shown = [
            LogLine(self.start, "jobsched-dispatcher", "INFO", "instants sent", {"run_ids": [run_id]}),
            LogLine(
                self.start + timedelta(seconds=1),
                "jobsched-worker",
                "INFO",
                "run message",
                {"attempt": 1, "outcome": "pending"},
            ),
        ]
        return shown[: min(self.calls, 2)]


def test_jobsched_logs_prints_the_lines_and_follows_until_the_run_ends(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.register(
        {"name": "cb", "team": "ops", "schedule": {"expression": "0 * * * *"}, "target": {"type": "callback"}}
    )
    clock.set("2027-01-04T09:00:00Z")
    stack.tick()
    stack.pump()
    [run] = stack.run_list("ops/cb")
    api = ApiClient(stack)
    found = GrowingLogs(run.scheduled_at)
    api.services.logs = found
    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))
    monkeypatch.setattr(cli_logs, "follow_poll_seconds", 0.0)
    polls = {"n": 0}
    original = found.lines

    def finishing(*args: object, **kwargs: object) -> list[LogLine]:
        polls["n"] += 1
        if polls["n"] == 3:  # the run ends while we follow
            stack.worker.ends.complete(AttemptRef("ops/cb", run.run_id, 1), Reported(succeeded=True))
        return original(*args, **kwargs)  # type: ignore[arg-type]

    found.lines = finishing  # type: ignore[method-assign]
    result = CliRunner().invoke(cli, ["logs", "ops/cb", run.run_id, "--follow"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2, "each line once, however often it was read"
    assert "jobsched-dispatcher" in lines[0] and "instants sent" in lines[0] and run.run_id in lines[0]
    assert "jobsched-worker" in lines[1] and "attempt=1" in lines[1]
    assert found.asked[0] == ("ops/cb", run.run_id)
    as_json = CliRunner().invoke(cli, ["logs", "ops/cb", run.run_id, "-o", "json"])
    assert json.loads(as_json.output.splitlines()[0])["component"] == "jobsched-dispatcher"
    missing = CliRunner().invoke(cli, ["logs", "ops/cb", "20990101T000000Z"])
    assert missing.exit_code == 1 and "no run" in missing.output
