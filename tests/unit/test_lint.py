"""jobsched lint (#17): the organisation's policy and the built-in warnings, each rule, each format."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from jobsched.cli import app as cli_app
from jobsched.cli import cli
from jobsched.registry.lint import lint
from jobsched.registry.policy import OrgPolicy
from tests.helpers import utc

NOW = utc("2027-01-04T12:00:00Z")
POLICY = {
    "require": ["owner", "runbook_url", "escalation", "target.timeout"],
    "targets": {"allowed_types": ["lambda", "sqs", "stepfunctions", "callback"], "allowed_accounts": ["123456789012"]},
    "schedule": {"min_interval": "5m", "max_catchup_runs": 10},
}
COMPLIANT: dict[str, Any] = {
    "name": "report",
    "team": "payments",
    "owner": "payments@example.com",
    "runbook_url": "https://runbooks.example.com/report",
    "escalation": {"sns_topic": "arn:aws:sns:us-east-1:123456789012:payments-oncall"},
    "schedule": {"expression": "H 9 * * *", "timezone": "Europe/London"},
    "target": {"type": "lambda", "function": "arn:aws:lambda:us-east-1:123456789012:function:report", "timeout": "5m"},
}


def write(folder: Path, name: str, document: dict[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def rules(folder: Path, policy: dict[str, Any] | None = None, now: datetime = NOW) -> list[tuple[str, str, str]]:
    found = lint([folder], OrgPolicy.model_validate(policy or {}), now=now)
    return [(f.rule, f.severity, f.path) for f in found]


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_app, "clock", lambda: NOW)


def test_a_compliant_job_has_no_finding(tmp_path: Path) -> None:
    write(tmp_path, "ok", COMPLIANT)
    assert rules(tmp_path, POLICY) == []


def test_the_policys_required_fields_are_checked_as_written(tmp_path: Path) -> None:
    bare = {k: v for k, v in COMPLIANT.items() if k not in ("owner", "runbook_url", "escalation")}
    bare["target"] = {k: v for k, v in COMPLIANT["target"].items() if k != "timeout"}  # the default is not enough
    write(tmp_path, "bare", bare)
    assert sorted(rules(tmp_path, POLICY)) == [
        ("policy-require", "error", "escalation"),
        ("policy-require", "error", "owner"),
        ("policy-require", "error", "runbook_url"),
        ("policy-require", "error", "target.timeout"),
    ]


def test_target_types_and_accounts_and_schedule_limits(tmp_path: Path) -> None:
    write(tmp_path, "http", {**COMPLIANT, "target": {"type": "http", "url": "https://example.com/x", "timeout": "5m"}})
    write(
        tmp_path,
        "foreign",
        {
            **COMPLIANT,
            "name": "foreign",
            "target": {**COMPLIANT["target"], "function": "arn:aws:lambda:us-east-1:999999999999:function:x"},
        },
    )
    write(tmp_path, "often", {**COMPLIANT, "name": "often", "schedule": {"expression": "*/2 * * * *"}})
    write(
        tmp_path,
        "flood",
        {
            **COMPLIANT,
            "name": "flood",
            "schedule": {"expression": "H * * * *", "catchup": {"policy": "all", "max_runs": 50}},
        },
    )
    found = rules(tmp_path, POLICY)
    assert ("policy-target-type", "error", "target.type") in found
    assert ("policy-target-account", "error", "target") in found
    assert ("policy-min-interval", "error", "schedule.expression") in found
    assert ("policy-max-catchup", "error", "schedule.catchup.max_runs") in found


def test_a_fixed_time_in_a_dst_gap_and_in_an_overlap_is_warned_with_its_dates(tmp_path: Path) -> None:
    write(tmp_path, "gap", {**COMPLIANT, "schedule": {"expression": "30 2 * * *", "timezone": "America/New_York"}})
    write(
        tmp_path,
        "fold",
        {**COMPLIANT, "name": "fold", "schedule": {"expression": "30 1 * * *", "timezone": "America/New_York"}},
    )
    write(
        tmp_path,
        "wild",
        {**COMPLIANT, "name": "wild", "schedule": {"expression": "*/30 * * * *", "timezone": "America/New_York"}},
    )
    found = lint([tmp_path], OrgPolicy(), now=NOW)
    gap = next(f for f in found if f.rule == "dst-gap")
    assert (
        gap.file.endswith("gap.yaml")
        and "02:30" in gap.message
        and "2027-03-14" in gap.message
        and "03:00" in gap.message
    )
    fold = next(f for f in found if f.rule == "dst-overlap")
    assert fold.file.endswith("fold.yaml") and "2027-11-07" in fold.message
    assert not [f for f in found if f.file.endswith("wild.yaml")], "a wildcard runs at every wall time that exists"


def test_a_herd_at_one_minute_is_told_to_use_h(tmp_path: Path) -> None:
    for index in range(10):
        write(tmp_path, f"job{index}", {**COMPLIANT, "name": f"job{index}", "schedule": {"expression": "0 9 * * *"}})
    write(tmp_path, "spread", {**COMPLIANT, "name": "spread", "schedule": {"expression": "H 9 * * *"}})
    found = lint([tmp_path], OrgPolicy(), now=NOW)
    herd = [f for f in found if f.rule == "herd"]
    assert len(herd) == 10 and "10 jobs fire at 09:00" in herd[0].message and "'H 9 * * *'" in herd[0].fix
    assert not rules(tmp_path, {"herd_threshold": 11})


def test_pile_ups_short_deadlines_silent_calendars_and_long_catch_ups(tmp_path: Path) -> None:
    write(
        tmp_path,
        "pile",
        {
            **COMPLIANT,
            "schedule": {"expression": "*/5 * * * *"},
            "target": {**COMPLIANT["target"], "timeout": "10m"},
            "concurrency": {"overlap": "allow"},
        },
    )
    write(tmp_path, "late", {**COMPLIANT, "name": "late", "deadline": "2m"})
    freeze = {"start": "2027-01-01T00:00:00Z", "end": "2027-05-01T00:00:00Z"}  # four months without a fire
    write(
        tmp_path,
        "never",
        {**COMPLIANT, "name": "never", "schedule": {"expression": "0 9 * * *", "blackouts": [freeze]}},
    )
    saturdays = {"expression": "0 9 * * 6", "calendar": {"business_days_only": True}}  # no fire at all
    write(tmp_path, "saturdays", {**COMPLIANT, "name": "saturdays", "schedule": saturdays})
    write(
        tmp_path,
        "all",
        {
            **COMPLIANT,
            "name": "all",
            "schedule": {"expression": "H * * * *", "catchup": {"policy": "all", "window": "3d"}},
        },
    )
    found = rules(tmp_path)
    assert ("overlap-pileup", "warning", "concurrency.overlap") in found
    assert ("deadline-under-timeout", "warning", "deadline") in found
    assert ("no-fires-90d", "warning", "schedule") in found
    assert ("catchup-all-long", "warning", "schedule.catchup") in found
    assert ("schedule-too-expensive", "error", "schedule") in found, "Saturdays on business days only: never"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_exit_codes_formats_and_an_invalid_file(tmp_path: Path) -> None:
    write(tmp_path, "ok", COMPLIANT)
    policy = tmp_path / "policy.yml"
    policy.write_text(yaml.safe_dump(POLICY))
    folder = tmp_path / "jobs"
    folder.mkdir()
    write(folder, "ok", COMPLIANT)
    assert run("lint", str(folder), "--policy", str(policy))[0] == 0
    write(folder, "late", {**COMPLIANT, "name": "late", "deadline": "2m"})
    assert run("lint", str(folder))[0] == 0, "warnings alone pass"
    assert run("lint", str(folder), "--strict")[0] == 1
    code, output = run("lint", str(folder), "--format", "json")
    [finding] = json.loads(output)
    assert (
        code == 0
        and set(finding) >= {"rule", "severity", "file", "path", "message"}
        and finding["rule"] == "deadline-under-timeout"
    )
    code, output = run("lint", str(folder), "--format", "github")
    assert output.startswith("::warning file=") and "title=deadline-under-timeout::deadline: " in output
    write(folder, "broken", {"name": "Broken!", "team": "payments"})
    code, output = run("lint", str(folder))
    assert code == 1 and "error invalid" in output
    bad_policy = tmp_path / "bad.yml"
    bad_policy.write_text("require: [owner]\ntargets: {allowed: [lambda]}\n")
    assert run("lint", str(folder), "--policy", str(bad_policy))[0] == 2


def test_a_dst_policy_set_explicitly_is_a_decision_and_strict_passes_the_file(tmp_path: Path) -> None:
    """#49: dst-gap warned on a job that set dst.gap, so --strict failed a compliant file."""
    decided = {
        **COMPLIANT,
        "name": "decided",
        "schedule": {
            "expression": "30 2 * * *",
            "timezone": "America/New_York",
            "dst": {"gap": "skip", "fold": "first"},
        },
    }
    write(tmp_path, "decided", decided)
    assert rules(tmp_path, POLICY) == []
    undecided = {**decided, "schedule": {"expression": "30 2 * * *", "timezone": "America/New_York"}}
    write(tmp_path, "decided", undecided)
    assert ("dst-gap", "warning", "schedule.expression") in rules(tmp_path, POLICY)


