"""The console's views: what each page reads, then the renderer. Reads only; the ``now`` is an argument."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import Protocol

from jobsched.console import render
from jobsched.console.palette import look
from jobsched.core.records import Run, StoredIncident, StoredJob, TaskState
from jobsched.core.runs import instant_text
from jobsched.dag.definition import graph_from_values
from jobsched.registry.jobs import first_fire_after
from jobsched.schedule.engine import compile_schedule
from jobsched.watch.health import MAX_WINDOW, STRIP_LENGTH, JobHealth, job_health, strip_cell, worst_first

MAX_TEAM_JOBS = 500  # one page of a team's jobs
RUNS_PER_JOB = STRIP_LENGTH
MAX_TIMELINE_RUNS = 2_000
READERS = 16  # jobs read at once for the team page


class ConsoleJobs(Protocol):
    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]: ...
    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]: ...
    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None: ...
    def open_incidents(self, job: str) -> set[str]: ...
    def open_incident_list(self, *, limit: int = 200) -> list[StoredIncident]: ...


class ConsoleRuns(Protocol):
    def page(
        self, job: str, *, limit: int = 50, newest_first: bool = True, after_run_id: str | None = None
    ) -> tuple[list[Run], str | None]: ...
    def get(self, job: str, run_id: str) -> Run | None: ...
    def tasks(self, job: str, run_id: str) -> dict[str, TaskState]: ...


@dataclass(frozen=True)
class View:
    title: str
    body: str
    nav: tuple[tuple[str, str], ...] = ()
    status: int = 200


class NotFound(LookupError):
    pass


def team(
    jobs: ConsoleJobs,
    runs: ConsoleRuns,
    team_name: str,
    *,
    now: datetime,
    links: render.Links,
    controls: render.Controls | None = None,
) -> View:
    keys, _ = jobs.team_page(team_name, limit=MAX_TEAM_JOBS, after_name=None)
    found = jobs.get_many(keys)

    def health(key: str) -> JobHealth:
        stored = found[key]
        recent = runs.page(key, limit=RUNS_PER_JOB, newest_first=True)[0]
        return job_health(
            key,
            recent,
            now=now,
            window=MAX_WINDOW,
            state=stored.state,
            paused_reason=stored.paused_reason,
            next_fire=_next_fire(stored, now),
            open_incidents=jobs.open_incidents(key),
            strip_length=STRIP_LENGTH,
        )

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        healths = list(pool.map(health, [key for key in keys if key in found]))
    body = render.team_view(team_name, worst_first(healths), links, controls)
    return View(f"Team {team_name}", body, _nav(links, ("teams", team_name)))


def job(
    jobs: ConsoleJobs,
    runs: ConsoleRuns,
    job_key: str,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    links: render.Links,
    controls: render.Controls | None = None,
) -> View:
    stored = jobs.get(job_key, consistent=False)
    if stored is None:
        raise NotFound(job_key)
    end = min(end, now)
    start = max(start, end - timedelta(days=render.MAX_DAYS))
    shown: list[Run] = []
    token = None
    while len(shown) < MAX_TIMELINE_RUNS:
        page, token = runs.page(job_key, limit=100, newest_first=True, after_run_id=token)
        shown += [run for run in page if start <= run.scheduled_at <= end]
        if not token or (page and page[-1].scheduled_at < start):
            break
    occurrences = []
    zone = "UTC"
    if stored.spec.schedule is not None:
        zone = stored.spec.schedule.timezone
        compiled = compile_schedule(stored.spec.schedule, hash_key=job_key, anchor=stored.created_at)
        for occurrence in compiled.occurrences(start, until=end):
            occurrences.append(occurrence)
            if len(occurrences) >= MAX_TIMELINE_RUNS:
                break
    body = render.timeline_view(job_key, shown, occurrences, zone, start, end)
    runs_list = _runs_table(job_key, shown[:50], links)
    team_name, name = job_key.split("/", 1)
    head = _state_line(stored, controls)
    return View(f"Job {job_key}", head + body + runs_list, _nav(links, ("teams", team_name), ("jobs", name)))


def run(
    jobs: ConsoleJobs,
    runs: ConsoleRuns,
    job_key: str,
    run_id: str,
    *,
    now: datetime,
    links: render.Links,
    controls: render.Controls | None = None,
) -> View:
    stored = jobs.get(job_key, consistent=False)
    found = runs.get(job_key, run_id)
    if stored is None or found is None:
        raise NotFound(f"{job_key} {run_id}")
    graph = graph_from_values(found.graph) if found.graph else None
    tasks = runs.tasks(job_key, run_id) if graph is not None else {}
    order = stored.spec.dag.order() if stored.spec.dag else []
    order = [name for name in order if graph is None or name in graph] + [n for n in (graph or {}) if n not in order]
    team_name, name = job_key.split("/", 1)
    nav = _nav(links, ("teams", team_name), ("jobs", name), ("runs", run_id))
    acts = render.buttons(controls, render.run_buttons(found, dag=stored.spec.dag is not None))
    head = f"<p>{acts}</p>" if acts else ""
    return View(f"Run {run_id} of {job_key}", head + render.run_view(found, tasks, graph, order, now), nav)


def incidents(jobs: ConsoleJobs, *, now: datetime, links: render.Links) -> View:
    """Open incidents across teams, for the on-call dashboard."""
    found = [stored.incident for stored in jobs.open_incident_list()]
    specs = jobs.get_many(
        sorted({i.subject for i in found if "/" in i.subject and not i.subject.startswith("TARGET#")})
    )
    runbooks = {key: str(stored.spec.runbook_url) for key, stored in specs.items() if stored.spec.runbook_url}
    here = links("/incidents")
    nav = ((here, "incidents"),) if here else ()
    return View("Open incidents", render.incidents_view(found, runbooks, now, links), nav)


def _state_line(stored: StoredJob, controls: render.Controls | None) -> str:
    """The job's state (a paused job's reason) and, with controls, its buttons."""
    state = escape(stored.state.lower())
    if stored.state == "PAUSED" and stored.paused_reason:
        state += f": {escape(stored.paused_reason)}"
    acts = render.buttons(controls, render.job_buttons(stored.key, stored.state))
    preamble = controls.preamble(stored.spec.team) if controls is not None and acts else ""
    return f"{preamble}<p>State: <b>{state}</b> {acts}</p>"


def _runs_table(job_key: str, shown: list[Run], links: render.Links) -> str:
    team_name, name = job_key.split("/", 1)
    rows = []
    for item in sorted(shown, key=lambda r: r.scheduled_at, reverse=True):
        outcome = strip_cell(item)
        href = links(f"/teams/{team_name}/jobs/{name}/runs/{item.run_id}")
        late = f"{item.lateness_ms / 1000:.1f} s" if item.lateness_ms is not None else render.DASH
        rows.append(
            f"<tr><td>{render.cell(outcome, title=look(outcome).label)}</td>"
            f"<td>{render.link_text(item.run_id, href)}</td><td>{item.attempt}</td><td class=num>{late}</td>"
            f"<td class=muted>{escape(item.error or item.reason or '')}</td></tr>"
        )
    return (
        "<h2>Latest runs</h2><table><tr><th></th><th>run</th><th>attempt</th><th>late</th><th>error or reason</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _next_fire(stored: StoredJob, now: datetime) -> str | None:
    if stored.state != "ACTIVE":
        return None
    upcoming = first_fire_after(stored.spec, created_at=stored.created_at, after=now)
    return instant_text(upcoming) if upcoming else None


def _nav(links: render.Links, *parts: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    crumbs = []
    path = ""
    for kind, value in parts:
        path += f"/{kind}/{value}"
        href = links(path)
        if href:
            crumbs.append((href, value))
    return tuple(crumbs)
