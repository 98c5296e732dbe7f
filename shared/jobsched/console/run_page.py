"""A run's page: its facts, and for a DAG run a Gantt chart of its tasks (with their waits) and its dependency graph.
Pure, escaped, as ``render``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any

from jobsched.console.palette import MUTED, TEXT, look
from jobsched.console.render import DASH, cell
from jobsched.core.events import trigger_summary
from jobsched.core.run_records import Run, TaskState
from jobsched.core.runs import RunStatus, instant_text
from jobsched.core.traces import xray_trace_id
from jobsched.dag.definition import Graph
from jobsched.watch.health import strip_cell
from jobsched.watch.trace_spans import run_spans, run_trace_id

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


def run_view(
    run: Run,
    tasks: dict[str, TaskState],
    graph: Graph | None,
    order: Sequence[str],
    now: datetime,
    region: str | None = None,
) -> str:
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
        *((("started by", escape(trigger_summary(run.trigger_detail))),) if run.trigger_detail else ()),
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
    table += trace_view(run, tasks, now, region)
    if graph is None:
        return table
    gantt_chart = gantt(run, tasks, order, now)
    return f"{table}<h2>Tasks over time</h2>{gantt_chart}<h2>Dependencies</h2>{dependency_graph(graph, tasks, order)}"


def trace_view(run: Run, tasks: dict[str, TaskState], now: datetime, region: str | None) -> str:
    """The run's trace: its id (linked to X-Ray's console where the region is known) and a waterfall of its spans,
    each a bar from its start to its end (now if unfinished), nested under the run."""
    trace = run_trace_id(run)
    xray = xray_trace_id(trace)
    shown = escape(trace)
    if region:
        href = f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#xray:traces/{xray}"
        shown = f'<a href="{escape(href)}">{shown}</a>'
    spans = run_spans(run, tasks)
    start = min(span.start for span in spans)
    total = max(max((span.end or now) for span in spans) - start, timedelta(seconds=1)).total_seconds()
    rows = []
    for span in spans:
        left = (span.start - start).total_seconds() / total * WATERFALL_WIDTH
        width = max(((span.end or now) - span.start).total_seconds() / total * WATERFALL_WIDTH, 2)
        indent = "" if span.parent_id is None else "&nbsp;&nbsp;"
        took = f"{((span.end or now) - span.start).total_seconds():.1f} s" + ("" if span.end else " so far")
        fill, title = look(span.status.lower()).colour, escape(span.status)
        bar = f'<rect x="{left:.1f}" width="{width:.1f}" height="12" fill="{fill}"><title>{title}</title></rect>'
        rows.append(
            f"<tr><td>{indent}{escape(span.name)}</td><td class=num>{took}</td>"
            f'<td><svg width="{WATERFALL_WIDTH}" height="12">{bar}</svg></td></tr>'
        )
    search = escape(f'annotation.jobsched_trace = "{trace}"')
    found = f'<p class="muted">The worker\'s part in X-Ray: {search}</p>'
    return f"<h2>Trace {shown}</h2>{found}<table>{''.join(rows)}</table>"


WATERFALL_WIDTH = 420


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
