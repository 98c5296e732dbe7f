"""``/console`` under ``make run``: the console's views over the local tables, linked to each other."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from html import escape
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.console import render, views
from jobsched.core.names import JobsKeys, Settings

PREFIX = "/console"


class LocalConsole:
    """GET /console, /console/incidents, /console/teams/{team}, .../jobs/{name}[?days=N], .../runs/{run_id}."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock

    def __call__(self, target: str) -> tuple[int, str]:
        parts = urlsplit(target)
        path = [unquote(p) for p in parts.path[len(PREFIX) :].strip("/").split("/") if p]
        days = _days(parse_qs(parts.query).get("days", ["7"])[0])
        settings = Settings.from_env()
        jobs, runs = JobsStore(settings.jobs_table), RunsStore(settings.runs_table)
        now = self.clock()
        try:
            view = self._view(path, jobs, runs, now, days)
        except views.NotFound as missing:
            view = views.View("Not found", f"<p>{escape(str(missing))}</p>", status=404)
        nav = ((PREFIX, "console"), *view.nav)
        return view.status, render.page(view.title, view.body, standalone=True, nav=nav)

    def _view(self, path: list[str], jobs: JobsStore, runs: RunsStore, now: datetime, days: int) -> views.View:
        links = _links
        if not path:
            return views.View(
                "jobsched console", f'<p><a href="{PREFIX}/incidents">Open incidents</a></p>' + _teams(jobs)
            )
        if path == ["incidents"]:
            return views.incidents(jobs, now=now, links=links)
        if len(path) == 2 and path[0] == "teams":
            return views.team(jobs, runs, path[1], now=now, links=links)
        if len(path) == 4 and path[0] == "teams" and path[2] == "jobs":
            key = f"{path[1]}/{path[3]}"
            return views.job(jobs, runs, key, start=now - timedelta(days=days), end=now, now=now, links=links)
        if len(path) == 6 and path[0] == "teams" and path[2] == "jobs" and path[4] == "runs":
            return views.run(jobs, runs, f"{path[1]}/{path[3]}", path[5], now=now, links=links)
        raise views.NotFound(f"no console page {'/'.join(path)}")


def _links(path: str) -> str:
    return PREFIX + path


def _days(text: str) -> int:
    return max(1, min(int(text), render.MAX_DAYS)) if text.isdigit() else 7


def _teams(jobs: JobsStore) -> str:
    """Every team with a job (a scan: fine for the local tables, never done in AWS)."""
    teams: set[str] = set()
    request: dict[str, Any] = {"TableName": jobs.table, "ProjectionExpression": JobsKeys.TEAM}
    while True:
        response = jobs.db.scan(**request)
        teams |= {item[JobsKeys.TEAM]["S"] for item in response.get("Items", []) if JobsKeys.TEAM in item}
        if "LastEvaluatedKey" not in response:
            break
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    items = "".join(f'<li><a href="{PREFIX}/teams/{escape(team)}">{escape(team)}</a></li>' for team in sorted(teams))
    return f"<h2>Teams</h2><ul>{items or '<li class=muted>no jobs yet</li>'}</ul>"
