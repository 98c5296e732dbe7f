"""A CloudWatch custom widget: the event's parameters and time range in, a view's HTML out.

The dashboard passes ``view`` (incidents, team, timeline, job, run), ``team`` and, for job and run, ``job``
and ``run_id``; its time range bounds the timelines. Who sees what is IAM's, as for the console's buttons:
Lambda is not told who invoked it, so the alias invoked is the authority. Through ``team-NAME`` the widget
shows team NAME only (the console-user policy lets a person invoke their own team's alias); through
``oncall`` every team and the incidents across teams (the console-oncall policy); unqualified, nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any, Protocol

from jobsched.console import render, views
from jobsched.console.actions import CONSOLE_ALIAS_PREFIX, team_of_alias
from jobsched.console.changes_page import ChangeJobs
from jobsched.core.bounds import EARLIEST, LATEST
from jobsched.core.prices import US_EAST_1, PriceTable
from jobsched.core.slo import SloTiers
from jobsched.watch.run_search import Cursor, SearchRefused, search_filter

ONCALL_ALIAS = "oncall"  # the widget's alias for the platform's on-call: every team, incidents across teams
# What the jobs dashboard's variables hold until someone types a team and a job. The team's placeholder is also
# in the widget's endpoint (its alias), so the dashboard invokes the typed team's alias; an alias of that
# placeholder name answers with the prompt to type one (no team can be named in capitals).
CONSOLE_TEAM, CONSOLE_JOB = "CONSOLE_TEAM", "CONSOLE_JOB"
PLACEHOLDER_ALIAS = f"{CONSOLE_ALIAS_PREFIX}{CONSOLE_TEAM}"


@dataclass(frozen=True)
class Viewer:
    """Whose jobs this invocation may show: one team, or (on-call) every team."""

    team: str | None
    every_team: bool = False

    def may_see(self, team: str) -> bool:
        return self.every_team or team == self.team

    @property
    def teams(self) -> frozenset[str] | None:
        """The teams it may see; None: every team."""
        return None if self.every_team else frozenset({self.team} if self.team else ())


def viewer_of(invoked_function_arn: str) -> Viewer | None:
    """The alias the widget was invoked through, as a viewer; None for the unqualified function or another alias."""
    if invoked_function_arn.split(":")[-1] == ONCALL_ALIAS:
        return Viewer(None, every_team=True)
    team = team_of_alias(invoked_function_arn)
    return Viewer(team) if team else None


DESCRIPTION = """\
### jobsched console
Parameters: `view` (`incidents` | `executive` | `team` | `slo` | `changes` | `timeline` | `job` | `run` | `explain` |
`runs`),
`team`, and for
`job`/`run`/`explain`: `job`, `run_id`, `at` (why the job ran or did not at that instant, as `jobsched explain`);
`runs` searches as `jobsched runs` does: `job` (none: every job of the team), `status`, `trigger`,
`min_attempts`, `error`, `since`, `until`, `next_token`.
The dashboard's time range bounds the timelines (at most 62 days).
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
        if button.task:
            params["task"] = button.task
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


SEARCH_PARAMETERS = ("status", "trigger", "error", "since", "until")
EVERY_TEAM_VIEWS = ("incidents", "executive")  # views that name no team: what the viewer may see of every team


@dataclass(frozen=True)
class Platform:
    """What the deployment says that the SLO views need: each tier's objectives, the default escalation topic."""

    tiers: SloTiers = field(default_factory=SloTiers)
    default_topic: str | None = None
    roles: tuple[str, ...] = ()  # the roles runs act through (the targets role): their changes on team histories
    prices: PriceTable = US_EAST_1  # the deployment's region's list prices: the executive view's cost
    region: str | None = None  # the deployment's: a run's trace links to X-Ray's console there


def no_links(path: str) -> str | None:
    """Inside CloudWatch a page has no URL of its own: names are shown, not linked."""
    return None


class WidgetJobs(views.ConsoleJobs, views.ExecutiveJobs, ChangeJobs, Protocol):
    """What every view of the widget reads of the Jobs table."""


