"""``/console`` under ``make run``: the console's views over the local tables, linked to each other, and
their buttons: each opens a confirmation page whose form POSTs the action (no script, as in CloudWatch).

Pages and actions are for the caller the local gateway sees (``X-Jobsched-Principal``; its default principal
for programs and for a browser holding the console key), resolved through the API's membership as the API
resolves it: a team member sees and acts for their own teams only (403 otherwise), a platform admin for every
team, and a request with no caller sees nothing (401). Actions are audited under the caller's ARN. The gateway
checks Host and Origin before a request gets here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from pydantic import ValidationError

from infra.iam.recording import acting_as, emulating
from jobsched.adapters.aws.dynamo import every_item
from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.api.identity import Membership, Principal, Unauthenticated
from jobsched.console import actions, render, views
from jobsched.core.bounds import parse_bounded_int
from jobsched.core.logs import JOB, RUN_ID
from jobsched.core.names import LOCAL_STAGE, JobsKeys, physical_name
from jobsched.core.settings import Settings
from jobsched.wiring import action_stores

PREFIX = "/console"
# In AWS the console's pages are the Console function's and its actions the ConsoleActions function's: their roles.
VIEWS_FUNCTION, ACTIONS_FUNCTION = physical_name(LOCAL_STAGE, "Console"), physical_name(LOCAL_STAGE, "ConsoleActions")
ACT = f"{PREFIX}/act"


class LocalControls:
    """A button is a link to its confirmation page; the page asks for the reason of a pause."""

    def button(self, button: render.Button) -> str:
        query = {"action": button.action, "job": button.job}
        if button.run_id:
            query |= {"run_id": button.run_id, "force": "true" if button.force else "false"}
        if button.task:
            query["task"] = button.task
        return f'<a class="btn" href="{escape(ACT)}?{escape(urlencode(query))}">{escape(button.label)}</a>'

    def preamble(self, team: str) -> str:
        return ""


@dataclass(frozen=True)
class ConsoleRequest:
    method: str
    target: str
    caller: str | None  # the principal the gateway sees for this request (None: nobody)
    form: str = ""  # a POST's body (application/x-www-form-urlencoded)


class LocalConsole:
    """GET /console, /console/incidents, /console/executive, /console/teams/{team}, .../slo, .../changes,
    .../timeline[?days=N],
    .../jobs/{name}[?days=N], .../runs/{run_id};
    GET /console/act?... (the confirmation) and POST /console/act (the action)."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock

    def __call__(self, request: ConsoleRequest) -> tuple[int, str]:
        acting = ACTIONS_FUNCTION if request.method == "POST" else VIEWS_FUNCTION
        with acting_as(acting):
            return self._serve(request)

    def _serve(self, request: ConsoleRequest) -> tuple[int, str]:
        parts = urlsplit(request.target)
        path = [unquote(p) for p in parts.path[len(PREFIX) :].strip("/").split("/") if p]
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        settings = Settings.from_env()
        jobs, runs = JobsStore(settings.jobs_table, team_defaults=settings.team_limits), RunsStore(settings.runs_table)
        now = self.clock()
        try:
            viewer = _viewer(request.caller)
            if path == ["act"]:
                view = (
                    self._act(viewer, request, settings, now)
                    if request.method == "POST"
                    else _confirm(viewer, query, jobs, runs)
                )
            elif request.method != "GET":
                view = views.View("Not allowed", "<p>Only the confirmation form posts.</p>", status=405)
            else:
                view = self._view(viewer, path, jobs, runs, now, _days(query.get("days", "7")), query.get("team"))
        except views.NotFound as missing:
            view = views.View("Not found", f"<p>{escape(str(missing))}</p>", status=404)
        except NotAllowed as refused:
            view = views.View("Not allowed", f"<p>{escape(str(refused))}</p>", status=refused.status)
        nav = ((PREFIX, "console"), *view.nav)
        return view.status, render.page(view.title, view.body, standalone=True, nav=nav)

    def _view(
        self,
        viewer: Principal,
        path: list[str],
        jobs: JobsStore,
        runs: RunsStore,
        now: datetime,
        days: int,
        team: str | None = None,
    ) -> views.View:
        links = _links
        if not path:
            return views.View(
                "jobsched console",
                f'<p><a href="{PREFIX}/incidents">Open incidents</a> &middot; '
                f'<a href="{PREFIX}/executive">SLA compliance (teams x days)</a></p>' + _teams(viewer, jobs),
            )
        if path == ["executive"]:
            tiers = Settings.from_env().slo_tiers
            return views.executive(jobs, tiers, now=now, links=links, teams=None if viewer.admin else viewer.teams)
        if path == ["incidents"]:
            teams = None if viewer.admin else set(viewer.teams)
            if team:  # ?team=: one team's (of those the viewer may see)
                teams = {team} if teams is None else teams & {team}
            return views.incidents(jobs, now=now, links=links, teams=teams)
        if len(path) >= 2 and path[0] == "teams":
            if not viewer.may_act_for(path[1]):
                raise NotAllowed(403, f"{viewer.arn} is not a member of team '{path[1]}'")
            return _team_view(path[1], path[2:], jobs, runs, now, days)
        raise views.NotFound(f"no console page {'/'.join(path)}")

    def _act(self, principal: Principal, request: ConsoleRequest, settings: Settings, now: datetime) -> views.View:
        values: dict[str, Any] = {k: v[0] for k, v in parse_qs(request.form).items()}
        values["force"] = values.get("force") == "true"
        try:
            action = actions.ActionRequest.model_validate(values)
        except ValidationError as error:
            result = actions.invalid(error)
        else:
            result = actions.act(action, principal=principal, stores=action_stores(settings), now=now)
        back = _job_link(str(values.get("job", "")))
        return views.View(result.title, result.html() + back, status=result.status)


