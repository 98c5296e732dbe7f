"""Freshness and learned baselines end to end on the moto stack: the lifecycle moves a job's freshness and teaches
its baseline, the heartbeat checker judges at the deadline (a job that never ran is stale and paged by its tier, a
best-effort one opens a ticket and pages no one, one that ran is fresh), the API and `jobsched slo` show both, and
a run far outside its baseline says so on the run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.core.names import OWNER_TAG
from jobsched.pipeline.freshness import FreshnessKeeper
from jobsched.pipeline.worker import heartbeat_checker
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack


def job(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "team": "ops", "target": {"type": "lambda", "function": "fine"}} | extra


def test_a_stale_job_and_a_fresh_one_judged_at_the_deadline_paged_by_tier_and_shown(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    alerts = stack.subscribe_as_deployed()
    stack.lambdas.functions["fine"] = lambda event: {"ok": 1}
    clock.set("2027-01-04T08:40:30Z")
    deadline = {"deadline": "09:00", "timezone": "UTC", "max_age": "2h"}
    stack.register(job("loads", schedule={"expression": "*/15 * * * *"}, freshness=deadline, tier="critical"))
    stack.register(job("never", freshness=deadline, tier="critical"))  # no schedule: it never runs
    stack.register(job("tidy", freshness=deadline, tier="best-effort"))
    stack.minutes(19)  # 08:45 runs and succeeds (the clock stops at 08:59:30)
    checker = heartbeat_checker(stack.runs, stack.worker, freshness=FreshnessKeeper(stack.jobs, alerts.publish).check)
    clock.set("2027-01-04T09:00:20Z")
    report = checker.check(clock())
    assert report.stale_jobs == 2 and report.metrics()["StaleJudgements"] == 2
    stack.handle_escalations()
    pages = stack.pages()
    assert [page["attributes"]["kind"] for page in pages] == ["job_stale"]  # the best-effort one: a ticket
    assert "ops/never: stale (freshness)" in pages[0]["message"] and "never succeeded" in pages[0]["message"]
    assert "severity: critical" in pages[0]["message"]
    ticket = stack.jobs.get_incident("ops/tidy", "stale")
    assert ticket is not None and ticket.incident.severity == "ticket" and not ticket.incident.paged
    assert checker.check(clock()).stale_jobs == 0  # judged once

    api = ApiClient(stack)
    slo = api.call("GET", "/teams/ops/slo", principal=team_role("ops")).body
    critical = next(tier for tier in slo["tiers"] if tier["tier"] == "critical")
    assert (critical["judged"], critical["stale"]) == (2, 1) and {"job": "never", "bad": 1} in critical["burning"]
    assert [(line["job"], line["state"]) for line in slo["freshness"]] == [
        ("never", "stale"),
        ("tidy", "stale"),
        ("loads", "fresh"),
    ]
    health = api.call("GET", "/teams/ops/jobs/loads/health", principal=team_role("ops")).body
    assert health["freshness"]["state"] == "fresh"
    assert health["freshness"]["last_success_at"].startswith("2027-01-04T08:45")
    assert health["freshness"]["next_check_at"] == "2027-01-05T09:00:00Z"
    assert health["baseline"]["learning"] is True and health["baseline"]["samples"] >= 1
    team = api.call("GET", "/teams/ops/health", principal=team_role("ops")).body
    assert {view["job"]: view["freshness"]["state"] for view in team["jobs"]} == {
        "ops/loads": "fresh",
        "ops/never": "stale",
        "ops/tidy": "stale",
    }

    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))
    shown = CliRunner().invoke(cli, ["slo", "ops"])
    assert shown.exit_code == 0, shown.output
    never_line = next(line for line in shown.output.splitlines() if line.startswith("never "))
    assert "stale" in never_line and "never succeeded" in never_line

    # A run of the stale job (triggered by hand) makes it fresh and resolves its page.
    assert api.call("POST", "/teams/ops/jobs/never/trigger", principal=team_role("ops"), body={}).status in (
        200,
        201,
        202,
    )
    stack.pump()
    stack.handle_escalations()
    [resolved] = stack.pages()
    assert resolved["message"].startswith("[jobsched, resolved] ops/never")
    assert stack.jobs.team_freshness("ops")["never"]["state"] == "fresh"


def test_a_run_far_outside_its_baseline_says_so_on_the_run(stack: Stack, clock: Clock) -> None:
    stack.subscribe_as_deployed()
    took = iter([30.0] * 12 + [400.0])

    def steady_then_slow(event: dict[str, Any]) -> Any:
        clock.advance(timedelta(seconds=next(took, 30.0)))  # the target takes this long (the virtual clock moves)
        return {"ok": 1}

    stack.lambdas.functions["steady"] = steady_then_slow
    stack.function("steady", {OWNER_TAG: "ops"})
    clock.set("2027-01-04T08:59:30Z")
    stack.register(
        job("steady", schedule={"expression": "*/10 * * * *"}, target={"type": "lambda", "function": "steady"})
    )
    stack.minutes(130)
    runs = stack.run_list("ops/steady")
    flagged = [run for run in runs if run.anomaly]
    assert len(flagged) == 1 and flagged[0].run_id == "20270104T110000Z"
    assert flagged[0].anomaly == "took 7 min, usual 30 s", flagged[0].anomaly
    api = ApiClient(stack)
    run = api.call("GET", "/teams/ops/jobs/steady/runs/20270104T110000Z", principal=team_role("ops")).body
    assert run["anomaly"] == "took 7 min, usual 30 s"
    health = api.call("GET", "/teams/ops/jobs/steady/health", principal=team_role("ops")).body
    assert health["baseline"]["last_anomaly"]["run_id"] == "20270104T110000Z"
    assert health["baseline"]["usual_duration"] == "30 s" and not health["baseline"]["learning"]
    assert stack.escalations() == []  # anomalies: record (the default) pages no one
