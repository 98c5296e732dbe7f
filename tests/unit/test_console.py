"""The console renderer, from fixtures (#18): what a person sees, checked as structure."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import timedelta

from jobsched.console import render, run_page, timelines
from jobsched.console.actions import team_of_alias
from jobsched.console.palette import BACKGROUND, MUTED, OUTCOMES, TEXT, contrast
from jobsched.console.widget import WidgetControls, render_widget, time_range
from jobsched.core.run_records import Run, TaskState
from jobsched.core.runs import RunStatus, TaskStatus
from jobsched.core.spec import JobSpec
from jobsched.dag.definition import TaskNode
from jobsched.schedule.engine import compile_schedule
from jobsched.watch.health import JobHealth
from tests.helpers import utc

NOW = utc("2027-03-16T12:00:00Z")


def health(job: str, strip: tuple[str, ...], **extra: object) -> JobHealth:
    values: dict[str, object] = {
        "job": job,
        "state": "ACTIVE",
        "paused_reason": None,
        "window_days": 7.0,
        "runs": len(strip),
        "success_rate": 0.5,
        "strip": strip,
        "lateness_p50_s": 0.4,
        "lateness_p95_s": 1.2,
        "duration_p50_s": 1.0,
        "duration_p95_s": 2.0,
        "streak": "1 failed",
        "next_fire": "2027-03-16T13:00:00Z",
        "open_incidents": (),
    }
    return JobHealth(**(values | extra))  # type: ignore[arg-type]


def run(at: str, status: RunStatus, *, attempt: int = 1, late_ms: int | None = 400, reason: str | None = None) -> Run:
    scheduled = utc(at)
    return Run(
        job="payments/report",
        run_id=scheduled.strftime("%Y%m%dT%H%M%SZ"),
        team="payments",
        status=status,
        attempt=attempt,
        scheduled_at=scheduled,
        fire_at=scheduled,
        trigger="schedule",
        spec_version=1,
        correlation_id="c",
        lateness_ms=late_ms,
        reason=reason,
    )


# 02:30 in New York: 2027-03-14's wall time does not exist (DST), and 2027-03-15 is in a blackout.
NEW_YORK_REPORT = JobSpec.model_validate(
    {
        "name": "report",
        "team": "payments",
        "target": {"type": "callback"},
        "schedule": {
            "expression": "30 2 * * *",
            "timezone": "America/New_York",
            "blackouts": [{"start": "2027-03-15T00:00:00Z", "end": "2027-03-16T00:00:00Z"}],
        },
    }
)


def links(path: str) -> str:
    return "/console" + path


def test_every_outcome_has_a_symbol_and_readable_white_text() -> None:
    symbols = [look.symbol for look in OUTCOMES.values()]
    assert len(set(symbols)) == len(symbols) and all(symbols)
    assert all(contrast("#ffffff", look.colour) >= 4.5 for look in OUTCOMES.values())
    assert contrast(TEXT, BACKGROUND) >= 7 and contrast(MUTED, BACKGROUND) >= 4.5


def test_the_team_view_lists_jobs_with_strips_badges_and_links() -> None:
    page = render.team_view(
        "payments",
        [
            health("payments/ledger", ("succeeded", "failed", "timed_out"), open_incidents=("failing",)),
            health("payments/nightly", ("succeeded", "retried"), state="PAUSED", paused_reason="migration"),
        ],
        links,
    )
    assert page.index("ledger") < page.index("nightly"), "in the order given: worst first"
    assert 'href="/console/teams/payments/jobs/ledger"' in page
    for outcome in ("succeeded", "failed", "timed_out", "retried"):
        assert OUTCOMES[outcome].colour in page
    assert "<title>1/3 succeeded</title>" in page and "<title>3/3 timed out</title>" in page
    assert 'aria-label="last 3 runs, old to new: 1 succeeded, 1 failed, 1 timed out"' in page
    assert "failing" in page and "paused" in page and 'title="migration"' in page
    assert "<script" not in page and "50.0%" in page and "1.2 s" in page


def test_team_names_and_errors_are_escaped() -> None:
    page = render.team_view("payments", [health("payments/<img src=x onerror=alert(1)>", ("failed",))], links)
    assert "<img" not in page and "&lt;img" in page


def test_the_timeline_shows_runs_by_day_and_hour_skips_with_reasons_and_dst_marks() -> None:
    spec = NEW_YORK_REPORT
    start, end = utc("2027-03-13T00:00:00Z"), NOW
    occurrences = list(compile_schedule(spec.schedule, hash_key=spec.key).occurrences(start, until=end))  # type: ignore[arg-type]
    runs = [run("2027-03-13T07:30:00Z", RunStatus.SUCCEEDED), run("2027-03-14T07:00:00Z", RunStatus.FAILED)]
    page = timelines.timeline_view("payments/report", runs, occurrences, "America/New_York", start, end)
    assert "<script" not in page and page.count("<svg") >= 1
    assert OUTCOMES["failed"].colour in page and OUTCOMES["succeeded"].colour in page
    assert "skipped: in blackout" in page, "the skipped instant carries its reason on hover"
    assert re.search(r"<title>[^<]*DST gap", page), "the DST transition is marked with its reason"
    assert "Sat 03-13" in page and "Tue 03-16" in page


def test_the_team_timeline_has_a_row_per_job_and_a_column_per_span_of_the_range() -> None:
    spec = NEW_YORK_REPORT
    start, end = utc("2027-03-12T12:00:00Z"), NOW  # four days: 40 columns of 2.4 hours
    occurrences = list(compile_schedule(spec.schedule, hash_key=spec.key).occurrences(start, until=end))  # type: ignore[arg-type]
    report = timelines.JobInstants(
        "payments/report",
        [run("2027-03-13T07:30:00Z", RunStatus.SUCCEEDED), run("2027-03-14T07:00:00Z", RunStatus.SUCCEEDED)],
        occurrences,
    )
    ledger = timelines.JobInstants(
        "payments/<ledger>",
        [run("2027-03-16T09:00:00Z", RunStatus.FAILED, late_ms=90_000)],
        [],
        partial=True,
    )
    page = timelines.team_timeline_view("payments", [ledger, report], start, end, links, of_jobs=3)
    assert "<script" not in page and "<ledger>" not in page and "&lt;ledger&gt;" in page
    assert page.index("&lt;ledger&gt;") < page.index(">report<"), "rows in the order given"
    assert 'href="/console/teams/payments/jobs/report"' in page
    assert "2 of 3 jobs" in page and "a column per 2 h" in page
    # A run's cell sits in its span: 2027-03-13T07:30Z is 19.5 h after the start, in column 8 (from 0).
    x8 = 170 + 8 * 20
    assert re.search(rf'<title>2027-03-13T07:30:00Z succeeded, 0.4 s late</title><rect x="{x8}"', page)
    # Later is paler: 90 s late -> 1 - 0.75 * 0.5.
    assert re.search(r'failed, 90.0 s late</title><rect [^>]*fill-opacity="0.62"', page)
    assert "skipped: in blackout" in page, "the skipped instant carries its reason on hover"
    assert re.search(r"<title>[^<]*DST gap", page), "the DST transition is marked with its reason"
    assert "more runs in the range than were read" in page, "a partial row says so"


def test_a_dag_run_has_a_gantt_chart_and_a_dependency_graph() -> None:
    dag_run = run("2027-03-16T11:00:00Z", RunStatus.RUNNING)
    dag_run = Run(**{**dag_run.__dict__, "started_at": utc("2027-03-16T11:00:01Z")})
    graph = {
        "extract": TaskNode((), "all_success"),
        "load": TaskNode(("extract",), "all_success"),
        "report": TaskNode(("load",), "all_success"),
        "cleanup": TaskNode(("load",), "all_done"),
    }
    tasks = {
        "extract": TaskState(
            "extract",
            TaskStatus.SUCCEEDED,
            2,
            started_at=utc("2027-03-16T11:00:02Z"),
            finished_at=utc("2027-03-16T11:00:40Z"),
        ),
        "load": TaskState(
            "load",
            TaskStatus.FAILED,
            1,
            started_at=utc("2027-03-16T11:00:41Z"),
            finished_at=utc("2027-03-16T11:01:00Z"),
            error="disk full",
        ),
        "report": TaskState("report", TaskStatus.SKIPPED, 0),
        "cleanup": TaskState("cleanup", TaskStatus.WAITING, 1),
    }
    page = run_page.run_view(dag_run, tasks, graph, ["extract", "load", "report", "cleanup"], NOW)
    assert "Tasks over time" in page and "Dependencies" in page and "<script" not in page
    assert "extract: succeeded after a retry, attempt 2" in page and "disk full" in page
    assert "report: skipped (not run)" in page and "cleanup: waiting" in page
    assert page.count("<line ") == 3, "an edge per dependency"


def test_the_widget_answers_describe_and_takes_the_dashboards_range() -> None:
    assert "view" in render_widget({"describe": True}, None, None, NOW, viewer=None)  # type: ignore[arg-type]
    context = {"timeRange": {"start": 1_800_000_000_000, "end": 1_800_086_400_000, "zoom": {}}}
    start, end = time_range(context, NOW)
    assert end - start == timedelta(days=1)
    assert time_range({}, NOW) == (NOW - timedelta(days=7), NOW)
    placeholder = {"widgetContext": {"params": {"view": "team", "team": "CONSOLE_TEAM"}}}
    empty = render_widget(placeholder, None, None, NOW, viewer=None)  # type: ignore[arg-type]
    assert "Type a team" in empty and "<script" not in empty


ACTIONS_FN = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-prod-ConsoleActions"


def test_widget_buttons_call_the_teams_alias_with_a_confirmation_and_json_no_value_can_escape() -> None:
    controls = WidgetControls(ACTIONS_FN, frozenset({"payments"}))
    paused = health("payments/report", ("failed",), state="PAUSED", paused_reason="db migration")
    page = render.team_view("payments", [paused, health("payments/load", ("succeeded",))], links, controls)
    calls = re.findall(r'endpoint="([^"]+)" confirmation="([^"]+)">([^<]*)</cwdb-action>', page)
    assert {endpoint for endpoint, _, _ in calls} == {f"{ACTIONS_FN}:team-payments"}
    assert sorted(json.loads(body)["action"] for _, _, body in calls) == ["pause", "resume", "trigger", "trigger"]
    assert 'name="reason"' in page and page.count("<cwdb-action") == 4
    # A value with markup in it stays inside the element, as JSON escapes.
    button = render.Button("trigger", "payments/x</cwdb-action><img src=x>", "Trigger", 'Run "x" <now>?')
    text = controls.button(button)
    assert text.count("</cwdb-action>") == 1 and "<img" not in text and "&lt;now&gt;" in text
    [body] = re.findall(r'confirmation="[^"]*">(.*)</cwdb-action>', text)
    assert json.loads(body)["job"].endswith("<img src=x>")


def test_a_team_without_an_alias_gets_no_buttons_and_is_told_why() -> None:
    controls = WidgetControls(ACTIONS_FN, frozenset({"search"}))
    page = render.team_view("payments", [health("payments/report", ("failed",))], links, controls)
    assert "<cwdb-action" not in page and "console_teams" in page


def test_rerun_is_offered_only_for_a_finished_run_forced_for_a_succeeded_one_and_from_failure_for_a_dag() -> None:
    assert render.run_buttons(run("2027-03-16T10:00:00Z", RunStatus.RUNNING), dag=False) == []
    [from_failure, every_task] = render.run_buttons(run("2027-03-16T10:00:00Z", RunStatus.FAILED), dag=True)
    assert (from_failure.action, from_failure.label) == ("rerun_from_failure", "Rerun from failure")
    assert "keep their outcome and output" in from_failure.confirmation
    assert (every_task.action, every_task.label, every_task.force) == ("rerun", "Rerun all tasks", False)
    [dag_succeeded] = render.run_buttons(run("2027-03-16T10:00:00Z", RunStatus.SUCCEEDED), dag=True)
    assert dag_succeeded.force and dag_succeeded.action == "rerun"
    [failed] = render.run_buttons(run("2027-03-16T10:00:00Z", RunStatus.FAILED), dag=False)
    assert failed.action == "rerun" and not failed.force and failed.run_id == "20270316T100000Z"
    [succeeded] = render.run_buttons(run("2027-03-16T10:00:00Z", RunStatus.SUCCEEDED), dag=False)
    assert succeeded.force and "second time" in succeeded.confirmation


def test_the_actions_team_is_the_invoked_alias_never_the_event() -> None:
    assert team_of_alias(f"{ACTIONS_FN}:team-payments") == "payments"
    assert team_of_alias(ACTIONS_FN) is None
    assert team_of_alias(f"{ACTIONS_FN}:$LATEST") is None
    assert team_of_alias(f"{ACTIONS_FN}:7") is None


def test_the_run_page_shows_each_check_passed_or_failed_with_why() -> None:
    checks = [
        {"name": "has-rows", "severity": "error", "passed": True},
        {"name": "lists-files", "severity": "warn", "passed": False, "message": "output: 'files' is <required>"},
    ]
    checked = dataclasses.replace(run("2027-01-04T09:00:00Z", RunStatus.SUCCEEDED), checks=checks)
    page = run_page.run_view(checked, {}, None, [], NOW)
    assert "\u2713 has-rows<br>\u2717 lists-files (warning): output: &#x27;files&#x27; is &lt;required&gt;" in page
    assert "checks" not in run_page.run_view(run("2027-01-04T09:00:00Z", RunStatus.SUCCEEDED), {}, None, [], NOW)


def test_an_approval_waiting_is_a_blue_row_that_says_what_is_asked_and_links_the_run() -> None:
    """#46: a pending approval was a red incident row, like a failure."""
    from datetime import UTC, datetime

    from jobsched.console.incidents_page import incidents_view
    from jobsched.core.records import Incident

    asked = Incident(
        subject="data/etl",
        incident_class="approval",
        opened_at="2027-01-04T09:00:00Z",
        first_kind="approval_requested",
        last={"run_id": "20270104T090000Z", "detail": "task approve waits for approval: delete 40 snapshots?"},
    )
    failing = Incident(
        subject="data/load",
        incident_class="failing",
        opened_at="2027-01-04T09:00:00Z",
        first_kind="run_failed",
        last={"error": "boom"},
    )
    html = incidents_view([asked, failing], {}, datetime(2027, 1, 4, 9, 30, tzinfo=UTC), lambda path: path)
    approval_row, failing_row = html.split("<tr>")[2:]
    assert 'class="badge approval">? waits for approval' in approval_row and "&#9888;" not in approval_row
    assert (
        "delete 40 snapshots?" in approval_row and 'href="/teams/data/jobs/etl/runs/20270104T090000Z"' in approval_row
    )
    assert 'class="badge incident">&#9888; failing' in failing_row and "boom" in failing_row


def test_the_gantt_draws_a_tasks_wait_and_keeps_its_whole_name() -> None:
    """#46: the DAG run page cut task names and did not draw a task's wait (for its data or dependencies)."""
    dag_run = run("2027-03-16T11:00:00Z", RunStatus.RUNNING)
    dag_run = Run(**{**dag_run.__dict__, "started_at": utc("2027-03-16T11:00:00Z")})
    name = "wait-for-the-nightly-export-file"
    tasks = {
        name: TaskState(
            name,
            TaskStatus.SUCCEEDED,
            1,
            parked_at=utc("2027-03-16T11:00:00Z"),
            started_at=utc("2027-03-16T11:00:40Z"),
            finished_at=utc("2027-03-16T11:00:50Z"),
        ),
        "still-waiting": TaskState("still-waiting", TaskStatus.WAITING, 1, parked_at=utc("2027-03-16T11:00:50Z")),
    }
    chart = run_page.gantt(dag_run, tasks, [name, "still-waiting"], utc("2027-03-16T11:01:00Z"))
    assert "waited 40.0 s from 2027-03-16T11:00:00Z" in chart and "waited 10.0 s from" in chart
    assert f"<title>{name}</title>" in chart and "wait-for-the-nigh…" in chart
