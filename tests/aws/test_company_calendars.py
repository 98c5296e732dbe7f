"""#49: company calendars and maintenance windows. Platform admins define them once (API, CLI, audited); jobs name
them (company/NAME) or a window's selector picks them; a window defers one job's runs and skips another's while it
is open and holds their pages (recorded on the incident, paged by the first failure after it); a calendar change
lists the jobs whose next fires it moves, and is refused if a job it moves would break the organisation's policy."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.core.runs import RunStatus
from jobsched.registry.policy import OrgPolicy
from tests.aws.api_client import ADMIN, ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack

FAILING = "warehouse-down"


@pytest.fixture(autouse=True)
def failing_function(stack: Stack) -> None:
    def fail(event: dict[str, Any]) -> Any:
        raise RuntimeError("the warehouse is down for patching")

    stack.lambdas.functions[FAILING] = fail


def loader(name: str, team: str, **extra: Any) -> dict[str, Any]:
    """At :58 each hour, failing, three attempts a minute apart: the 09:58 run ends failed at 10:00."""
    return {
        "name": name,
        "team": team,
        "schedule": {"expression": "58 * * * *"},
        "target": {"type": "lambda", "function": FAILING},
        "retry": {"max_attempts": 3, "backoff": {"initial": "1m", "max": "1m", "jitter": "none"}},
        **extra,
    }


def test_a_window_defers_one_job_skips_another_and_holds_their_pages_until_it_closes(
    stack: Stack, clock: Clock
) -> None:
    clock.set("2027-01-04T09:50:00Z")
    api = ApiClient(stack)
    defer = {"start": "2027-01-04T10:00:00Z", "end": "2027-01-04T11:30:00Z", "action": "defer"}
    skip = defer | {"action": "skip", "applies_to": {"teams": ["data"], "tags": {"warehouse": "true"}}}
    for entry, document in (("db-maintenance", defer), ("network-freeze", skip)):
        put = api.call("PUT", f"/admin/company/maintenance/{entry}?reason=patching", document)
        assert put.status == 200 and put.body["applied"], put.body
    stack.register(loader("deferred", "ops", maintenance=["company/db-maintenance"]))
    stack.register(loader("skipped", "data", tags={"warehouse": "true"}))  # the selector picks it, no line needed
    stack.register(loader("unrelated", "data"))
    preview = api.call("GET", "/teams/data/jobs/skipped/preview?count=2&after=2027-01-04T10:30:00Z").body
    assert [entry["utc"] for entry in preview] == ["2027-01-04T11:58:00Z", "2027-01-04T12:58:00Z"]
    assert "in maintenance company/network-freeze" in preview[0]["skipped"][0]["reason"]

    stack.minutes(12)  # to 10:02: the 09:58 runs failed at 10:00, inside both windows
    failed = {job: stack.run_list(job)[0].status for job in ("ops/deferred", "data/skipped", "data/unrelated")}
    assert set(failed.values()) == {RunStatus.FAILED}
    stack.handle_escalations()
    paged = {page["subject"].split("] ", 1)[1].split(":")[0] for page in stack.pages()}
    assert paged == {"data/unrelated"}  # no window holds its pages
    for job, window in (("ops/deferred", "company/db-maintenance"), ("data/skipped", "company/network-freeze")):
        incident = api.call("GET", f"/teams/{job.replace('/', '/jobs/')}").body["open_incidents"][0]
        assert incident["paged"] == [] and [h["window"] for h in incident["held"]] == [window]
        assert incident["held"][0]["role"] == "primary" and incident["held"][0]["kind"] == "run_failed"

    stack.minutes(125)  # to 12:07: the windows closed at 11:30
    instants = {
        job: [run.scheduled_at.strftime("%H:%M") for run in sorted(stack.run_list(job), key=lambda r: r.scheduled_at)]
        for job in ("ops/deferred", "data/skipped", "data/unrelated")
    }
    assert instants == {
        "ops/deferred": ["09:58", "11:30", "11:58"],  # 10:58 deferred to the window's end
        "data/skipped": ["09:58", "11:58"],  # 10:58 skipped
        "data/unrelated": ["09:58", "10:58", "11:58"],
    }
    stack.handle_escalations()
    paged_after = [page["subject"].split("] ", 1)[1].split(":")[0] for page in stack.pages()]
    # The first failure after each window pages its job once (the held page was not lost); unrelated stays paged.
    assert sorted(paged_after) == ["data/skipped", "ops/deferred"]


def test_a_calendar_change_lists_the_jobs_it_moves_and_is_refused_if_it_breaks_the_policy(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    clock.set("2027-01-04T08:00:00Z")  # a Monday
    api = ApiClient(stack)
    days = {"skip_holidays": "NYSE", "business_days_only": True}
    assert api.call("PUT", "/admin/company/calendars/us-business-days?reason=setup", days).status == 200
    daily = {"expression": "0 17 * * *", "timezone": "America/New_York", "calendar": "company/us-business-days"}
    for name in ("payroll", "ledger"):
        stack.register({"name": name, "team": "payments", "schedule": daily, "target": {"type": "callback"}})
    stack.register({"name": "own", "team": "payments", "schedule": daily | {"calendar": days},
                    "target": {"type": "callback"}})  # fmt: skip
    unknown = {"schedule": daily | {"calendar": "company/nope"}, "target": {"type": "callback"}}
    refused = api.call("PUT", "/teams/payments/jobs/lost", unknown, principal=team_role("payments"))
    assert refused.status == 422 and refused.body["error"]["errors"][0]["code"] == "unknown_company_reference"
    assert "us-business-days" in refused.body["error"]["errors"][0]["message"]

    frozen = days | {"freezes": [{"start": "2027-01-05", "end": "2027-01-08", "reason": "audit"}]}
    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, ADMIN))
    calendar_file = tmp_path / "calendar.yaml"
    calendar_file.write_text(yaml.safe_dump(frozen))
    shown = CliRunner().invoke(
        cli, ["company", "set", "calendar", "us-business-days", str(calendar_file), "--reason", "audit", "--dry-run"]
    )
    assert shown.exit_code == 0, shown.output
    assert "dry run: not applied; reaches 2 job(s), moves 2" in shown.output
    assert (
        "payments/ledger" in shown.output and "payments/payroll" in shown.output and "payments/own" not in shown.output
    )
    assert api.call("GET", "/company").body["calendars"]["us-business-days"]["freezes"] == []  # nothing stored

    applied = api.call("PUT", "/admin/company/calendars/us-business-days?reason=audit", frozen).body
    assert applied["applied"] and {m["job"] for m in applied["moved"]} == {"payments/ledger", "payments/payroll"}
    payroll = next(m for m in applied["moved"] if m["job"] == "payments/payroll")
    assert payroll["before"][:2] == ["2027-01-04T22:00:00Z", "2027-01-05T22:00:00Z"]
    assert payroll["after"][:2] == ["2027-01-04T22:00:00Z", "2027-01-11T22:00:00Z"]  # the freeze's days skipped
    job = api.call("GET", "/teams/payments/jobs/payroll").body
    assert job["next_fire_times"][:2] == ["2027-01-04T22:00:00Z", "2027-01-11T22:00:00Z"]
    history = api.call("GET", "/admin/company/history").body["entries"]
    assert history[0]["action"] == "calendar_set" and history[0]["reason"] == "audit"
    assert sorted(history[0]["details"]["moved"]) == ["payments/ledger", "payments/payroll"]

    # Deferring a skipped half-hourly fire by 5 minutes brings it within 25 minutes of the next: the floor is 30m.
    api.services.policy = OrgPolicy.model_validate({"schedule": {"min_interval": "30m"}})
    patch = {"cron": "25 2 * * SUN", "duration": "10m", "action": "skip"}
    assert api.call("PUT", "/admin/company/maintenance/patch?reason=sundays", patch).status == 200
    stack.register({"name": "sync", "team": "ops", "schedule": {"expression": "*/30 * * * *"},
                    "maintenance": ["company/patch"], "target": {"type": "callback"}})  # fmt: skip
    breaking = api.call("PUT", "/admin/company/maintenance/patch?reason=defer", patch | {"action": "defer"})
    assert breaking.status == 422, breaking.body
    error = breaking.body["error"]["errors"][0]
    assert error["code"] == "policy_violation" and error["field"] == "jobs[ops/sync].schedule.expression"
    assert "policy-min-interval" in error["message"] and "fires every 25m" in error["message"]
    assert api.call("GET", "/company").body["maintenance"]["patch"]["action"] == "skip"  # unchanged

    in_use = api.call("DELETE", "/admin/company/calendars/us-business-days?reason=cleanup")
    assert in_use.status == 409 and in_use.body["error"]["code"] == "in_use"
    member = api.call("PUT", "/admin/company/calendars/x?reason=y", days, principal=team_role("payments"))
    assert member.status == 403
