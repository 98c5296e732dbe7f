"""A CloudWatch custom widget: the event's parameters and time range in, a view's HTML out.

The dashboard passes ``view`` (incidents, team, timeline, job, run), ``team`` and, for job and run, ``job``
and ``run_id``; its time range bounds the timelines. Who sees what is IAM's: on the dashboard and on this function.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

from jobsched.console import render, views
from jobsched.console.actions import CONSOLE_ALIAS_PREFIX

DESCRIPTION = """\
### jobsched console
Parameters: `view` (`incidents` | `team` | `timeline` | `job` | `run`), `team`, and for `job`/`run`: `job`,
`run_id`. The dashboard's time range bounds the timelines (at most 62 days).
```
view: team
team: payments
```
"""


@dataclass(frozen=True)
class WidgetControls:
    """Buttons as ``<cwdb-action>`` calls to the actions function, through the alias of the job's team: IAM
    lets a person invoke only their own team's alias, and the function acts only for the alias's team.
    A team without an alias (not in CDK ``console_teams``) gets no buttons, and a line saying why."""

    actions_arn: str  # unqualified
    teams: frozenset[str]

    def endpoint(self, team: str) -> str | None:
        return f"{self.actions_arn}:{CONSOLE_ALIAS_PREFIX}{team}" if team in self.teams else None

    def button(self, button: render.Button) -> str:
        endpoint = self.endpoint(button.job.split("/", 1)[0])
        if endpoint is None:
            return ""
        params: dict[str, Any] = {"action": button.action, "job": button.job}
        if button.run_id:
            params |= {"run_id": button.run_id, "force": button.force}
        # JSON as the element's text: <, > and & written as \u escapes, so no value can leave the element.
        text = json.dumps(params).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        return (
            f'<a class="btn">{escape(button.label)}</a><cwdb-action action="call" display="popup" '
            f'endpoint="{escape(endpoint)}" confirmation="{escape(button.confirmation)}">{text}</cwdb-action>'
        )

    def preamble(self, team: str) -> str:
        if team not in self.teams:
            return (
                '<p class="muted">Buttons are off for this team: its platform team has not listed it in the CDK'
                " context <code>console_teams</code>. The CLI and the API act as usual.</p>"
            )
        return (
            '<p><label>Reason for a pause: <input name="reason" size="40" maxlength="500" '
            'placeholder="why (kept in the audit trail)"></label></p>'
        )


def no_links(path: str) -> str | None:
    """Inside CloudWatch a page has no URL of its own: names are shown, not linked."""
    return None


def render_widget(
    event: dict[str, Any],
    jobs: views.ConsoleJobs,
    runs: views.ConsoleRuns,
    now: datetime,
    controls: WidgetControls | None = None,
) -> str:
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
            shown = views.team(jobs, runs, team, now=now, links=no_links, controls=controls)
        elif view == "timeline" and team:
            shown = views.team_timeline(jobs, runs, team, start=start, end=end, now=now, links=no_links)
        elif view == "job" and team and params.get("job"):
            key = f"{team}/{params['job']}"
            shown = views.job(jobs, runs, key, start=start, end=end, now=now, links=no_links, controls=controls)
        elif view == "run" and team and params.get("job") and params.get("run_id"):
            key = f"{team}/{params['job']}"
            shown = views.run(jobs, runs, key, str(params["run_id"]), now=now, links=no_links, controls=controls)
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
