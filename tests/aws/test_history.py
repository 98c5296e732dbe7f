"""A job's history through the API and the CLI (#17): every change and action, specs in full, rollback."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack

OPS = team_role("ops")


def job(expression: str, **extra: Any) -> dict[str, Any]:
    return {"schedule": {"expression": expression}, "target": {"type": "lambda", "function": "echo"}, **extra}


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


def changed_three_times(api: ApiClient, clock: Clock) -> None:
    from datetime import timedelta

    assert api.call("PUT", "/teams/ops/jobs/report", job("0 * * * *"), principal=OPS).status == 201
    clock.advance(timedelta(minutes=1))
    assert api.call("PUT", "/teams/ops/jobs/report", job("30 * * * *"), principal=OPS).status == 200
    clock.advance(timedelta(minutes=1))
    assert api.call("POST", "/teams/ops/jobs/report/pause", {"reason": "maintenance"}, principal=OPS).status == 200
    clock.advance(timedelta(minutes=1))
    assert api.call("POST", "/teams/ops/jobs/report/resume", principal=OPS).status == 200
    clock.advance(timedelta(minutes=1))
    assert api.call("POST", "/teams/ops/jobs/report/trigger", {"payload": {"x": 1}}, principal=OPS).status == 202


def test_history_keeps_every_change_and_action_newest_first_with_who_and_why(api: ApiClient, clock: Clock) -> None:
    changed_three_times(api, clock)
    page = api.call("GET", "/teams/ops/jobs/report/history", principal=OPS)
    assert page.status == 200
    entries = page.body["entries"]
    assert [e["action"] for e in entries] == ["trigger", "resume", "pause", "replace", "create"]
    assert {e["principal"] for e in entries} == {OPS}
    assert entries[2]["reason"] == "maintenance"
    assert entries[3]["spec"]["schedule"]["expression"] == "30 * * * *", "each version's spec in full"
    assert entries[4]["spec"]["schedule"]["expression"] == "0 * * * *" and entries[4]["version"] == 1
    assert entries[0]["details"]["run_id"] and entries[0]["details"]["payload"] is True
    first = api.call("GET", "/teams/ops/jobs/report/history?limit=2", principal=OPS)
    assert [e["action"] for e in first.body["entries"]] == ["trigger", "resume"] and first.body["next_token"]
    rest = api.call(
        "GET", f"/teams/ops/jobs/report/history?limit=10&next_token={first.body['next_token']}", principal=OPS
    )
    assert [e["action"] for e in rest.body["entries"]] == ["pause", "replace", "create"]
    assert api.call("GET", "/teams/ops/jobs/report/history", principal=team_role("payments")).status == 403


def test_rollback_applies_an_old_spec_as_a_new_audited_version(api: ApiClient, clock: Clock) -> None:
    changed_three_times(api, clock)
    before = api.call("GET", "/teams/ops/jobs/report", principal=OPS).body["version"]
    rolled = api.call("POST", "/teams/ops/jobs/report/rollback", {"to_version": 1}, principal=OPS)
    assert rolled.status == 200 and rolled.body["version"] == before + 1
    assert rolled.body["spec"]["schedule"]["expression"] == "0 * * * *"
    [latest] = api.call("GET", "/teams/ops/jobs/report/history?limit=1", principal=OPS).body["entries"]
    assert latest["action"] == "rollback" and latest["reason"] == "rollback to version 1" and latest["principal"] == OPS
    missing = api.call("POST", "/teams/ops/jobs/report/rollback", {"to_version": 99}, principal=OPS)
    assert missing.status == 404 and missing.body["error"]["field"] == "to_version"
    paused_version = 3  # a pause changes no spec: there is nothing to roll back to
    assert (
        api.call("POST", "/teams/ops/jobs/report/rollback", {"to_version": paused_version}, principal=OPS).status == 404
    )


def test_jobsched_history_shows_the_trail_and_the_spec_diffs_and_rollback_uses_it(
    api: ApiClient, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed_three_times(api, clock)
    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, OPS))
    result = CliRunner().invoke(cli, ["history", "ops/report"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["AT", "VERSION", "ACTION", "PRINCIPAL"]
    assert [line.split()[2] for line in lines[1:]] == ["trigger", "resume", "pause", "replace", "create"]
    diff = CliRunner().invoke(cli, ["history", "ops/report", "--diff"])
    assert (
        diff.exit_code == 0 and "-  expression: 0 * * * *" in diff.output and "+  expression: 30 * * * *" in diff.output
    )
    rolled = CliRunner().invoke(cli, ["rollback", "ops/report", "--to-version", "1"])
    assert rolled.exit_code == 0, rolled.output
    assert (
        api.call("GET", "/teams/ops/jobs/report", principal=OPS).body["spec"]["schedule"]["expression"] == "0 * * * *"
    )


def test_a_page_token_not_from_the_api_gets_422(api: ApiClient) -> None:
    for token in ("bm90LWEta2V5", "%%%"):
        answer = api.call("GET", f"/teams/ops/jobs/report/history?next_token={token}", principal=OPS)
        assert answer.status == 422 and answer.body["error"]["field"] == "next_token"


def test_cancel_rerun_and_backfill_start_and_cancel_are_in_the_history(
    api: ApiClient, stack: Stack, clock: Clock
) -> None:
    callback = {
        "schedule": {"expression": "0 * * * *"},
        "target": {"type": "callback", "timeout": "1h"},
        "retry": {"max_attempts": 1},
    }
    assert api.call("PUT", "/teams/ops/jobs/cb", callback, principal=OPS).status == 201
    clock.set("2027-01-04T10:00:00Z")
    stack.tick()
    stack.pump()
    run = next(r for r in stack.run_list("ops/cb") if r.status.value == "RUNNING")
    assert api.call("POST", f"/teams/ops/jobs/cb/runs/{run.run_id}/cancel", principal=OPS).status == 200
    clock.advance(timedelta(milliseconds=5))
    assert api.call("POST", f"/teams/ops/jobs/cb/runs/{run.run_id}/rerun", principal=OPS).status == 202
    clock.advance(timedelta(milliseconds=5))
    started = api.call(
        "POST",
        "/teams/ops/jobs/cb/backfill",
        {"from": "2027-01-04T07:00:00Z", "to": "2027-01-04T09:00:00Z"},
        principal=OPS,
    )
    assert started.status == 202
    backfill_id = started.body["backfill_id"]
    clock.advance(timedelta(milliseconds=5))
    assert api.call("DELETE", f"/teams/ops/jobs/cb/backfills/{backfill_id}", principal=OPS).status == 200
    entries = api.call("GET", "/teams/ops/jobs/cb/history", principal=OPS).body["entries"]
    assert [e["action"] for e in entries] == ["backfill_cancel", "backfill", "rerun", "cancel", "create"]
    assert entries[1]["details"]["from"] == "2027-01-04T07:00:00Z" and entries[1]["details"]["instants"] == 3
    assert entries[2]["details"] == {
        "run_id": run.run_id,
        "attempt": 2,
        "was": "CANCELLED",
        "force": False,
        "downstream": False,
    }
    assert entries[3]["details"]["run_id"] == run.run_id and all(e["principal"] == OPS for e in entries)
