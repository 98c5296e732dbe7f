"""Incident rules (pure): thresholds, deduplication, the chain, auto-pause, resolve notices."""

from __future__ import annotations

from datetime import UTC, datetime

from jobsched.core.records import Incident
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.paging.rules import Channel, Policy, decide_open, decide_resolve, render

NOW = datetime(2027, 1, 4, 9, tzinfo=UTC)
POLICY = Policy(
    Channel("primary", sns_topic="arn:aws:sns:us-east-1:123456789012:p"),
    after_failures=2,
    secondary=Channel("secondary", webhook="https://hooks.example.com/s"),
    secondary_after=3,
    auto_pause_after=10,
)


def failure(run: int, kind: str = "run_failed") -> EscalationEvent:
    return EscalationEvent.model_validate(
        {"kind": kind, "subject": "t/j", "occurred_at": "x", "job": "t/j", "run_id": f"r{run}", "attempt": 1}
    )


def play(count: int, incident: Incident | None = None) -> tuple[Incident | None, list[str], list[str | None]]:
    notices, pauses = [], []
    for run in range(count):
        decision = decide_open(incident, failure(run), POLICY, NOW)
        incident = decision.incident
        notices += [f"{page.role}:{page.notice}" for page in decision.pages]
        pauses.append(decision.pause_reason)
    return incident, notices, pauses


def test_pages_at_the_threshold_then_the_secondary_then_the_pause_and_nothing_else() -> None:
    incident, notices, pauses = play(100)
    assert notices == ["primary:opened", "secondary:escalated", "primary:paused"]
    assert incident is not None and incident.failures == 100 and incident.paged == ("primary", "secondary")
    assert [index for index, reason in enumerate(pauses) if reason] == [9]  # the 10th failure


def test_the_same_event_twice_counts_once() -> None:
    incident, _, _ = play(1)
    again = decide_open(incident, failure(0), POLICY, NOW)
    assert again.incident == incident and again.pages == ()


def test_resolve_notifies_each_contact_that_was_paged_and_nothing_without_an_incident() -> None:
    incident, _, _ = play(6)
    success = EscalationEvent(kind="run_succeeded", subject="t/j", occurred_at="x", run_id="r9")
    resolved = decide_resolve(incident, success)
    assert resolved.resolved and [(p.role, p.notice) for p in resolved.pages] == [
        ("primary", "resolved"),
        ("secondary", "resolved"),
    ]
    assert decide_resolve(None, success).pages == ()
    below_threshold, _, _ = play(1)
    assert decide_resolve(below_threshold, success).pages == (), "nobody was paged: no notice"


def test_a_late_success_resolves_failures_but_not_lateness() -> None:
    late = EscalationEvent(kind="run_succeeded", subject="t/j", occurred_at="x", on_time=False)
    assert late.resolves() == ("failing", "quality")
    on_time = EscalationEvent(kind="run_succeeded", subject="t/j", occurred_at="x")
    assert on_time.resolves() == ("failing", "late", "quality")


def test_a_success_with_a_failed_warning_check_keeps_the_quality_incident_and_pages_at_warning_severity() -> None:
    warned = EscalationEvent(kind="run_succeeded", subject="t/j", occurred_at="x", warned=True)
    assert warned.resolves() == ("failing", "late")
    decision = decide_open(None, failure(1, "checks_warned"), POLICY, NOW)
    assert decision.incident is not None and decision.incident.incident_class == "quality"
    (page,) = decision.pages
    assert page.title.startswith("[jobsched, warning] ") and "warning check failed" in page.title
    text, document = render(page, {})
    assert document["severity"] == "warning" and "severity: warning" in text
    late = decide_open(None, failure(1, "deadline_missed"), POLICY, NOW).pages[0]
    assert render(late, {})[1]["severity"] == "critical"


def test_deadline_and_circuit_incidents_page_on_the_first_event() -> None:
    for kind in ("deadline_missed", "circuit_open", "dispatcher_stalled"):
        decision = decide_open(None, failure(1, kind), POLICY, NOW)
        assert [p.notice for p in decision.pages] == ["opened"] and decision.pause_reason is None


def test_an_approval_request_pages_at_info_severity_and_its_decision_resolves_it() -> None:
    opened = decide_open(None, failure(1, "approval_requested"), POLICY, NOW)
    assert opened.incident is not None and opened.incident.incident_class == "approval"
    (page,) = opened.pages  # on the first request, whatever after_failures says
    assert page.title == "[jobsched, approval] t/j: approval requested"
    assert render(page, {})[1]["severity"] == "info"
    decided = EscalationEvent(kind="approval_decided", subject="t/j", occurred_at="x", run_id="r1")
    assert decided.resolves() == ("approval",)
    resolved = decide_resolve(opened.incident, decided)
    assert resolved.resolved and [p.notice for p in resolved.pages] == ["resolved"]


def test_a_page_links_the_runs_console_page_where_the_deployment_has_one() -> None:
    """#46: a page's `run:` link opened the API's JSON. Where a console has a page per run (the local one), the page
    links it too; the API link stays for tools."""
    from jobsched.paging.rules import Links

    event = {"run_id": "20270104T090000Z", "job": "ops/report"}
    plain = Links(region="us-east-1", api_url="https://api.example.com/prod").for_event(event, None)
    assert plain["run"] == "https://api.example.com/prod/teams/ops/jobs/report/runs/20270104T090000Z"
    assert "console" not in plain
    local = Links(region="us-east-1", api_url="http://127.0.0.1:8080", console_url="http://127.0.0.1:8080/console")
    assert local.for_event(event, None)["console"] == (
        "http://127.0.0.1:8080/console/teams/ops/jobs/report/runs/20270104T090000Z"
    )


def test_the_pages_links_name_the_deployments_region_never_a_default() -> None:
    """#47: the region comes from the deployment (Lambda's AWS_REGION), not a us-east-1 default in code."""
    import pytest

    from jobsched.core.names import Env
    from jobsched.core.settings import Settings

    needed = {Env.JOBS_TABLE: "j", Env.RUNS_TABLE: "r", Env.ESCALATION_QUEUE: "e"}
    needed |= {Env.QUEUES_BY_PRIORITY[priority]: priority for priority in ("high", "normal", "low")}
    assert Settings.from_env(needed | {"AWS_REGION": "eu-west-1"}).deployed_region() == "eu-west-1"
    assert Settings.from_env(needed | {"AWS_DEFAULT_REGION": "ap-south-1"}).deployed_region() == "ap-south-1"
    with pytest.raises(RuntimeError, match="AWS_REGION is not set"):
        Settings.from_env(needed).deployed_region()
