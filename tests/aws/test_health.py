"""Per-job health (#14): the strip, rates and percentiles from the runs table, the team view worst first,
and `jobsched status`."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_module
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack
from tests.aws.test_pipeline import job

PAYMENTS = team_role("payments")
calls = {"count": 0}


def sometimes(event: dict[str, Any]) -> Any:
    """Fails on its 3rd, 4th and 6th call: a job with a failure streak in the middle and a retry at the end."""
    calls["count"] += 1
    if calls["count"] in (3, 4, 6):
        raise RuntimeError("upstream 503")
    return {"ok": True}


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


def register(stack: Stack, name: str, function: str, **extra: Any) -> None:
    stack.register(job(name, target={"type": "lambda", "function": function}, **extra))


def test_a_jobs_health_shows_its_strip_rates_percentiles_streak_and_next_fire(
    api: ApiClient, stack: Stack, clock: Clock
) -> None:
    calls["count"] = 0
    stack.lambdas.functions["sometimes"] = sometimes
    register(stack, "ledger", "sometimes", retry={"max_attempts": 1})
    stack.minutes(6)
    health = api.call("GET", "/teams/payments/jobs/ledger/health", principal=PAYMENTS).body
    assert health["strip"] == ["succeeded", "succeeded", "failed", "failed", "succeeded", "failed"]
    assert health["success_rate"] == pytest.approx(3 / 6)
    assert health["runs"] == 6 and health["streak"] == "1 failed"
    assert health["lateness_p50_s"] == 0 and health["duration_p95_s"] == 0
    assert health["next_fire"] == "2027-01-04T09:06:00Z" and health["state"] == "ACTIVE"
    assert health["open_incidents"] == [] and health["window_days"] == 7
    short = api.call("GET", "/teams/payments/jobs/ledger/health?runs=2", principal=PAYMENTS).body
    assert short["strip"] == ["succeeded", "failed"]


def test_the_team_view_lists_every_job_worst_first(api: ApiClient, stack: Stack, clock: Clock) -> None:
    calls["count"] = 0
    stack.lambdas.functions["down"] = lambda event: (_ for _ in ()).throw(RuntimeError("down"))
    register(stack, "broken", "down", retry={"max_attempts": 1})
    register(stack, "fine", "echo")
    stack.register({"name": "quiet", "team": "payments", "target": {"type": "callback"}})  # never ran
    stack.minutes(3)
    stack.handle_escalations()  # the broken job's incident opens
    page = api.call("GET", "/teams/payments/health", principal=PAYMENTS).body
    assert [job["job"] for job in page["jobs"]] == ["payments/broken", "payments/fine", "payments/quiet"]
    broken, fine, quiet = page["jobs"]
    assert broken["success_rate"] == 0 and broken["open_incidents"] == ["failing"] and broken["streak"] == "3 failed"
    assert fine["success_rate"] == 1 and fine["strip"] == ["succeeded"] * 3
    assert quiet["success_rate"] is None and quiet["strip"] == [] and quiet["next_fire"] is None


def test_health_refuses_a_bad_window_and_another_team(api: ApiClient, stack: Stack) -> None:
    register(stack, "ledger", "echo")
    for window in ("forever", "10m", "365d"):
        refused = api.call("GET", f"/teams/payments/jobs/ledger/health?window={window}", principal=PAYMENTS)
        assert refused.status == 422 and refused.body["error"]["field"] == "window", window
    assert api.call("GET", "/teams/payments/health", principal=team_role("intruder")).status == 403
    assert api.call("GET", "/teams/payments/jobs/ledger/health", principal=team_role("intruder")).status == 403


def test_jobsched_status_prints_the_strip_worst_first(
    api: ApiClient, stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.lambdas.functions["down"] = lambda event: (_ for _ in ()).throw(RuntimeError("down"))
    register(stack, "broken", "down", retry={"max_attempts": 1})
    register(stack, "fine", "echo")
    stack.minutes(2)
    monkeypatch.setattr(cli_module, "make_transport", lambda url: InProcess(api, PAYMENTS))
    result = CliRunner().invoke(cli, ["status", "payments"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["JOB", "LAST", "RUNS", "(old->new)"]
    assert lines[1].split()[:3] == ["payments/broken", "FF", "0.0%"]
    assert lines[2].split()[:3] == ["payments/fine", "..", "100.0%"]
    one = CliRunner().invoke(cli, ["status", "payments/fine", "-o", "json", "--window", "24h"])
    assert json.loads(one.output)[0]["success_rate"] == 1


def test_runs_older_than_the_window_are_left_out(api: ApiClient, stack: Stack, clock: Clock) -> None:
    register(stack, "ledger", "echo")
    stack.minutes(2)
    clock.advance(timedelta(days=2))
    health = api.call("GET", "/teams/payments/jobs/ledger/health?window=1d", principal=PAYMENTS).body
    assert health["runs"] == 0 and health["success_rate"] is None
