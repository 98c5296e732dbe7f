"""Server-rendered views: HTML with inline SVG, no script. Pure: data in, a string out.

Every value from a team (job names, errors, reasons) is escaped. CloudWatch limits a custom widget's
output (see README, "The console"); a team page of 500 jobs is well under it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from html import escape
from typing import Protocol

from jobsched.console.palette import BACKGROUND, MUTED, TEXT, look
from jobsched.core.run_records import Run
from jobsched.core.runs import TERMINAL, RunStatus, instant_text
from jobsched.registry.dependencies import Dependency
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

    action: str  # pause | resume | trigger | rerun | rerun_from_failure | page_test (jobsched.console.actions)
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


def job_buttons(job: str, state: str, *, drill: bool = False) -> list[Button]:
    """Pause or resume, and trigger; with ``drill`` (the job's own page) a paging drill of its chain too."""
    pause_or_resume = (
        Button("resume", job, "Resume", f"Resume {job}? Instants that fell while it was paused are not run.")
        if state == "PAUSED"
        else Button("pause", job, "Pause", f"Pause {job}? No instant fires until it is resumed.")
    )
    drill_button = Button(
        "page_test",
        job,
        "Test its pages",
        f"Send a page marked TEST through {job}'s escalation chain (every topic and webhook it pages)?",
    )
    shown = [pause_or_resume, Button("trigger", job, "Trigger", f"Run {job} now, once?")]
    return [*shown, drill_button] if drill else shown


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


def age_text(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 48 else f"{hours // 24} d"
