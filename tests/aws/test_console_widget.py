"""The console's custom widget over real tables (moto): the event CloudWatch sends, the HTML it gets."""

from __future__ import annotations

import pytest

from jobsched.console import views
from jobsched.console.widget import Viewer, render_widget, viewer_of
from jobsched.registry.jobs import pause_job
from tests.aws.harness import Clock, Stack

OPS = Viewer("ops")
ONCALL = Viewer(None, every_team=True)
WIDGET_FN = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-test-Console"


def test_the_widget_renders_the_team_the_job_timeline_and_a_run(stack: Stack, clock: Clock) -> None:
    stack.register(
        {
            "name": "report",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    clock.set("2027-01-04T09:00:00Z")
    stack.tick()
    stack.pump()
    [run] = stack.run_list("ops/report")
    now = clock()
    context = {"timeRange": {"start": int((now.timestamp() - 86400) * 1000), "end": int(now.timestamp() * 1000)}}

    def widget(**params: str) -> str:
        return render_widget(
            {"widgetContext": {**context, "params": params}, **params}, stack.jobs, stack.runs, now, viewer=OPS
        )

    team = widget(view="team", team="ops")
    assert "report" in team and "#1a7f37" in team and "<script" not in team and "<html" not in team
    timeline = widget(view="job", team="ops", job="report")
    assert "Job ops/report" in timeline and run.run_id in timeline
    detail = widget(view="run", team="ops", job="report", run_id=run.run_id)
    assert "SUCCEEDED" in detail and "scheduled for" in detail
    assert "Not found" in widget(view="run", team="ops", job="report", run_id="nope")


def test_the_explain_view_answers_what_jobsched_explain_answers(stack: Stack, clock: Clock) -> None:
    stack.register(
        {
            "name": "report",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    clock.set("2027-01-04T09:00:00Z")
    stack.tick()
    stack.pump()

    def widget(**params: str) -> str:
        return render_widget(
            {"widgetContext": {"params": params}, **params}, stack.jobs, stack.runs, clock(), viewer=OPS
        )

    ran = widget(view="explain", team="ops", job="report", at="2027-01-04T09:00:00Z")
    assert "2027-01-04T09:00:00Z (2027-01-04 09:00:00 UTC): RAN 20270104T090000Z" in ran, ran
    assert "<li>run 20270104T090000Z: SUCCEEDED, attempt 1 of 3</li>" in ran
    never = widget(view="explain", team="ops", job="report", at="2027-01-04T09:30:00Z")
    assert "NOT-SCHEDULED" in never and "the fire after it: 2027-01-04T10:00:00Z" in never
    assert "is not an instant" in widget(view="explain", team="ops", job="report", at="<script>")
    assert "<script>" not in widget(view="explain", team="ops", job="report", at="<script>")
    assert "Not allowed" in render_widget(
        {"view": "explain", "team": "billing", "job": "x", "at": "2027-01-04T09:00"},
        stack.jobs,
        stack.runs,
        clock(),
        viewer=OPS,
    )


def test_the_team_timeline_puts_the_most_failed_job_first_and_says_when_a_row_is_partial(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, function in (("calm", "echo"), ("shaky", "broken")):
        stack.register(
            {
                "name": name,
                "team": "ops",
                "schedule": {"expression": "0 * * * *"},
                "target": {"type": "lambda", "function": function},
                "retry": {"max_attempts": 1},
            }
        )
    stack.lambdas.functions["broken"] = lambda event: (_ for _ in ()).throw(RuntimeError("down"))
    for hour in ("09", "10", "11"):
        clock.set(f"2027-01-04T{hour}:00:00Z")
        stack.tick()
        stack.pump()
    now = clock()
    context = {"timeRange": {"start": int((now.timestamp() - 86400) * 1000), "end": int(now.timestamp() * 1000)}}
    params = {"view": "timeline", "team": "ops"}
    page = render_widget(
        {"widgetContext": {**context, "params": params}, **params}, stack.jobs, stack.runs, now, viewer=OPS
    )
    assert "<script" not in page and "2 jobs" in page
    assert page.index(">shaky<") < page.index(">calm<"), "the most failed first"
    assert page.count("2027-01-04T10:00:00Z failed") == 1 and page.count("2027-01-04T10:00:00Z succeeded") == 1
    # Fewer runs read than the range holds: the row says its oldest are not shown.
    monkeypatch.setattr(views, "TEAM_TIMELINE_RUNS", 2)
    page = render_widget(
        {"widgetContext": {**context, "params": params}, **params}, stack.jobs, stack.runs, now, viewer=OPS
    )
    assert "09:00:00Z" not in page and "more runs in the range than were read" in page


def test_open_incidents_are_listed_across_teams_and_leave_the_list_when_resolved(stack: Stack, clock: Clock) -> None:
    from jobsched.core.records import StoredIncident

    stack.register(
        {
            "name": "ledger",
            "team": "payments",
            "runbook_url": "https://wiki.example.com/ledger",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    values = {
        "subject": "payments/ledger",
        "incident_class": "failing",
        "opened_at": "2027-01-04T08:00:00Z",
        "first_kind": "run_failed",
        "failures": 3,
        "paged": ["primary"],
        "auto_paused": False,
        "last": {"error": "HTTP 503: <b>down</b>"},
        "seen": [],
    }
    stored = stack.jobs.put_incident(StoredIncident(values), expected_version=0)
    other = {**values, "subject": "ops/backup", "opened_at": "2027-01-04T07:00:00Z", "failures": 1}
    stack.jobs.put_incident(StoredIncident(other), expected_version=0)
    listed = [incident.incident.subject for incident in stack.jobs.open_incident_list()]
    assert listed == ["ops/backup", "payments/ledger"], "across teams, oldest first"
    incidents = {"widgetContext": {"params": {"view": "incidents"}}}
    page = render_widget(incidents, stack.jobs, stack.runs, clock(), viewer=ONCALL)
    assert "payments/ledger" in page and "ops/backup" in page and "https://wiki.example.com/ledger" in page
    # Through a team's alias: that team's incidents only.
    mine = render_widget(incidents, stack.jobs, stack.runs, clock(), viewer=OPS)
    assert "ops/backup" in mine and "payments/ledger" not in mine and "wiki.example.com" not in mine
    assert "&lt;b&gt;down" in page and "primary" in page and "59 min" in page
    stack.jobs.put_incident(
        StoredIncident(stored.values, stored.version, resolved=True), expected_version=stored.version
    )
    assert [i.incident.subject for i in stack.jobs.open_incident_list()] == ["ops/backup"]


def test_the_widget_shows_a_team_only_through_that_teams_alias(stack: Stack, clock: Clock) -> None:
    """#26: the console-user policy let every team invoke the widget, which rendered whatever team the event
    named. Now the alias invoked decides: team-ops sees ops only; unqualified sees nothing; oncall sees all."""
    stack.register(
        {
            "name": "ledger",
            "team": "payments",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    pause_job(stack.jobs, "payments/ledger", now=clock(), principal="test", reason="secret migration INC-42")
    now = clock()

    def as_invoked(alias: str | None, **params: str) -> str:
        viewer = viewer_of(f"{WIDGET_FN}:{alias}" if alias else WIDGET_FN)
        return render_widget(
            {"widgetContext": {"params": params}, **params}, stack.jobs, stack.runs, now, viewer=viewer
        )

    for params in (
        {"view": "team", "team": "payments"},
        {"view": "timeline", "team": "payments"},
        {"view": "job", "team": "payments", "job": "ledger"},
        {"view": "run", "team": "payments", "job": "ledger", "run_id": "20270104T090000Z"},
    ):
        for alias in ("team-ops", None, "team-", "$LATEST", "1"):
            page = as_invoked(alias, **params)
            assert "Not allowed" in page and "INC-42" not in page and "ledger" not in page.split("</h")[0], (
                alias,
                page,
            )
    assert "INC-42" in as_invoked("team-payments", view="team", team="payments")
    assert "INC-42" in as_invoked("oncall", view="team", team="payments")
    assert "Not allowed" in as_invoked(None, view="incidents")
    assert "Type a team" in as_invoked("team-CONSOLE_TEAM", view="team", team="CONSOLE_TEAM")


def test_a_jobs_page_shows_what_it_runs_after_or_waits_for_and_what_runs_after_it(stack: Stack, clock: Clock) -> None:
    echo = {"type": "lambda", "function": "echo"}
    stack.register({"name": "extract", "team": "ops", "schedule": {"expression": "0 * * * *"}, "target": echo})
    stack.register({"name": "ledger", "team": "payments", "target": echo, "share_with": ["ops"]})
    stack.register(
        {
            "name": "report",
            "team": "ops",
            "target": echo,
            "triggers": [{"after": {"job": "ops/extract"}}],
            "wait_for": [{"job": "payments/ledger", "within": "6h"}],
        }
    )
    clock.set("2027-01-04T09:00:00Z")
    stack.tick()
    stack.pump()
    now = clock()
    context = {"timeRange": {"start": int((now.timestamp() - 86400) * 1000), "end": int(now.timestamp() * 1000)}}

    def job_page(name: str) -> str:
        params = {"view": "job", "team": "ops", "job": name}
        return render_widget(
            {"widgetContext": {**context, "params": params}, **params}, stack.jobs, stack.runs, now, viewer=OPS
        )

    report = job_page("report")
    assert "<h2>Dependencies</h2>" in report
    assert "ops/extract" in report and "after, on succeeded" in report
    assert "payments/ledger" in report and "waits for a succeeded run within 6h" in report
    extract = job_page("extract")
    assert "ops/report" in extract and "20270104T090000Z" in extract  # its own last run
