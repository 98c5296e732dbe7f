"""Timelines: a job's instants over time (each run a cell, skipped and moved instants marked) and a team's jobs side by
side. Pure, escaped, as ``render``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from html import escape
from zoneinfo import ZoneInfo

from jobsched.console.palette import MUTED, look
from jobsched.console.render import MARKED_KINDS, MAX_DAYS, SEVERITY, Links, age_text, legend
from jobsched.core.run_records import Run
from jobsched.core.runs import instant_text
from jobsched.schedule.engine import Occurrence
from jobsched.watch.health import strip_cell

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
        f" {age_text(timedelta(seconds=span))}. The worst outcome in the span; paler: a later start. &#9670; a DST"
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
