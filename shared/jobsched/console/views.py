"""The console's views: what each page reads, then the renderer. Reads only; the ``now`` is an argument."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from html import escape
from typing import Any, Protocol

from jobsched.console import changes_page, cost_page, details, incidents_page, render, run_page, slo_pages, timelines
from jobsched.console.palette import look
from jobsched.core.prices import US_EAST_1, PriceTable
from jobsched.core.records import StoredIncident, StoredJob
from jobsched.core.run_records import Run, TaskState
from jobsched.core.runs import TaskStatus, instant_text
from jobsched.core.slo import SloTiers
from jobsched.core.spec import ApprovalTarget, JobSpec
from jobsched.dag.definition import graph_from_values
from jobsched.registry.dependencies import dependencies
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.engine import CompiledSchedule, Occurrence
from jobsched.schedule.fires import next_fire, schedule_of
from jobsched.watch.explain import ExplainJobs, ExplainRuns, NotAnInstant, explanation_for
from jobsched.watch.health import MAX_WINDOW, STRIP_LENGTH, JobHealth, job_health, strip_cell, worst_first
from jobsched.watch.run_search import Cursor, RunFilter, RunQueries, search_runs

MAX_TEAM_JOBS = 500  # one page of a team's jobs
RUNS_PER_JOB = STRIP_LENGTH
MAX_TIMELINE_RUNS = 2_000
READERS = 16  # jobs read at once for the team page


class ConsoleJobs(ExplainJobs, Protocol):
    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]: ...
    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]: ...
    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None: ...
    def open_incidents(self, job: str) -> set[str]: ...
    def open_incident_list(self, *, limit: int = 200) -> list[StoredIncident]: ...
    def downstreams(self, job: str) -> list[str]: ...
    def company_entries(self) -> dict[str, dict[str, Any]]: ...


class ConsoleRuns(ExplainRuns, RunQueries, Protocol):
    def get(self, job: str, run_id: str) -> Run | None: ...
    def tasks(self, job: str, run_id: str) -> dict[str, TaskState]: ...
    def history(self, job: str, *, limit: int = 50, newest_first: bool = True) -> list[Run]: ...


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
    company = CompanySettings.read(jobs)

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
            next_fire=_next_fire(stored, now, company),
            open_incidents=jobs.open_incidents(key),
            strip_length=STRIP_LENGTH,
        )

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        healths = list(pool.map(health, [key for key in keys if key in found]))
    body = render.team_view(team_name, worst_first(healths), links, controls)
    timeline, slo = links(f"/teams/{team_name}/timeline"), links(f"/teams/{team_name}/slo")
    changes = links(f"/teams/{team_name}/changes")
    if timeline and slo and changes:
        body = (
            f"<p>{render.link_text('Timeline of every job', timeline)} &middot; "
            f"{render.link_text('SLOs, freshness and paging destinations', slo)} &middot; "
            f"{render.link_text('Recent changes', changes)}</p>" + body
        )
    return View(f"Team {team_name}", body, _nav(links, ("teams", team_name)))


TEAM_TIMELINE_JOBS = 150  # rows of a team's timeline: the most failed first (CloudWatch's 6 MB)
TEAM_TIMELINE_RUNS = 200  # a job's newest runs in the range, read per row (two pages)
BAD = frozenset({"failed", "timed_out", "missed"})


def team_timeline(
    jobs: ConsoleJobs,
    runs: ConsoleRuns,
    team_name: str,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    links: render.Links,
) -> View:
    """A team's jobs over a time range, a row each: which were red when, side by side."""
    end = min(end, now)
    start = max(min(start, end - timedelta(minutes=1)), end - timedelta(days=render.MAX_DAYS))
    keys, _ = jobs.team_page(team_name, limit=MAX_TEAM_JOBS, after_name=None)
    found = jobs.get_many(keys)
    company = CompanySettings.read(jobs)

    def read(key: str) -> timelines.JobInstants:
        shown, partial = _runs_between(runs, key, start, end, limit=TEAM_TIMELINE_RUNS)
        return timelines.JobInstants(key, shown, (), partial)

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        rows = list(pool.map(read, [key for key in keys if key in found]))
    rows.sort(key=lambda row: (-sum(strip_cell(r) in BAD for r in row.runs), row.job))
    shown_rows = []
    for row in rows[:TEAM_TIMELINE_JOBS]:
        # When the range held more runs than were read, its older part is not shown: nor are its instants.
        since = min(r.scheduled_at for r in row.runs) if row.partial else start
        shown_rows.append(replace(row, occurrences=_moved_or_skipped(found[row.job], since, end, company)))
    body = timelines.team_timeline_view(team_name, shown_rows, start, end, links, of_jobs=len(rows))
    here = links(f"/teams/{team_name}/timeline")
    nav = _nav(links, ("teams", team_name)) + (((here, "timeline"),) if here else ())
    return View(f"Team {team_name}: timeline", body, nav)


