"""SLO tiers end to end on the moto stack: each ended run counted in its team's ledger by the lifecycle, the
team's budget per tier read by the API and `jobsched slo`, and a team reading only its own."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.core.slo import SloTiers
from jobsched.pipeline.slo_ledger import SloLedger
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack


def every_minute(stack: Stack, name: str, function: str, tier: str) -> None:
    stack.register(
        {
            "name": name,
            "team": "ops",
            "tier": tier,
            "schedule": {"expression": "* * * * *"},
            "target": {"type": "lambda", "function": function},
            "retry": {"max_attempts": 1},
        }
    )


def test_a_teams_budget_per_tier_from_the_runs_its_jobs_ended(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.lifecycle.subscribe(SloLedger(stack.jobs, SloTiers()))  # as wiring.metered_runs subscribes it
    stack.worker.breaker_failures = 1000
    answers = iter([{"ok": 1}] * 8 + [RuntimeError("down")] * 2)

    def sometimes(event: dict[str, Any]) -> Any:
        answer = next(answers, {"ok": 1})
        if isinstance(answer, Exception):
            raise answer
        return answer

    stack.lambdas.functions["sometimes"] = sometimes
    stack.lambdas.functions["fine"] = lambda event: {"ok": 1}
    clock.set("2027-01-04T08:59:30Z")
    every_minute(stack, "vital", "sometimes", "critical")
    every_minute(stack, "report", "fine", "best-effort")
    stack.minutes(10)
    api = ApiClient(stack)
    answer = api.call("GET", "/teams/ops/slo", principal=team_role("ops"))
    assert answer.status == 200
    view = answer.body
    assert view["window_days"] == 28 and view["as_of"] == "2027-01-04"
    tiers = {tier["tier"]: tier for tier in view["tiers"]}
    assert set(tiers) == {"critical", "important", "best-effort"}
    critical = tiers["critical"]
    assert critical["objective"]["success"] == 0.999
    assert (critical["runs"], critical["bad"]) == (10, 2)
    assert critical["burning"] == [{"job": "vital", "bad": 2}]
    # 2 bad of 10 where 0.1% may be: the budget is overspent 200 times over.
    assert critical["budget_left"] == pytest.approx(1 - 0.2 / 0.001)
    assert critical["days"][-1] == {"day": "2027-01-04", "runs": 10, "bad": 2} and len(critical["days"]) == 28
    assert (tiers["best-effort"]["runs"], tiers["best-effort"]["bad"], tiers["best-effort"]["budget_left"]) == (
        10,
        0,
        1.0,
    )
    assert tiers["important"]["runs"] == 0
    assert api.call("GET", "/teams/ops/slo", principal=team_role("data")).status == 403

    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))
    shown = CliRunner().invoke(cli, ["slo", "ops"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == "team ops: the last 28 days to 2027-01-04"
    critical_line = next(line for line in lines if line.startswith("critical"))
    assert "99.90%" in critical_line and "vital (2)" in critical_line