def _team_view(team: str, rest: list[str], jobs: JobsStore, runs: RunsStore, now: datetime, days: int) -> views.View:
    """/teams/{team}, and its slo, timeline, jobs/{name} and jobs/{name}/runs/{run_id} pages."""
    links, controls, settings = _links, LocalControls(), Settings.from_env()
    start = now - timedelta(days=days)
    if not rest:
        return views.team(jobs, runs, team, now=now, links=links, controls=controls)
    if rest == ["changes"]:
        roles = (settings.target_role_arn,) if settings.target_role_arn else ()
        return views.team_changes(jobs, team, now=now, links=links, roles=roles)
    if rest == ["slo"]:
        topic = settings.escalation_topic_arn
        return views.team_slo(jobs, team, settings.slo_tiers, now=now, links=links, default_topic=topic)
    if rest == ["timeline"]:
        return views.team_timeline(jobs, runs, team, start=start, end=now, now=now, links=links)
    if len(rest) == 2 and rest[0] == "jobs":
        return views.job(jobs, runs, f"{team}/{rest[1]}", start=start, end=now, now=now, links=links, controls=controls)
    if len(rest) == 4 and rest[0] == "jobs" and rest[2] == "runs":
        return views.run(jobs, runs, f"{team}/{rest[1]}", rest[3], now=now, links=links, controls=controls)
    raise views.NotFound(f"no console page teams/{team}/{'/'.join(rest)}")