def _runs_between(
    runs: ConsoleRuns, job_key: str, start: datetime, end: datetime, *, limit: int
) -> tuple[list[Run], bool]:
    """A job's runs scheduled in [start, end], newest first, at most ``limit``; and whether there were more."""
    shown: list[Run] = []
    token = None
    while True:
        page, token = runs.page(job_key, limit=100, newest_first=True, after_run_id=token)
        shown += [run for run in page if start <= run.scheduled_at <= end]
        if not token or (page and page[-1].scheduled_at < start):
            return shown[:limit], len(shown) > limit
        if len(shown) >= limit:
            return shown[:limit], True


def _moved_or_skipped(stored: StoredJob, start: datetime, end: datetime, company: CompanySettings) -> list[Occurrence]:
    """The instants in [start, end] the schedule skipped or moved, to show beside the runs. Stepping the
    engine costs about 0.2 ms an instant, too slow for 150 rows of an hourly week: it is stepped only
    where an instant can be skipped or moved (around DST changes, on the days a calendar excludes)."""
    compiled = schedule_of(stored, company)
    if compiled is None:
        return []
    spans = compiled.irregular_spans(start, end)
    if spans is None:
        return _occurrences(compiled, start, end, TEAM_TIMELINE_RUNS)
    found = [o for low, high in spans for o in _occurrences(compiled, low, high, TEAM_TIMELINE_RUNS)]
    return [o for o in found if not o.fires or o.reason_kind in render.MARKED_KINDS][:TEAM_TIMELINE_RUNS]


def _occurrences(compiled: CompiledSchedule, start: datetime, end: datetime, limit: int) -> list[Occurrence]:
    """The instants in (start, end] as the schedule places them (DST, blackouts), at most ``limit``."""
    return list(itertools.islice(compiled.occurrences(start, until=end), limit))


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
    shown, _ = _runs_between(runs, job_key, start, end, limit=MAX_TIMELINE_RUNS)
    zone = stored.spec.schedule.timezone if stored.spec.schedule is not None else "UTC"
    company = CompanySettings.read(jobs)
    compiled = schedule_of(stored, company)
    occurrences = _occurrences(compiled, start, end, MAX_TIMELINE_RUNS) if compiled else []
    body = timelines.timeline_view(job_key, shown, occurrences, zone, start, end)
    team_name, name = job_key.split("/", 1)
    latest = sorted(shown, key=lambda r: r.run_id, reverse=True)[:50]
    runs_list = details.runs_table(latest, links(f"/teams/{team_name}/jobs/{name}"), now=now)
    head = _state_line(stored, controls) + details.job_facts(stored, now, company)
    upstreams, downstreams = dependencies(jobs, runs, stored)
    related = render.dependencies_view(upstreams, downstreams, links)
    nav = _nav(links, ("teams", team_name), ("jobs", name))
    return View(f"Job {job_key}", head + body + related + runs_list, nav)


