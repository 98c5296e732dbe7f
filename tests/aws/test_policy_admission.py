"""#49: the organisation's policy is enforced at admission, not only by the CLI. A direct API call that breaks it is
refused with 422 naming the rule and the field (nothing stored), /validate says the same, GET /policy and `jobsched
policy` serve the file, and `jobsched lint --policy` with the same file finds the same breach."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.registry.policy import OrgPolicy
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Stack

POLICY_FILE = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"
BARE: dict[str, Any] = {
    "schedule": {"expression": "H 9 * * *"},
    "target": {"type": "lambda", "function": "echo"},
}


def test_a_policy_breach_is_refused_at_put_with_its_rule_and_field_and_lint_finds_the_same(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = ApiClient(stack)
    api.services.policy = OrgPolicy.load(POLICY_FILE)  # as deployed with -c org_policy=examples/policy.yaml
    refused = api.call("PUT", "/teams/ops/jobs/bare", BARE, principal=team_role("ops"))
    assert refused.status == 422, refused.body
    errors = {(e["field"], e["code"]) for e in refused.body["error"]["errors"]}
    assert errors == {("owner", "policy_violation"), ("runbook_url", "policy_violation")}
    message = next(e["message"] for e in refused.body["error"]["errors"] if e["field"] == "owner")
    assert message.startswith("policy-require: the organisation requires owner")
    assert stack.jobs.get("ops/bare") is None  # nothing stored
    checked = api.call("POST", "/validate", {**BARE, "name": "bare", "team": "ops"}, principal=team_role("ops"))
    assert checked.status == 200 and not checked.body["valid"]
    assert {e["field"] for e in checked.body["errors"]} == {"owner", "runbook_url"}
    often = {**BARE, "owner": "ops@example.com", "runbook_url": "https://runbooks.example.com/x"}
    often["schedule"] = {"expression": "* * * * *"}  # below the policy's 5-minute floor
    floor = api.call("PUT", "/teams/ops/jobs/often", often, principal=team_role("ops"))
    assert floor.status == 422 and floor.body["error"]["errors"][0]["field"] == "schedule.expression"
    assert "policy-min-interval" in floor.body["error"]["errors"][0]["message"]
    compliant = {**often, "schedule": {"expression": "*/5 * * * *"}}
    assert api.call("PUT", "/teams/ops/jobs/often", compliant, principal=team_role("ops")).status == 201

    served = api.call("GET", "/policy", principal=team_role("ops"))
    assert served.status == 200 and served.body["require"] == ["owner", "runbook_url"]
    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))
    printed = CliRunner().invoke(cli, ["policy"])
    assert printed.exit_code == 0, printed.output
    assert OrgPolicy.parse(printed.output) == OrgPolicy.load(POLICY_FILE)  # the file lint reads, as served

    job_file = tmp_path / "bare.yaml"
    job_file.write_text(yaml.safe_dump({**BARE, "name": "bare", "team": "ops"}))
    linted = CliRunner().invoke(cli, ["lint", str(job_file), "--policy", str(POLICY_FILE), "--format", "json"])
    assert linted.exit_code == 1
    assert {(f["rule"], f["path"]) for f in yaml.safe_load(linted.output)} >= {
        ("policy-require", "owner"),
        ("policy-require", "runbook_url"),
    }