class NotAllowed(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _viewer(caller: str | None) -> Principal:
    """The caller as the API's membership resolves it; a request with none, or an unknown one, sees nothing."""
    if caller is None:
        raise NotAllowed(
            401,
            "Open the console through the link make run printed (it carries this session's key), or name the caller"
            " in X-Jobsched-Principal.",
        )
    try:
        with emulating():  # who may invoke which alias is IAM's decision in AWS, not the function's call
            return Membership.from_env().principal(caller)
    except Unauthenticated as error:
        raise NotAllowed(401, str(error)) from None


# What a person types on the confirmation: a pause's reason (required), an answer's comment (optional).
TYPED_FIELDS = {
    "pause": '<p><label>Reason (kept in the audit trail): <input name="reason" size="50" maxlength="500" '
    "required></label></p>",
    **dict.fromkeys(
        ("approve", "reject"),
        '<p><label>Comment (kept with the decision and in the history): <input name="reason" size="50" '
        'maxlength="500"></label></p>',
    ),
}


def _confirm(viewer: Principal, query: dict[str, str], jobs: JobsStore, runs: RunsStore) -> views.View:
    """The question a button asks, with the form that carries the action out (and a pause's reason)."""
    job = query.get("job", "")
    if not JOB.fullmatch(job):
        raise views.NotFound(f"no job {job}")
    team = job.split("/", 1)[0]
    if not viewer.may_act_for(team):
        raise NotAllowed(403, f"{viewer.arn} may not act for team '{team}'")
    stored = jobs.get(job, consistent=False)
    if stored is None:
        raise views.NotFound(f"no job {job}")
    offered = render.job_buttons(job, stored.state)
    run_id = query.get("run_id")
    if run_id:
        run = runs.get(job, run_id) if RUN_ID.fullmatch(run_id) else None
        if run is None:
            raise views.NotFound(f"no run {run_id} of {job}")
        tasks = runs.tasks(job, run_id) if stored.spec.dag is not None else {}
        waiting = views.waiting_approvals(stored.spec, tasks)
        offered = render.run_buttons(run, dag=stored.spec.dag is not None, waiting=waiting)
    matching = [b for b in offered if b.action == query.get("action") and b.task == (query.get("task") or None)]
    if not matching:
        body = f"<p>{escape(job)} offers no {escape(query.get('action', ''))} now.</p>" + _job_link(job)
        return views.View("Nothing to do", body, status=409)
    button = matching[0]
    hidden = {"action": button.action, "job": button.job}
    if button.run_id:
        hidden |= {"run_id": button.run_id, "force": "true" if button.force else "false"}
        if button.task:
            hidden["task"] = button.task
    fields = "".join(f'<input type="hidden" name="{k}" value="{escape(v)}">' for k, v in hidden.items())
    fields += TYPED_FIELDS.get(button.action, "")
    form = (
        f'<form method="post" action="{ACT}"><p>{escape(button.confirmation)}</p>{fields}'
        f'<p><button class="btn" type="submit">{escape(button.label)}</button> {_job_link(job, "Cancel")}</p></form>'
    )
    return views.View(f"{button.label} {job}?", form)


def _job_link(job: str, text: str = "Back to the job") -> str:
    if not JOB.fullmatch(job):
        return ""
    team, name = job.split("/", 1)
    return f'<a href="{PREFIX}/teams/{quote(team)}/jobs/{quote(name)}">{escape(text)}</a>'


def _links(path: str) -> str:
    return PREFIX + path


def _days(text: str) -> int:
    days = parse_bounded_int(text, max_digits=3)  # '²' and 5,000 digits are not numbers of days
    return 7 if days is None else max(1, min(days, render.MAX_DAYS))


def _teams(viewer: Principal, jobs: JobsStore) -> str:
    """Every team with a job (a scan: fine for the local tables, never done in AWS)."""
    found = every_item(jobs.db, "scan", TableName=jobs.table, ProjectionExpression=JobsKeys.TEAM)
    teams = {values[JobsKeys.TEAM] for values in found if JobsKeys.TEAM in values}
    shown = sorted(team for team in teams if viewer.may_act_for(team))
    items = "".join(f'<li><a href="{PREFIX}/teams/{escape(team)}">{escape(team)}</a></li>' for team in shown)
    return f"<h2>Teams</h2><ul>{items or '<li class=muted>no jobs yet</li>'}</ul>"
