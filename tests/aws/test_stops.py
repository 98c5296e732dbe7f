"""#49: an emergency stop by selector pauses every matching job of the named teams in one audited call, shows what
it stopped, leaves what was already paused, and its resume resumes exactly those with each catch-up: none (nothing
that fell in the stop runs), latest (its last instant), all (every instant, as a throttled backfill)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from jobsched.api.routes.stops import TargetType
from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.core.runs import RunStatus
from jobsched.core.spec import TARGET_TYPES
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack


def hourly(name: str, team: str = "ops", **tags: str) -> dict[str, Any]:
    return {
        "name": name,
        "team": team,
        "tags": tags,
        "schedule": {"expression": "0 * * * *"},
        "target": {"type": "lambda", "function": "echo"},
    }


def test_the_selector_types_are_the_specs_target_types() -> None:
    assert set(TargetType.__args__) == set(TARGET_TYPES)  # type: ignore[attr-defined]


def test_a_selector_stop_and_its_resume_with_each_catchup(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.set("2027-01-04T09:05:00Z")
    for name, tags in (
        ("load-none", {"warehouse": "true", "resume": "none"}),
        ("load-latest", {"warehouse": "true", "resume": "latest"}),
        ("load-all", {"warehouse": "true", "resume": "all"}),
        ("paused-before", {"warehouse": "true", "resume": "none"}),
        ("unrelated", {}),
    ):
        stack.register(hourly(name, **tags))
    stack.register(hourly("sync", team="data", warehouse="true"))
    api = ApiClient(stack)
    assert api.call("POST", "/teams/ops/jobs/paused-before/pause", {"reason": "migration"}).status == 200
    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))

    stops = {}
    for mode in ("none", "latest", "all"):
        shown = CliRunner().invoke(
            cli,
            [
                "stop",
                "--team",
                "ops",
                "--tag",
                "warehouse=true",
                "--tag",
                f"resume={mode}",
                "--reason",
                "INC-7 warehouse",
            ],
        )
        assert shown.exit_code == 0, shown.output
        stops[mode] = shown.output.split(":", 1)[0]
        assert f"paused  ops/load-{mode}" in shown.output
    none_stop = api.call("GET", f"/stops/{stops['none']}", principal=team_role("ops")).body
    assert none_stop["stopped"] == ["ops/load-none"] and none_stop["already_paused"] == ["ops/paused-before"]
    assert none_stop["reason"] == "INC-7 warehouse" and none_stop["principal"] == team_role("ops")
    for name in ("load-none", "load-latest", "load-all"):
        stored = stack.jobs.get(f"ops/{name}")
        assert stored is not None and stored.state == "PAUSED" and "INC-7 warehouse" in str(stored.paused_reason)
        [entry, *_] = stack.jobs.history(f"ops/{name}", limit=5)[0]
        assert entry.action == "pause" and entry.principal == team_role("ops") and "emergency stop" in str(entry.reason)
    assert stack.jobs.get("ops/unrelated").state == "ACTIVE"  # type: ignore[union-attr]
    assert stack.jobs.get("data/sync").state == "ACTIVE"  # type: ignore[union-attr]
    # A member of ops may not stop another team's jobs.
    other = {"teams": ["data"], "tags": {"warehouse": "true"}, "reason": "x"}
    assert api.call("POST", "/stops", other, principal=team_role("ops")).status == 403

    # 10:00 to 13:00 fall in the stop (resumed at 13:05).
    for _ in range(4):
        clock.advance(timedelta(hours=1))
        stack.tick()
        stack.pump()
    assert clock() == clock().replace(hour=13, minute=5)
    for mode in ("none", "latest", "all"):
        resumed = CliRunner().invoke(cli, ["resume", "--stop", stops[mode], "--catchup", mode])
        assert resumed.exit_code == 0, resumed.output
        assert f"ops/load-{mode}" in resumed.output
    again = api.call("POST", f"/stops/{stops['all']}/resume", {"catchup": "all"}, principal=team_role("ops"))
    assert again.status == 409 and again.body["error"]["code"] == "stop_already_resumed"
    assert stack.jobs.get("ops/paused-before").state == "PAUSED"  # type: ignore[union-attr]  # not the stop's
    for _ in range(6):
        stack.tick()
        stack.pump()
        clock.advance(timedelta(minutes=1))
    clock.set("2027-01-04T13:59:30Z")
    stack.tick()  # the resumed jobs' next instant, 14:00, is sent as scheduled
    clock.set("2027-01-04T14:00:10Z")
    stack.pump()

    def ran(name: str) -> set[str]:
        return {r.run_id[9:13] for r in stack.run_list(f"ops/{name}") if r.status is RunStatus.SUCCEEDED}

    assert ran("load-none") == {"1400"}
    assert ran("load-latest") == {"1300", "1400"}
    assert ran("load-all") == {"1000", "1100", "1200", "1300", "1400"}
    assert ran("unrelated") >= {"1000", "1100", "1200", "1300", "1400"}


def test_a_job_resumed_by_hand_meanwhile_is_left_alone(stack: Stack, clock: Clock) -> None:
    clock.set("2027-01-04T09:05:00Z")
    stack.register(hourly("etl", warehouse="true"))
    api = ApiClient(stack)
    body = {"teams": ["ops"], "tags": {"warehouse": "true"}, "reason": "INC-8", "cancel_running": True}
    stopped = api.call("POST", "/stops", body, principal=team_role("ops"))
    assert stopped.status == 201 and stopped.body["stopped"] == ["ops/etl"]
    assert api.call("POST", "/teams/ops/jobs/etl/resume", principal=team_role("ops")).status == 200
    assert api.call("POST", "/teams/ops/jobs/etl/pause", {"reason": "someone else's"}).status == 200
    stop_id = stopped.body["stop_id"]
    resumed = api.call("POST", f"/stops/{stop_id}/resume", {"catchup": "none"}, principal=team_role("ops"))
    assert resumed.status == 200 and resumed.body["resumed"] == [
        {"job": "ops/etl", "outcome": "left: resumed or paused again since"}
    ]
    assert stack.jobs.get("ops/etl").paused_reason == "someone else's"  # type: ignore[union-attr]
    assert api.call("GET", "/stops/stop-20270104T090500Z-000000", principal=team_role("ops")).status == 404
    bad = api.call("POST", "/stops", {"teams": [], "reason": "x"}, principal=team_role("ops"))
    assert bad.status == 422