def run(
    jobs: ConsoleJobs,
    runs: ConsoleRuns,
    job_key: str,
    run_id: str,
    *,
    now: datetime,
    links: render.Links,
    controls: render.Controls | None = None,
    region: str | None = None,
) -> View:
    """A run's page (``region``: where its trace links to X-Ray's console, when the deployment's is known)."""
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
    waiting = waiting_approvals(stored.spec, tasks)
    acts = render.buttons(controls, render.run_buttons(found, dag=stored.spec.dag is not None, waiting=waiting))
    head = details.approvals_asked(stored.spec, waiting) + (f"<p>{acts}</p>" if acts else "")
    body = run_page.run_view(found, tasks, graph, order, now, region)
    if graph is not None:
        after = {name: list(node.depends_on) for name, node in graph.items()}
        body += details.tasks_table(found, stored.spec, tasks, order, after)
    elif found.output:
        body += f"<h2>Output</h2><pre>{escape(found.output[:4000])}</pre>"
    # Its log lines come from Logs Insights (seconds, and billed by the data scanned): asked for, not on every view.
    typed = f"jobsched logs {job_key} {run_id}"
    body += f'<p class="muted">Its log lines, from every component: <code>{escape(typed)}</code></p>'
    return View(f"Run {run_id} of {job_key}", head + body, nav)


def explain(
    jobs: ConsoleJobs, runs: ConsoleRuns, job_key: str, asked: str, *, now: datetime, links: render.Links
) -> View:
    """The answer `jobsched explain` gives, as a page: why the job ran, will run, or did not, at ``asked``."""
    stored = jobs.get(job_key, consistent=False)
    if stored is None:
        raise NotFound(job_key)
    try:
        answer = explanation_for(jobs, runs, stored, asked, now)
    except NotAnInstant as refused:
        return View(f"Explain {job_key}", f"<p>{escape(str(refused))}</p>", status=422)
    parts = [f"<p>{escape(asked)} ({escape(answer.timezone)})</p>"]
    parts += [f"<p><i>{escape(note)}</i></p>" for note in answer.notes]
    for each in answer.answers:
        run = (
            " " + render.link_text(each.run.run_id, links(f"/jobs/{job_key}/runs/{each.run.run_id}"))
            if each.run is not None
            else ""
        )
        why = "".join(f"<li>{escape(line)}</li>" for line in each.why)
        parts.append(
            f"<h3>{escape(instant_text(each.at))} ({escape(each.wall)}): {escape(each.verdict.upper())}{run}</h3>"
            f"<ul>{why}</ul>"
        )
    upcoming = instant_text(answer.next_fire) if answer.next_fire else "-"
    parts.append(f"<p>next fire: {escape(upcoming)}</p>")
    team_name, name = job_key.split("/", 1)
    nav = _nav(links, ("teams", team_name), ("jobs", name))
    return View(f"Explain {job_key} at {asked}", "".join(parts), nav)


def search(
    jobs: ConsoleJobs,
    runs: ConsoleRuns,
    team: str,
    job: str | None,
    where: RunFilter,
    *,
    links: render.Links,
    after: Cursor | None = None,
) -> View:
    """The runs `jobsched runs` finds: one job's, or every job's of the team, newest first, a page of 100."""
    keys = [f"{team}/{job}"] if job else jobs.team_page(team, limit=MAX_TEAM_JOBS, after_name=None)[0]
    found = search_runs(runs, keys, where, limit=100, after=after)
    rows = []
    for item in found.runs:
        name = item.job.split("/", 1)[1]
        outcome = strip_cell(item)
        href = links(f"/teams/{team}/jobs/{name}/runs/{item.run_id}")
        rows.append(
            f"<tr><td>{render.cell(outcome, title=look(outcome).label)}</td><td>{escape(name)}</td>"
            f"<td>{render.link_text(item.run_id, href)}</td><td>{escape(item.status.value)}</td>"
            f"<td>{escape(item.trigger)}</td><td class=num>{item.attempt}</td>"
            f"<td class=muted>{escape(item.error or item.reason or '')}</td></tr>"
        )
    more = f"<p class=muted>more: next_token {escape(found.cursor.text())}</p>" if found.cursor else ""
    table = (
        "<table><tr><th></th><th>job</th><th>run</th><th>status</th><th>trigger</th><th>attempts</th>"
        "<th>error or reason</th></tr>" + "".join(rows) + "</table>"
    )
    title = f"Runs of {team}/{job}" if job else f"Runs of team {team}"
    return View(title, (table if rows else "<p>No run matches.</p>") + more, _nav(links, ("teams", team)))