def render_widget(
    event: dict[str, Any],
    jobs: WidgetJobs,
    runs: views.ConsoleRuns,
    now: datetime,
    controls: WidgetControls | None = None,
    *,
    viewer: Viewer | None,
    platform: Platform | None = None,
) -> str:
    """The view the event asks for, if ``viewer`` (from the alias invoked) may see it."""
    if event.get("describe"):
        return DESCRIPTION
    context = _mapping(event.get("widgetContext"))
    params = {**_mapping(context.get("params")), **{k: v for k, v in event.items() if k != "widgetContext"}}
    view = str(params.get("view", "team"))
    team = str(params.get("team", ""))
    if view not in EVERY_TEAM_VIEWS and (
        team == CONSOLE_TEAM or params.get("job") == CONSOLE_JOB
    ):  # the dashboard's variables left empty
        return render.page(
            "jobsched", "<p>Type a team (and a job) in the dashboard's boxes above.</p>", standalone=False
        )
    refusal = _refusal(viewer, view, team)
    if refusal:
        return render.page("Not allowed", f"<p>{escape(refusal)}</p>", standalone=False)
    start, end = time_range(context, now)
    try:
        shown: views.View | None
        if view == "changes" and team:
            roles = (platform or Platform()).roles
            shown = views.team_changes(jobs, team, now=now, links=no_links, roles=roles)
        elif view in ("slo", "executive"):
            shown = _slo_view(view, team, jobs, now=now, viewer=viewer, platform=platform or Platform())
        else:
            region = (platform or Platform()).region
            shown = _view(
                view, team, params, jobs, runs, now=now, span=(start, end), controls=controls, viewer=viewer,
                region=region,
            )  # fmt: skip
    except views.NotFound as missing:
        return render.page("Not found", f"<p>{escape(str(missing))}</p>", standalone=False)
    except SearchRefused as refused:
        return render.page("Not a search", f"<p>{escape(refused.field)}: {escape(str(refused))}</p>", standalone=False)
    if shown is None:
        return render.page("jobsched", f"<pre>{escape(DESCRIPTION)}</pre>", standalone=False)
    return render.page(shown.title, shown.body, standalone=False)


def _view(
    view: str,
    team: str,
    params: dict[str, Any],
    jobs: views.ConsoleJobs,
    runs: views.ConsoleRuns,
    *,
    now: datetime,
    span: tuple[datetime, datetime],
    controls: WidgetControls | None,
    viewer: Viewer | None,
    region: str | None = None,
) -> views.View | None:
    """The page the parameters name; None when they name none."""
    key = f"{team}/{params['job']}" if team and params.get("job") else None
    if view == "incidents":
        assert viewer is not None
        return views.incidents(jobs, now=now, links=no_links, teams=viewer.teams)
    if view == "team" and team:
        return views.team(jobs, runs, team, now=now, links=no_links, controls=controls)
    if view == "timeline" and team:
        return views.team_timeline(jobs, runs, team, start=span[0], end=span[1], now=now, links=no_links)
    if view == "job" and key:
        return views.job(jobs, runs, key, start=span[0], end=span[1], now=now, links=no_links, controls=controls)
    if view == "runs" and team:
        text = {name: str(params[name])[:200] if params.get(name) else None for name in SEARCH_PARAMETERS}
        attempts = str(params.get("min_attempts", ""))
        where = search_filter(
            text["status"],
            text["trigger"],
            int(attempts) if attempts.isdigit() and 0 < int(attempts) <= 1000 else None,
            text["error"],
            text["since"],
            text["until"],
            now,
        )
        after = Cursor.parse(str(params["next_token"])[:300]) if params.get("next_token") else None
        return views.search(jobs, runs, team, params.get("job") or None, where, links=no_links, after=after)
    if view == "explain" and key and params.get("at"):
        return views.explain(jobs, runs, key, str(params["at"])[:40], now=now, links=no_links)
    if view == "run" and key and params.get("run_id"):
        run_id = str(params["run_id"])
        return views.run(jobs, runs, key, run_id, now=now, links=no_links, controls=controls, region=region)
    return None


def _slo_view(
    view: str, team: str, jobs: views.ExecutiveJobs, *, now: datetime, viewer: Viewer | None, platform: Platform
) -> views.View | None:
    if view == "executive":
        assert viewer is not None
        return views.executive(
            jobs, platform.tiers, now=now, links=no_links, teams=viewer.teams, prices=platform.prices
        )
    if team:
        topic = platform.default_topic
        return views.team_slo(jobs, team, platform.tiers, now=now, links=no_links, default_topic=topic)
    return None


def _refusal(viewer: Viewer | None, view: str, team: str) -> str | None:
    if viewer is None:
        return f"Open this widget through an alias of its function: {CONSOLE_ALIAS_PREFIX}<team> or {ONCALL_ALIAS}."
    if view not in EVERY_TEAM_VIEWS and team and not viewer.may_see(team):
        return f"This widget shows team '{viewer.team}' only (the alias it was opened through), not '{team}'."
    return None


def time_range(context: Any, now: datetime) -> tuple[datetime, datetime]:
    """The dashboard's range (its zoom if any), in milliseconds since the epoch; the last 7 days when it gives
    none, or one outside the instants a schedule can reach."""
    window = _mapping(_mapping(context).get("timeRange"))
    zoom = _mapping(window.get("zoom"))
    start, end = _instant(zoom.get("start") or window.get("start")), _instant(zoom.get("end") or window.get("end"))
    if start is None or end is None or end <= start:
        return now - timedelta(days=7), now
    return start, end


def _mapping(value: Any) -> dict[str, Any]:
    """A part of the event that should be an object; anything else counts as empty."""
    return value if isinstance(value, dict) else {}


def _instant(milliseconds: Any) -> datetime | None:
    if isinstance(milliseconds, bool) or not isinstance(milliseconds, int | float):
        return None
    if not EARLIEST.timestamp() * 1000 <= milliseconds <= LATEST.timestamp() * 1000:
        return None
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
