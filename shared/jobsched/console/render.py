"""Server-rendered views: HTML with inline SVG, no script. Pure: data in, a string out.

Every value from a team (job names, errors, reasons) is escaped. CloudWatch limits a custom widget's
output (see README, "The console"); a team page of 500 jobs is well under it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from html import escape
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from jobsched.console.palette import BACKGROUND, MUTED, TEXT, look
from jobsched.core.events import trigger_summary
from jobsched.core.records import Incident, Run, TaskState
from jobsched.core.runs import TERMINAL, RunStatus, instant_text
from jobsched.dag.definition import Graph
from jobsched.registry.dependencies import Dependency
from jobsched.schedule.engine import Occurrence
from jobsched.watch.health import JobHealth, strip_cell

STYLE = f"""
.js {{ font: 13px/1.45 -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; color: {TEXT};
      background: {BACKGROUND}; padding: 4px; }}
.js h1 {{ font-size: 17px; margin: 4px 0 8px; }}
.js h2 {{ font-size: 14px; margin: 14px 0 6px; }}
.js table {{ border-collapse: collapse; }}
.js th {{ text-align: left; font-weight: 600; color: {MUTED}; padding: 3px 10px 3px 0;
         border-bottom: 1px solid #d0d7de; }}
.js td {{ padding: 3px 10px 3px 0; border-bottom: 1px solid #eaeef2; vertical-align: middle; }}
.js .num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.js .muted {{ color: {MUTED}; }}
.js .badge {{ display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 11px;
             color: #fff; margin-left: 4px; }}
.js .paused {{ background: #7d4e00; }}
.js .incident {{ background: #cf222e; }}
.js .approval {{ background: #0969da; }}
.js a {{ color: #0550ae; }}
.js .legend span {{ margin-right: 10px; white-space: nowrap; }}
.js .actions {{ white-space: nowrap; }}
.js svg.strip text, .js text.s {{ font-size: 11px; text-anchor: middle; fill: #ffffff; }}
.js .btn {{ display: inline-block; padding: 1px 9px; margin-right: 4px; border: 1px solid #d0d7de;
           border-radius: 6px; background: #f6f8fa; color: {TEXT}; text-decoration: none; font-size: 12px;
           cursor: pointer; }}
.js .btn:hover {{ background: #eaeef2; }}
"""
DASH = "\u2013"
Links = Callable[[str], str | None]  # a console path -> its URL here (None: not a link)
OUTCOMES_SHOWN = ("succeeded", "retried", "failed", "timed_out", "missed", "skipped", "running", "waiting")
# The worst first: what an hour's cell shows when it holds several instants.
SEVERITY = ("failed", "timed_out", "missed", "running", "waiting", "retried", "succeeded", "cancelled", "skipped")
MAX_DAYS = 62
MARKED_KINDS = ("dst gap", "dst overlap", "blackout")  # reasons a timeline marks with a diamond


@dataclass(frozen=True)
class Button:
    """An action offered on a page: what it does, to which job (and run), and the question it asks first."""

    action: str  # pause | resume | trigger | rerun | rerun_from_failure (jobsched.console.actions)
    job: str
    label: str
    confirmation: str
    run_id: str | None = None
    force: bool = False
    task: str | None = None  # approve, reject: the approval task


class Controls(Protocol):
    """How a page's buttons act: ``<cwdb-action>`` calls in CloudWatch, a confirmation page locally."""

    def button(self, button: Button) -> str: ...

    def preamble(self, team: str) -> str:
        """What a page with buttons shows once above them (in CloudWatch: the pause-reason field)."""
        ...


def job_buttons(job: str, state: str) -> list[Button]:
    pause_or_resume = (
        Button("resume", job, "Resume", f"Resume {job}? Instants that fell while it was paused are not run.")
        if state == "PAUSED"
        else Button("pause", job, "Pause", f"Pause {job}? No instant fires until it is resumed.")
    )
    return [pause_or_resume, Button("trigger", job, "Trigger", f"Run {job} now, once?")]


def approval_buttons(run: Run, waiting: Sequence[tuple[str, str]]) -> list[Button]:
    """Approve and reject for each approval task the run waits on: (task, its question)."""
    offered = []
    for task, question in waiting:
        asked = f" ({question})" if question else ""
        offered += [
            Button("approve", run.job, f"Approve {task}", f"Approve {task} of run {run.run_id}{asked}?", run.run_id,
                   task=task),
            Button("reject", run.job, f"Reject {task}", f"Reject {task} of run {run.run_id}? It fails, and the "
                   "tasks that need it are skipped.", run.run_id, task=task),
        ]  # fmt: skip
    return offered


def run_buttons(run: Run, *, dag: bool, waiting: Sequence[tuple[str, str]] = ()) -> list[Button]:
    """Rerun a finished run with its own instant; a SUCCEEDED one only when asked twice (force). A DAG run that
    did not succeed is also offered a re-execution from its failure (its succeeded tasks kept). A run waiting on
    approval tasks (``waiting``: task, question) offers approve and reject for each."""
    if run.status not in TERMINAL:
        return approval_buttons(run, waiting)
    force = run.status is RunStatus.SUCCEEDED
    when = f"{instant_text(run.scheduled_at)} (run {run.run_id}, a new attempt)"
    question = f"Run {run.job} again for {when}?" if not dag else f"Run every task of {run.job} again for {when}?"
    if force:
        question += " It SUCCEEDED: the target will run it a second time." if not dag else " It SUCCEEDED."
    label = "Rerun anyway" if force else "Rerun all tasks" if dag else "Rerun"
    offered = [Button("rerun", run.job, label, question, run_id=run.run_id, force=force)]
    if dag and not force:
        keep = f"Run the failed tasks of {run.job} and what depends on them again for {when}? Tasks that succeeded"
        offered.insert(
            0,
            Button(
                "rerun_from_failure",
                run.job,
                "Rerun from failure",
                keep + " keep their outcome and output.",
                run_id=run.run_id,
            ),
        )
    return offered


def buttons(controls: Controls | None, shown: Sequence[Button]) -> str:
    if controls is None or not shown:
        return ""
    return '<span class="actions">' + "".join(controls.button(b) for b in shown) + "</span>"


def page(title: str, body: str, *, standalone: bool, nav: Sequence[tuple[str, str]] = ()) -> str:
    """A view: a full document locally, a fragment with its style for a CloudWatch custom widget."""
    crumbs = " / ".join(f'<a href="{escape(href)}">{escape(label)}</a>' for href, label in nav)
    heading = (f"<nav>{crumbs}</nav>" if crumbs else "") + f"<h1>{escape(title)}</h1>"
    inner = f'<style>{STYLE}</style><div class="js">{heading}{body}</div>'
    if not standalone:
        return inner
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} - jobsched</title></head><body>{inner}</body></html>"
    )


def cell(outcome: str, *, title: str, opacity: float = 1.0, size: int = 16) -> str:
    """One outcome as a coloured square with its symbol, its title on hover."""
    shown = look(outcome)
    return (
        f'<svg width="{size}" height="{size}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{size}" height="{size}" rx="3" fill="{shown.colour}" fill-opacity="{opacity:.2f}"/>'
        f'<text x="{size / 2}" y="{size * 0.75:.1f}" font-size="{size * 0.7:.0f}" text-anchor="middle" '
        f'fill="#ffffff">{escape(shown.symbol)}</text></svg>'
    )


STRIP_CELL = 18  # a 16-pixel square and a gap


def strip(outcomes: Sequence[str]) -> str:
    """A job's last runs as one SVG (a team page has 500 of them: one element per run, the rest in CSS)."""
    if not outcomes:
        return ""
    total = len(outcomes)
    counts: dict[str, int] = {}
    cells = []
    for index, outcome in enumerate(outcomes):
        shown = look(outcome)
        counts[shown.label] = counts.get(shown.label, 0) + 1
        x = index * STRIP_CELL
        cells.append(
            f'<g><title>{index + 1}/{total} {escape(shown.label)}</title><rect x="{x}" width="16" height="16" '
            f'rx="3" fill="{shown.colour}"/><text x="{x + 8}" y="12">{escape(shown.symbol)}</text></g>'
        )
    summary = ", ".join(f"{n} {label}" for label, n in counts.items())
    return (
        f'<svg class="strip" width="{total * STRIP_CELL}" height="16" role="img" '
        f'aria-label="last {total} runs, old to new: {escape(summary)}">{"".join(cells)}</svg>'
    )


def legend(outcomes: Iterable[str] = OUTCOMES_SHOWN) -> str:
    items = "".join(f"<span>{cell(o, title=look(o).label, size=14)} {escape(look(o).label)}</span>" for o in outcomes)
    return f'<p class="legend">{items}</p>'


def link_text(text: str, href: str | None) -> str:
    return f'<a href="{escape(href)}">{escape(text)}</a>' if href else escape(text)


def dependencies_view(upstreams: Sequence[Dependency], downstreams: Sequence[Dependency], links: Links) -> str:
    """The jobs a job runs after or waits for, and those that run after it or wait for it, each with its last
    run (another team's, by name only); nothing when it has none."""
    if not upstreams and not downstreams:
        return ""

    def rows(title: str, found: Sequence[Dependency]) -> str:
        lines = []
        for item in found:
            team_name, _, name = item.job.partition("/")
            href = links(f"/teams/{team_name}/jobs/{name}") if item.exists else None
            last = item.last_run
            outcome = strip_cell(last) if last is not None else None
            shown = (
                f"{cell(outcome, title=look(outcome).label)} {escape(last.run_id)}"
                if last is not None and outcome is not None
                else DASH
            )
            missing = "" if item.exists else " <span class=muted>(no such job)</span>"
            lines.append(
                f"<tr><td>{title}</td><td>{link_text(item.job, href)}{missing}</td>"
                f"<td class=muted>{escape(item.how)}</td><td>{shown}</td></tr>"
            )
        return "".join(lines)

    return (
        "<h2>Dependencies</h2><table><tr><th></th><th>job</th><th>how</th><th>last run</th></tr>"
        + rows("after", upstreams)
        + rows("before", downstreams)
        + "</table>"
    )


# ------------------------------------------------------------------------------------------- team


def team_view(team: str, healths: Sequence[JobHealth], links: Links, controls: Controls | None = None) -> str:
    """Every job of a team, worst first: its last runs, success rate, lateness, next fire, badges, and
    (with controls) its pause or resume and trigger buttons."""
    rows = "".join(_team_row(team, health, links, controls) for health in healths)
    acts = "<th></th>" if controls is not None else ""
    table = (
        "<table><tr><th>job</th><th>last runs (old to new)</th><th>success</th><th>p95 late</th>"
        f"<th>streak</th><th>next fire (UTC)</th>{acts}</tr>{rows}</table>"
    )
    preamble = controls.preamble(team) if controls is not None else ""
    return f'<p class="muted">{len(healths)} jobs, worst first</p>{preamble}{table}{legend()}'


def _team_row(team: str, health: JobHealth, links: Links, controls: Controls | None) -> str:
    name = health.job.split("/", 1)[-1]
    badges = "".join(
        f'<span class="badge incident" title="open incident: {escape(kind)}">&#9888; {escape(kind)}</span>'
        for kind in health.open_incidents
    )
    if health.state == "PAUSED":
        badges += (
            f'<span class="badge paused" title="{escape(health.paused_reason or "")}">&#10074;&#10074; paused</span>'
        )
    shown = strip(health.strip)
    rate = f"{health.success_rate * 100:.1f}%" if health.success_rate is not None else DASH
    late = f"{health.lateness_p95_s:.1f} s" if health.lateness_p95_s is not None else DASH
    return (
        f"<tr><td>{link_text(name, links(f'/teams/{team}/jobs/{name}'))}{badges}</td>"
        f"<td>{shown or '<span class=muted>no runs yet</span>'}</td>"
        f'<td class="num">{rate}</td><td class="num">{late}</td>'
        f"<td>{escape(health.streak or DASH)}</td><td class=muted>{escape(health.next_fire or DASH)}</td>"
        + (f"<td>{buttons(controls, job_buttons(health.job, health.state))}</td>" if controls is not None else "")
        + "</tr>"
    )


# -------------------------------------------------------------------------------------- timeline


def timeline_view(
    job: str, runs: Sequence[Run], occurrences: Sequence[Occurrence], zone: str, start: datetime, end: datetime
) -> str:
    """A heat-map of a job's instants: a row per day, a column per hour of its time zone. A cell shows the
    worst outcome in the hour, paler the later it started; skipped instants carry their reason on hover;
    a diamond marks a day with a DST transition or a blackout."""
    tz = ZoneInfo(zone)
    cells: dict[tuple[date, int], list[tuple[str, str, float]]] = {}
    marks: dict[date, list[str]] = {}
    ran = {run.scheduled_at for run in runs}
    for run in runs:
        local = run.scheduled_at.astimezone(tz)
        outcome = strip_cell(run)
        late = (run.lateness_ms or 0) / 1000
        text = f"{local:%H:%M} {look(outcome).label}" + (f", {late:.1f} s late" if run.lateness_ms is not None else "")
        text += f" ({run.reason})" if run.reason else ""
        cells.setdefault((local.date(), local.hour), []).append((outcome, text, late))
    for occurrence in occurrences:
        wall = occurrence.scheduled_wall
        reason = occurrence.reason or ""
        if occurrence.reason_kind in MARKED_KINDS:
            marks.setdefault(wall.date(), []).append(f"{wall:%H:%M}: {reason}")
        if not occurrence.fires and occurrence.at not in ran:
            cells.setdefault((wall.date(), wall.hour), []).append(("skipped", f"{wall:%H:%M} skipped: {reason}", 0.0))
    first = start.astimezone(tz).date()
    days = max(1, min((end.astimezone(tz).date() - first).days + 1, MAX_DAYS))
    rows = "".join(_timeline_row(first + timedelta(days=i), i, cells, marks) for i in range(days))
    hours = "".join(
        f'<text x="{LEFT + h * (CELL_W + 2) + CELL_W / 2}" y="12" font-size="10" text-anchor="middle" '
        f'fill="{MUTED}">{h:02d}</text>'
        for h in range(0, 24, 3)
    )
    svg = (
        f'<svg width="{LEFT + 24 * (CELL_W + 2)}" height="{24 + days * (CELL_H + 2)}" role="img" '
        f'aria-label="runs of {escape(job)} by day and hour">{hours}{rows}</svg>'
    )
    caption = (
        f'<p class="muted">{escape(zone)}, {first:%Y-%m-%d} to {first + timedelta(days=days - 1):%Y-%m-%d}: a row'
        " per day, a column per hour. The worst outcome in the hour; paler: a later start. &#9670; a DST"
        " transition or a blackout that day (hover for details).</p>"
    )
    return caption + svg + legend()


LEFT, CELL_W, CELL_H = 96, 18, 16


def _timeline_row(
    day: date, index: int, cells: dict[tuple[date, int], list[tuple[str, str, float]]], marks: dict[date, list[str]]
) -> str:
    y = 20 + index * (CELL_H + 2)
    parts = [f'<text x="0" y="{y + 12}" font-size="11" fill="{MUTED}">{day:%a %m-%d}</text>']
    if day in marks:
        parts.append(_mark(LEFT - 14, y, marks[day]))
    for hour in range(24):
        x = LEFT + hour * (CELL_W + 2)
        items = cells.get((day, hour))
        parts.append(
            _heat_cell(x, y, items)
            if items
            else f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" rx="2" fill="#f6f8fa"/>'
        )
    return "".join(parts)


HeatItem = tuple[str, str, float]  # outcome, what hovering says, seconds late


def _heat_cell(x: float, y: float, items: Sequence[HeatItem], *, lines_shown: int = 12) -> str:
    """One cell of a heat-map: the worst outcome among its items with its symbol, paler the later the
    latest of them started (two minutes late: half as strong), each item's line on hover."""
    outcome = min(items, key=lambda item: SEVERITY.index(item[0]) if item[0] in SEVERITY else len(SEVERITY))[0]
    shown = look(outcome)
    opacity = 1.0 - min(max(item[2] for item in items) / 120.0, 1.0) * 0.5
    lines = [item[1] for item in items[:lines_shown]]
    if len(items) > lines_shown:
        lines.append(f"and {len(items) - lines_shown} more")
    return (
        f'<g><title>{escape(chr(10).join(lines))}</title><rect x="{x}" y="{y}" width="{CELL_W}" '
        f'height="{CELL_H}" rx="2" fill="{shown.colour}" fill-opacity="{opacity:.2f}"/>'
        f'<text class="s" x="{x + CELL_W / 2}" y="{y + 12}">{escape(shown.symbol)}</text></g>'
    )


def _mark(x: float, y: float, notes: Sequence[str]) -> str:
    """The diamond beside a row with a DST transition or a blackout in it, the instants on hover."""
    note = escape("\n".join(notes[:6]) + (f"\nand {len(notes) - 6} more" if len(notes) > 6 else ""))
    return f'<text x="{x}" y="{y + 12}" font-size="11" fill="#8250df"><title>{note}</title>&#9670;</text>'


# ----------------------------------------------------------------------------------- team timeline


@dataclass(frozen=True)
class JobInstants:
    """What one row of a team's timeline shows: a job's runs in the range and the instants that did not
    fire (their reasons), DST shifts and blackouts; ``partial`` when the range held more runs than were read."""

    job: str
    runs: Sequence[Run]
    occurrences: Sequence[Occurrence]
    partial: bool = False


TEAM_COLUMNS = 40  # with the names, 970 px: the default width of a full-width widget
LABEL_W = 170


def team_timeline_view(
    team: str, rows: Sequence[JobInstants], start: datetime, end: datetime, links: Links, *, of_jobs: int
) -> str:
    """A heat-map of a team's jobs: a row per job (the most failed first), a column per 1/40 of the range
    (UTC). A cell shows the worst outcome in its span, paler the later; a skipped instant carries its
    reason on hover; a diamond marks a job with a DST transition or a blackout in the range."""
    span = max((end - start).total_seconds(), 60.0) / TEAM_COLUMNS
    parts = [_team_timeline_row(team, index, row, start, span, links) for index, row in enumerate(rows)]
    ticks = "".join(
        f'<text x="{LABEL_W + col * (CELL_W + 2)}" y="12" font-size="10" fill="{MUTED}">'
        f"{start + timedelta(seconds=span * col):%m-%d %H:%M}</text>"
        for col in range(0, TEAM_COLUMNS, 8)
    )
    svg = (
        f'<svg width="{LABEL_W + TEAM_COLUMNS * (CELL_W + 2)}" height="{24 + len(rows) * (CELL_H + 2)}" '
        f'role="img" aria-label="runs of team {escape(team)} by job and time">{ticks}{"".join(parts)}</svg>'
    )
    shown = f"{len(rows)} of {of_jobs} jobs, the most failed first" if len(rows) < of_jobs else f"{of_jobs} jobs"
    caption = (
        f'<p class="muted">{shown}; UTC, {instant_text(start)} to {instant_text(end)}: a row per job, a column per'
        f" {_age(timedelta(seconds=span))}. The worst outcome in the span; paler: a later start. &#9670; a DST"
        " transition or a blackout in the range; + more runs than were read (hover for details).</p>"
    )
    return caption + svg + legend()


def _team_timeline_row(team: str, index: int, row: JobInstants, start: datetime, span: float, links: Links) -> str:
    y = 20 + index * (CELL_H + 2)
    cells: dict[int, list[HeatItem]] = {}
    notes = []
    ran = {run.scheduled_at for run in row.runs}

    def column(at: datetime) -> int:
        return min(int((at - start).total_seconds() // span), TEAM_COLUMNS - 1)

    for run in row.runs:
        outcome = strip_cell(run)
        late = (run.lateness_ms or 0) / 1000
        text = f"{instant_text(run.scheduled_at)} {look(outcome).label}"
        text += f", {late:.1f} s late" if run.lateness_ms is not None else ""
        text += f" ({run.reason})" if run.reason else ""
        cells.setdefault(column(run.scheduled_at), []).append((outcome, text, late))
    for occurrence in row.occurrences:
        if occurrence.reason_kind in MARKED_KINDS:
            notes.append(f"{occurrence.scheduled_wall:%Y-%m-%d %H:%M}: {occurrence.reason}")
        if not occurrence.fires and occurrence.at not in ran:
            text = f"{instant_text(occurrence.at)} skipped: {occurrence.reason or ''}"
            cells.setdefault(column(occurrence.at), []).append(("skipped", text, 0.0))
    name = row.job.split("/", 1)[-1]
    href = links(f"/teams/{team}/jobs/{name}")
    label = escape(name if len(name) <= 26 else name[:25] + "\u2026") + (" +" if row.partial else "")
    title = escape(
        row.job + (": more runs in the range than were read; the oldest are not shown" if row.partial else "")
    )
    colour = "#0550ae" if href else MUTED  # a link looks like one
    text = f'<text x="0" y="{y + 12}" font-size="11" fill="{colour}"><title>{title}</title>{label}</text>'
    parts = [f'<a href="{escape(href)}">{text}</a>' if href else text]
    if notes:
        parts.append(_mark(LABEL_W - 14, y, notes))
    parts.append(
        f'<rect x="{LABEL_W}" y="{y}" width="{TEAM_COLUMNS * (CELL_W + 2) - 2}" height="{CELL_H}" fill="#f6f8fa"/>'
    )
    parts.extend(
        _heat_cell(LABEL_W + col * (CELL_W + 2), y, items, lines_shown=4) for col, items in sorted(cells.items())
    )
    return "".join(parts)


# ------------------------------------------------------------------------------------------- run


def checks_summary(checks: Sequence[Mapping[str, Any]]) -> str:
    """Each check on one line: passed or failed, its severity when it only warns, and why it failed."""
    lines = []
    for check in checks:
        mark = "\u2713" if check.get("passed") else "\u2717"
        severity = " (warning)" if check.get("severity") == "warn" else ""
        why = f": {check['message']}" if check.get("message") else ""
        lines.append(escape(f"{mark} {check.get('name')}{severity}{why}"))
    return "<br>".join(lines)


def run_view(run: Run, tasks: dict[str, TaskState], graph: Graph | None, order: Sequence[str], now: datetime) -> str:
    """The run's attempt and timings; for a DAG run, a Gantt chart of its tasks and its dependency graph."""
    outcome = strip_cell(run)
    facts = [
        ("status", f"{cell(outcome, title=look(outcome).label)} {escape(run.status.value)}"),
        ("scheduled for", instant_text(run.scheduled_at)),
        ("attempt", str(run.attempt)),
        ("started", instant_text(run.started_at) if run.started_at else DASH),
        ("finished", instant_text(run.finished_at) if run.finished_at else DASH),
        ("late at start", f"{run.lateness_ms / 1000:.1f} s" if run.lateness_ms is not None else DASH),
        ("trigger", escape(run.trigger)),
        *((("event", escape(trigger_summary(run.trigger_detail))),) if run.trigger_detail else ()),
        ("error", escape(run.error or DASH)),
        *((("checks", checks_summary(run.checks)),) if run.checks else ()),
        ("reason", escape(run.reason or DASH)),
        *(
            (("waiting for", escape(", ".join(run.waiting_for))),)
            if run.waiting_for and run.status is RunStatus.WAITING
            else ()
        ),
    ]
    table = "<table>" + "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in facts) + "</table>"
    if graph is None:
        return table
    gantt_chart = gantt(run, tasks, order, now)
    return f"{table}<h2>Tasks over time</h2>{gantt_chart}<h2>Dependencies</h2>{dependency_graph(graph, tasks, order)}"


def task_outcome(state: TaskState | None) -> str:
    if state is None:
        return "pending"
    status = state.status.value.lower()
    if status == "succeeded" and state.attempt > 1:
        return "retried"
    return "running" if status == "retrying" else status


GANTT_LEFT, GANTT_WIDTH, GANTT_ROW = 140, 520, 22


def gantt(run: Run, tasks: dict[str, TaskState], order: Sequence[str], now: datetime) -> str:
    """A bar per task from its start to its end (now if unfinished); waiting and skipped tasks outlined."""
    start = run.started_at or run.scheduled_at
    ends = [(t.finished_at or now) for t in tasks.values() if t.started_at] + [run.finished_at or now]
    span = max((max(ends) - start).total_seconds(), 1.0)
    bars = "".join(
        _gantt_row(index, name, tasks.get(name), start, span, now, items=_items_note(name, tasks))
        for index, name in enumerate(order)
    )
    bottom = 6 + len(order) * GANTT_ROW + 12
    axis = (
        f'<text x="{GANTT_LEFT}" y="{bottom}" font-size="10" fill="{MUTED}">0 s</text>'
        f'<text x="{GANTT_LEFT + GANTT_WIDTH}" y="{bottom}" font-size="10" text-anchor="end" fill="{MUTED}">'
        f"{span:.0f} s</text>"
    )
    return (
        f'<svg width="{GANTT_LEFT + GANTT_WIDTH + 10}" height="{bottom + 6}" role="img" aria-label="tasks over time">'
        f"{bars}{axis}</svg>"
    )


def _items_note(name: str, tasks: dict[str, TaskState]) -> str:
    """A map task's items, grouped on its bar: how many, and how many succeeded and failed."""
    found = [state.status.value for key, state in tasks.items() if key.startswith(f"{name}[")]
    if not found:
        return ""
    succeeded = found.count("SUCCEEDED")
    failed = sum(found.count(status) for status in ("FAILED", "TIMED_OUT", "CANCELLED"))
    return f" [{len(found)} items: {succeeded} succeeded, {failed} failed, {len(found) - succeeded - failed} running]"


def _gantt_row(
    index: int, name: str, state: TaskState | None, start: datetime, span: float, now: datetime, *, items: str = ""
) -> str:
    y = 6 + index * GANTT_ROW
    outcome = task_outcome(state)
    shown = look(outcome)
    short = name if len(name) <= 18 else name[:17] + "…"  # the whole name: the bar's title and the tasks table
    label = f'<text x="0" y="{y + 13}" font-size="12" fill="{TEXT}"><title>{escape(name)}</title>{escape(short)}</text>'
    waited = _wait_bar(state, start, span, now, y)
    if waited and (state is None or state.started_at is None):
        return label + waited
    if state is None or state.started_at is None:
        note = shown.label if state is None else f"{shown.label} (not run)" if outcome == "skipped" else shown.label
        return (
            f'{label}<g><title>{escape(name)}: {escape(note)}</title><rect x="{GANTT_LEFT}" y="{y + 2}" '
            f'width="{GANTT_WIDTH}" height="14" fill="none" stroke="#afb8c1" stroke-dasharray="3 3"/>'
            f'<text x="{GANTT_LEFT + 6}" y="{y + 13}" font-size="11" fill="{MUTED}">'
            f"{escape(shown.symbol)} {escape(note)}</text></g>"
        )
    x0 = GANTT_LEFT + (state.started_at - start).total_seconds() / span * GANTT_WIDTH
    x1 = GANTT_LEFT + ((state.finished_at or now) - start).total_seconds() / span * GANTT_WIDTH
    took = ((state.finished_at or now) - state.started_at).total_seconds()
    retry = f", attempt {state.attempt}" if state.attempt > 1 else ""
    title = f"{name}: {shown.label}{retry}, {took:.1f} s" + (f" ({state.error})" if state.error else "") + items
    marker = f"{shown.symbol} x{state.attempt}" if state.attempt > 1 else shown.symbol
    if items:
        marker += items.split(":")[0].replace("[", " ")  # the bar says how many items it stands for
    return (
        f'{label}{waited}<g><title>{escape(title)}</title><rect x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 3):.1f}" '
        f'height="14" rx="2" fill="{shown.colour}"/><text x="{x0 + 3:.1f}" y="{y + 13}" font-size="11" '
        f'fill="#ffffff">{escape(marker)}</text></g>'
    )


def _wait_bar(state: TaskState | None, start: datetime, span: float, now: datetime, y: int) -> str:
    """A task's wait (for its data, or its dependencies) before it started: an outlined bar from when it was first
    held to its start (or now)."""
    if state is None or state.parked_at is None:
        return ""
    until = state.started_at or state.finished_at or now
    if until <= state.parked_at:
        return ""
    x0 = GANTT_LEFT + max((state.parked_at - start).total_seconds(), 0) / span * GANTT_WIDTH
    x1 = GANTT_LEFT + (until - start).total_seconds() / span * GANTT_WIDTH
    waited = (until - state.parked_at).total_seconds()
    colour = look("waiting").colour
    return (
        f"<g><title>waited {waited:.1f} s from {instant_text(state.parked_at)}</title>"
        f'<rect x="{x0:.1f}" y="{y + 4}" width="{max(x1 - x0, 3):.1f}" height="10" fill="none" stroke="{colour}" '
        'stroke-dasharray="4 2"/></g>'
    )


def dependency_graph(graph: Graph, tasks: dict[str, TaskState], order: Sequence[str]) -> str:
    """Tasks in columns by depth (the longest path from a root), a line from each dependency."""
    depth: dict[str, int] = {}
    for name in order:
        parents = graph[name].depends_on if name in graph else ()
        depth[name] = 1 + max((depth.get(parent, 0) for parent in parents), default=-1)
    columns: dict[int, list[str]] = {}
    for name in order:
        columns.setdefault(depth[name], []).append(name)
    box_w, box_h, gap_x, gap_y = 124, 26, 48, 12
    where = {
        name: (10 + level * (box_w + gap_x), 10 + position * (box_h + gap_y))
        for level, names in columns.items()
        for position, name in enumerate(names)
    }
    edges = [
        f'<line x1="{where[parent][0] + box_w}" y1="{where[parent][1] + box_h / 2}" x2="{where[name][0]}" '
        f'y2="{where[name][1] + box_h / 2}" stroke="{MUTED}" stroke-width="1.2"/>'
        for name, node in graph.items()
        for parent in node.depends_on
        if parent in where and name in where
    ]
    boxes = []
    for name, (x, y) in where.items():
        shown = look(task_outcome(tasks.get(name)))
        boxes.append(
            f'<g><title>{escape(name)}: {escape(shown.label)}</title><rect x="{x}" y="{y}" width="{box_w}" '
            f'height="{box_h}" rx="4" fill="{shown.colour}"/><text x="{x + 8}" y="{y + 17}" font-size="12" '
            f'fill="#ffffff">{escape(shown.symbol)} {escape(name[:14])}</text></g>'
        )
    width = 20 + (max(columns, default=0) + 1) * (box_w + gap_x)
    height = 20 + max((len(names) for names in columns.values()), default=1) * (box_h + gap_y)
    return (
        f'<svg width="{width}" height="{height}" role="img" aria-label="task dependencies">'
        f"{''.join(edges)}{''.join(boxes)}</svg>"
    )


# ------------------------------------------------------------------------------------- incidents


def incidents_view(incidents: Sequence[Incident], runbooks: dict[str, str], now: datetime, links: Links) -> str:
    """Open incidents across teams, oldest first: age, failures, who was paged, the last error, the runbook."""
    if not incidents:
        return '<p class="muted">No open incident.</p>'
    rows = []
    for incident in incidents:
        opened = datetime.fromisoformat(incident.opened_at.replace("Z", "+00:00"))
        age = _age(now - opened)
        subject = incident.subject
        team, _, name = subject.partition("/")
        href = links(f"/teams/{team}/jobs/{name}") if name and not subject.startswith(("TARGET#", "SYSTEM")) else None
        runbook = runbooks.get(subject)
        book = f'<a href="{escape(runbook)}">runbook</a>' if runbook else DASH
        paged = ", ".join(incident.paged) or "nobody yet"
        if incident.acknowledged_by:  # someone is on it
            paged += f"; acknowledged by {incident.acknowledged_by}"
        last = incident.last or {}
        error = str(last.get("error") or DASH)
        # A run waiting for a person is not a failure: its row is blue, says what is asked, and links the run.
        asking = incident.incident_class == "approval"
        badge = (
            '<span class="badge approval">? waits for approval</span>'
            if asking
            else f'<span class="badge incident">&#9888; {escape(incident.incident_class)}</span>'
        )
        if last.get("run_id") and name and not subject.startswith(("TARGET#", "SYSTEM")):
            href = links(f"/teams/{team}/jobs/{name}/runs/{last['run_id']}") or href  # the run it is about
        if asking:
            error = str(last.get("detail") or DASH)
        rows.append(
            f"<tr><td>{badge}</td>"
            f"<td>{link_text(subject, href)}</td><td class=num>{age}</td><td class=num>{incident.failures}</td>"
            f"<td>{escape(paged)}</td><td class=muted>{escape(error[:200])}</td><td>{book}</td></tr>"
        )
    return (
        f'<p class="muted">{len(incidents)} open, oldest first</p><table><tr><th>class</th><th>subject</th>'
        "<th>open for</th><th>events</th><th>paged</th><th>last error, or what is asked</th><th></th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _age(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 48 else f"{hours // 24} d"
