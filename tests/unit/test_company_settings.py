"""#49: company calendars and maintenance windows as the engine, the offline commands and the paging rules see them:
freezes and the calendar's name in the reasons, a window's own time zone, selectors, windows that run but hold
pages, held pages recorded and paged after the window, and the CLI's --company and --compare as typed."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from jobsched.core.runs import parse_instant
from jobsched.core.spec import JobSpec
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.paging.rules import Channel, Policy, decide_open
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.fires import preview_schedule
from tests.readme import jobsched

T0 = parse_instant("2027-03-01T00:00:00Z")
COMPANY = CompanySettings.from_document(
    {
        "calendars": {
            "trading": {
                "business_days_only": True,
                "freezes": [{"start": "2027-03-03", "end": "2027-03-04", "reason": "audit"}],
            }
        },
        "maintenance": {
            "patch": {"cron": "0 2 * * *", "duration": "1h", "timezone": "Europe/Berlin", "action": "skip"},
            "quiet": {"start": "2027-03-01T10:00:00Z", "end": "2027-03-01T11:00:00Z", "action": "run"},
            "network": {
                "start": "2027-03-01T12:00:00Z",
                "end": "2027-03-01T13:00:00Z",
                "action": "skip",
                "applies_to": {"teams": ["data"], "tags": {"warehouse": "true"}},
            },
        },
    }
)


def job(team: str = "ops", expression: str = "0 * * * *", **extra: object) -> JobSpec:
    return JobSpec.model_validate(
        {"name": "j", "team": team, "schedule": {"expression": expression}, "target": {"type": "callback"}} | extra
    )


def test_a_freeze_skips_its_days_and_the_reason_names_the_company_calendar() -> None:
    spec = job(expression="0 9 * * *", schedule={"expression": "0 9 * * *", "calendar": "company/trading"})
    compiled = preview_schedule(spec, registered_at=T0, company=COMPANY)
    assert compiled is not None
    entries = compiled.preview(T0, 3)
    assert [fire.at.day for fire, _ in entries] == [1, 2, 5]
    reasons = [skip.reason for _, skips in entries for skip in skips]
    assert reasons[0] == "company/trading: 2027-03-03 is in the freeze 2027-03-03 to 2027-03-04 (audit)"


def test_a_window_keeps_its_own_time_zone_and_a_selector_picks_jobs_without_a_line() -> None:
    named = job(maintenance=["company/patch"])
    fires = preview_schedule(named, registered_at=T0, company=COMPANY)
    assert fires is not None
    # 02:00-03:00 Berlin is 01:00-02:00 UTC in winter: the 01:00 instant is skipped.
    assert [o.at.hour for o in fires.next_fires(T0, 3)] == [2, 3, 4]
    picked = job(team="data", tags={"warehouse": "true"})
    other = job(team="data")
    assert [name for name, _ in COMPANY.windows_of(picked)] == ["company/network"]
    assert COMPANY.windows_of(other) == []


def test_a_window_that_runs_holds_pages_but_moves_no_instant() -> None:
    quiet = job(maintenance=["company/quiet"])
    fires = preview_schedule(quiet, registered_at=T0, company=COMPANY)
    assert fires is not None and [o.at.hour for o in fires.next_fires(parse_instant("2027-03-01T09:30:00Z"), 2)] == [
        10,
        11,
    ]
    assert COMPANY.holding_pages(quiet, parse_instant("2027-03-01T10:30:00Z")) == "company/quiet"
    assert COMPANY.holding_pages(quiet, parse_instant("2027-03-01T11:00:00Z")) is None  # the end is not in it


def test_a_held_page_is_recorded_and_the_first_event_after_the_window_pages() -> None:
    policy = Policy(Channel("primary", sns_topic="arn:aws:sns:us-east-1:123456789012:ops"))

    def failed(run_id: str, at: datetime) -> EscalationEvent:
        return EscalationEvent(
            kind="run_failed", subject="ops/j", occurred_at=at.isoformat(), team="ops", job="ops/j", run_id=run_id
        )

    during = parse_instant("2027-03-01T10:30:00Z")
    held = decide_open(None, failed("e1", during), Policy(**{**policy.__dict__, "held_by": "company/quiet"}), during)
    assert held.pages == () and held.incident is not None and held.incident.paged == ()
    assert held.incident.held == ({"role": "primary", "window": "company/quiet", "at": "2027-03-01T10:30:00Z",
                                   "kind": "run_failed"},)  # fmt: skip
    after = parse_instant("2027-03-01T11:05:00Z")
    paged = decide_open(held.incident, failed("e2", after), policy, after)
    assert [page.role for page in paged.pages] == ["primary"] and paged.incident is not None
    assert paged.incident.failures == 2 and paged.incident.held == held.incident.held


@pytest.mark.parametrize("command", ["lint", "validate"])
def test_offline_commands_resolve_company_names_with_the_company_file(command: str) -> None:
    without = jobsched(command, "examples/company")
    assert without.returncode == (1 if command == "lint" else 0), without.stdout + without.stderr
    if command == "lint":
        assert "unknown-company-reference" in without.stdout
    else:
        assert "is not in --company" in without.stdout
    resolved = jobsched(command, "examples/company", "--company", "examples/company.yaml")
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    assert "unknown-company-reference" not in resolved.stdout and "not in --company" not in resolved.stdout


def test_simulate_compare_lists_the_jobs_a_company_change_moves() -> None:
    done = jobsched(
        "simulate", "examples/company", "--company", "examples/company.yaml", "--compare", "examples/company-next.yaml",
        "--from", "2027-03-01T00:00:00Z", "--to", "2028-01-01T00:00:00Z", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    moved = {entry["job"]: entry for entry in json.loads(done.stdout)["moved"]}
    assert set(moved) == {"payments/payroll-export"}  # the warehouse load names no calendar
    payroll = moved["payments/payroll-export"]
    assert payroll["added"] == [] and "2027-11-26T22:00:00Z" in payroll["removed"]  # the day after Thanksgiving
    assert [day for day in payroll["removed"] if day.startswith("2027-12")] == [
        f"2027-12-{day}T22:00:00Z" for day in ("13", "14", "15", "16", "17")
    ]