def test_time_zones_retries_timeouts_priorities_and_a_teams_own_targets(tmp_path: Path) -> None:
    policy = {
        **POLICY,
        "schedule": {"timezones": ["UTC", "Europe/*"]},
        "limits": {"max_attempts": 3, "max_timeout": "10m"},
        "priorities": {"payments": ["high", "normal"], "*": ["normal", "low"]},
        "teams": {"search": {"allowed_types": ["http"]}},
    }
    write(tmp_path, "ok", {**COMPLIANT, "priority": "high"})
    assert rules(tmp_path, policy) == []
    write(
        tmp_path,
        "ok",
        {
            **COMPLIANT,
            "schedule": {"expression": "H 9 * * *", "timezone": "America/New_York"},
            "retry": {"max_attempts": 5},
            "target": {**COMPLIANT["target"], "timeout": "12m"},
            "priority": "low",
        },
    )
    assert sorted(rules(tmp_path, policy)) == [
        ("policy-max-retries", "error", "retry.max_attempts"),
        ("policy-max-timeout", "error", "target.timeout"),
        ("policy-priority", "error", "priority"),
        ("policy-timezone", "error", "schedule.timezone"),
    ]
    write(tmp_path, "ok", {**COMPLIANT, "team": "search"})  # search may use http targets only
    assert rules(tmp_path, policy) == [("policy-target-type", "error", "target.type")]
    with pytest.raises(ValueError, match=r"priorities\.payments: urgent"):
        OrgPolicy.model_validate({"priorities": {"payments": ["urgent"]}})


def test_each_of_several_schedules_is_linted_in_its_own_zone_at_its_own_path(tmp_path: Path) -> None:
    """#49: a DST gap of the Berlin schedule is the Berlin schedule's (schedules[0]); New York's 02:30 set dst.gap
    (its decision: no warning) and has no overlap at 02:30; UTC has neither."""
    document = {
        "name": "closes",
        "team": "t",
        "schedules": [
            {"name": "berlin", "expression": "30 2 * * *", "timezone": "Europe/Berlin"},
            {"name": "ny", "expression": "30 2 * * *", "timezone": "America/New_York", "dst": {"gap": "skip"}},
            {"name": "utc", "expression": "30 2 * * *"},
        ],
        "target": {"type": "callback"},
    }
    write(tmp_path, "closes", document)
    assert sorted(rules(tmp_path)) == [
        ("dst-gap", "warning", "schedules[0].expression"),
        ("dst-overlap", "warning", "schedules[0].expression"),
    ]
