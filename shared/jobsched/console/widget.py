"""A CloudWatch custom widget: the event's parameters and time range in, a view's HTML out.

The dashboard passes ``view`` (team, job, run), ``team`` and, for job and run, ``job`` and ``run_id``;
its time range bounds the job timeline. Who sees what is IAM's: on the dashboard and on this function.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

from jobsched.console import render, views

DESCRIPTION = """\
### jobsched console
Parameters: `view` (`incidents` | `team` | `job` | `run`), `team`, and for `job`/`run`: `job`, `run_id`.
The dashboard's time range bounds the job timeline (at most 62 days).
```
view: team
team: payments
```
"""


def no_links(path: str) -> str | None:
    """Inside CloudWatch a page has no URL of its own: names are shown, not linked."""
    return None


def render_widget(event: dict[str, Any], jobs: views.ConsoleJobs, runs: views.ConsoleRuns, now: datetime) -> str:
    if event.get("describe"):
        return DESCRIPTION
    context = event.get("widgetContext") or {}
    params = {**(context.get("params") or {}), **{k: v for k, v in event.items() if k != "widgetContext"}}
    view = str(params.get("view", "team"))
    team = str(params.get("team", ""))
    if view != "incidents" and (
        team == "CONSOLE_TEAM" or params.get("job") == "CONSOLE_JOB"
    ):  # the dashboard's variables left empty
        return render.page(
            "jobsched", "<p>Type a team (and a job) in the dashboard's boxes above.</p>", standalone=False
        )
    start, end = time_range(context, now)
    try:
        if view == "incidents":
            shown = views.incidents(jobs, now=now, links=no_links)
        elif view == "team" and team:
            shown = views.team(jobs, runs, team, now=now, links=no_links)
        elif view == "job" and team and params.get("job"):
            key = f"{team}/{params['job']}"
            shown = views.job(jobs, runs, key, start=start, end=end, now=now, links=no_links)
        elif view == "run" and team and params.get("job") and params.get("run_id"):
            shown = views.run(jobs, runs, f"{team}/{params['job']}", str(params["run_id"]), now=now, links=no_links)
        else:
            return render.page("jobsched", f"<pre>{escape(DESCRIPTION)}</pre>", standalone=False)
    except views.NotFound as missing:
        return render.page("Not found", f"<p>{escape(str(missing))}</p>", standalone=False)
    return render.page(shown.title, shown.body, standalone=False)


def time_range(context: dict[str, Any], now: datetime) -> tuple[datetime, datetime]:
    """The dashboard's range (its zoom if any), in milliseconds since the epoch; default the last 7 days."""
    window = context.get("timeRange") or {}
    zoom = window.get("zoom") or {}
    start_ms, end_ms = zoom.get("start") or window.get("start"), zoom.get("end") or window.get("end")
    if not start_ms or not end_ms:
        return now - timedelta(days=7), now
    start = datetime.fromtimestamp(int(start_ms) / 1000, tz=UTC)
    end = datetime.fromtimestamp(int(end_ms) / 1000, tz=UTC)
    return start, end