def waiting_approvals(spec: JobSpec, tasks: dict[str, TaskState]) -> list[tuple[str, str]]:
    """(task, question) of each approval task that waits for an answer (RUNNING)."""
    return [
        (task.name, task.target.message)
        for task in (spec.dag.tasks if spec.dag else [])
        if isinstance(task.target, ApprovalTarget)
        and task.name in tasks
        and tasks[task.name].status is TaskStatus.RUNNING
    ]


def incidents(jobs: ConsoleJobs, *, now: datetime, links: render.Links, teams: Collection[str] | None = None) -> View:
    """Open incidents across teams, for the on-call dashboard; with ``teams``, only those teams' jobs' incidents."""
    found = [stored.incident for stored in jobs.open_incident_list()]
    if teams is not None:
        found = [
            incident for incident in found if incident.subject.split("/", 1)[0] in teams and "/" in incident.subject
        ]
    specs = jobs.get_many(
        sorted({i.subject for i in found if "/" in i.subject and not i.subject.startswith("TARGET#")})
    )
    runbooks = {key: str(stored.spec.runbook_url) for key, stored in specs.items() if stored.spec.runbook_url}
    here = links("/incidents")
    nav = ((here, "incidents"),) if here else ()
    return View("Open incidents", incidents_page.incidents_view(found, runbooks, now, links), nav)


def team_slo(
    jobs: slo_pages.SloJobs,
    team_name: str,
    tiers: SloTiers,
    *,
    now: datetime,
    links: render.Links,
    default_topic: str | None = None,
) -> View:
    """A team's error budget per tier, its jobs' freshness, its paging destinations never verified or failing."""
    page = slo_pages.team_slo(jobs, team_name, tiers, now=now, links=links, default_topic=default_topic)
    here = links(f"/teams/{team_name}/slo")
    return View(page.title, page.body, (*_nav(links, ("teams", team_name)), *(((here, "slo"),) if here else ())))


def team_changes(
    jobs: changes_page.ChangeJobs, team_name: str, *, now: datetime, links: render.Links, roles: Sequence[str] = ()
) -> View:
    """What changed on the team's jobs, limits, secrets and roles lately, newest first (the audit, not the runs)."""
    changes = changes_page.team_changes(jobs, team_name, now=now, roles=roles)
    body = changes_page.changes_view(changes, now, links)
    here = links(f"/teams/{team_name}/changes")
    nav = (*_nav(links, ("teams", team_name)), *(((here, "changes"),) if here else ()))
    return View(f"Recent changes of team {team_name}", body, nav)


class ExecutiveJobs(slo_pages.SloJobs, cost_page.CostJobs, Protocol):
    """The jobs store as the executive view reads it."""


def executive(
    jobs: ExecutiveJobs,
    tiers: SloTiers,
    *,
    now: datetime,
    links: render.Links,
    teams: Collection[str] | None = None,
    prices: PriceTable = US_EAST_1,
) -> View:
    """SLA compliance across teams (those the viewer may see): the heat-map, each tier's burn, the top failing; and
    this month's top teams and jobs by cost."""
    page = slo_pages.executive(jobs, tiers, now=now, links=links, teams=teams)
    today = now.date()
    seen = sorted(jobs.teams_between(today - timedelta(days=slo_pages.HEAT_DAYS - 1), today))
    shown = [team for team in seen if teams is None or team in teams]
    costs = cost_page.top_costs(jobs, shown, now=now, prices=prices, links=links)
    page = slo_pages.SloPage(page.title, page.body + "<h2>This month's top teams and jobs by cost</h2>" + costs)
    here = links("/executive")
    return View(page.title, page.body, ((here, "executive"),) if here else ())


def _state_line(stored: StoredJob, controls: render.Controls | None) -> str:
    """The job's state (a paused job's reason) and, with controls, its buttons."""
    state = escape(stored.state.lower())
    if stored.state == "PAUSED" and stored.paused_reason:
        state += f": {escape(stored.paused_reason)}"
    acts = render.buttons(controls, render.job_buttons(stored.key, stored.state, drill=True))
    preamble = controls.preamble(stored.spec.team) if controls is not None and acts else ""
    return f"{preamble}<p>State: <b>{state}</b> {acts}</p>"


def _next_fire(stored: StoredJob, now: datetime, company: CompanySettings) -> str | None:
    if stored.state != "ACTIVE":
        return None
    upcoming = next_fire(stored, now, company)
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
