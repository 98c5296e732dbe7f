"""#50: a team's monthly budget. A warning threshold pages once a month; the hard one pauses the team's non-critical
jobs with the reason (audited, critical jobs spared) and pages that it did; a job's own budget pauses that job; a
platform admin resumes exactly what a budget paused; a new month starts clean. A seeded month drives each step."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.core.prices import US_EAST_1
from jobsched.core.runs import parse_instant
from jobsched.core.usage import TARGET_VCPU_SECONDS
from jobsched.planning.budgets import BudgetWatch
from tests.aws.api_client import ADMIN, ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack

VCPU_SECOND = US_EAST_1.fargate_vcpu_hour / 3600


def job(name: str, tier: str = "important") -> dict[str, Any]:
    return {"name": name, "team": "ops", "tier": tier, "schedule": {"expression": "0 * * * *"},
            "target": {"type": "callback"}}  # fmt: skip


def spend(stack: Stack, job_key: str, usd: float, day: date) -> None:
    """Seed a day's usage worth ``usd`` of Fargate vCPU time (the scheduler's share left out: exact dollars)."""
    stack.jobs.add_usage("ops", job_key, day, {TARGET_VCPU_SECONDS: usd / VCPU_SECOND}, tier="x", target_type="ecs")


def test_a_budget_warns_then_pauses_the_non_critical_jobs_until_an_admin_resumes(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.set("2027-01-20T10:00:00Z")
    for name, tier in (
        ("export", "important"),
        ("report", "best-effort"),
        ("ledger", "critical"),
        ("hand", "important"),
    ):
        stack.register(job(name, tier))
    api = ApiClient(stack)
    assert api.call("POST", "/teams/ops/jobs/hand/pause", {"reason": "migration"}).status == 200
    budget = {"monthly_usd": 100, "warn_at": [0.5, 0.8], "hard_at": 1.0, "jobs": {"report": 30}}
    assert api.call("PUT", "/admin/teams/ops/budget", budget).status == 200
    assert api.call("PUT", "/admin/teams/ops/budget", budget, principal=team_role("ops")).status == 403
    watch = BudgetWatch(stack.jobs, stack.worker.alerts.publish, US_EAST_1)
    now = parse_instant("2027-01-20T10:15:00Z")

    spend(stack, "ops/export", 60.0, date(2027, 1, 5))
    spend(stack, "ops/export", 25.0, date(2026, 12, 31))  # last month's: not this month's bill
    crossed = watch.check_all(now)
    assert [(c.subject, c.fraction, c.hard) for c in crossed] == [("ops", 0.5, False)]
    stack.handle_escalations()
    [page] = stack.pages()
    assert "budget warning" in page["subject"] and "spent $60.00 of its $100.00 budget for 2027-01" in page["message"]
    assert watch.check_all(now) == []  # once a threshold a month

    spend(stack, "ops/export", 25.0, date(2027, 1, 19))
    spend(stack, "ops/report", 20.0, date(2027, 1, 19))  # the report's own budget: 30
    crossed = watch.check_all(now)
    assert [(c.subject, c.fraction, c.hard) for c in crossed] == [
        ("ops", 0.8, False),
        ("ops", 1.0, True),
        ("ops/report", 0.5, False),
    ]
    states = {name: stack.jobs.get(f"ops/{name}") for name in ("export", "report", "ledger", "hand")}
    assert {name: s.state for name, s in states.items() if s} == {
        "export": "PAUSED", "report": "PAUSED", "ledger": "ACTIVE", "hand": "PAUSED"
    }  # fmt: skip
    assert states["export"] and (states["export"].paused_reason or "").startswith("budget: ops spent $105.00")
    assert states["export"].paused_by == "jobsched:budget"
    assert states["hand"] and states["hand"].paused_reason == "migration"  # paused before: left as it was
    stack.handle_escalations()
    subjects = sorted(page["subject"] for page in stack.pages())
    assert any("budget exceeded" in subject or "paused" in subject for subject in subjects), subjects

    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, ADMIN))
    resumed = CliRunner().invoke(cli, ["admin", "budget", "ops", "--resume"])
    assert resumed.exit_code == 0 and "resumed 2 job(s)" in resumed.output, resumed.output
    assert stack.jobs.get("ops/export").state == "ACTIVE"  # type: ignore[union-attr]
    assert stack.jobs.get("ops/hand").state == "PAUSED"  # type: ignore[union-attr]  # not the budget's to resume
    history = api.call("GET", "/admin/teams/ops/history").body["entries"]
    assert [entry["action"] for entry in history[:2]] == ["budget_resumed", "budget_set"]
    shown = CliRunner().invoke(cli, ["admin", "budget", "ops"])
    assert "ops 2027-01: spent $105" in shown.output and "of $100.00" in shown.output, shown.output

    february = parse_instant("2027-02-01T00:00:00Z")
    spend(stack, "ops/export", 55.0, date(2027, 2, 1))
    assert [(c.fraction, c.hard) for c in watch.check_all(february)] == [(0.5, False)]  # a new month starts clean
