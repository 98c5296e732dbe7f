"""The console's custom widget over real tables (moto): the event CloudWatch sends, the HTML it gets."""

from __future__ import annotations

from jobsched.console.widget import render_widget
from tests.aws.harness import Clock, Stack


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
        return render_widget({"widgetContext": {**context, "params": params}, **params}, stack.jobs, stack.runs, now)

    team = widget(view="team", team="ops")
    assert "report" in team and "#1a7f37" in team and "<script" not in team and "<html" not in team
    timeline = widget(view="job", team="ops", job="report")
    assert "Job ops/report" in timeline and run.run_id in timeline
    detail = widget(view="run", team="ops", job="report", run_id=run.run_id)
    assert "SUCCEEDED" in detail and "scheduled for" in detail
    assert "Not found" in widget(view="run", team="ops", job="report", run_id="nope")
