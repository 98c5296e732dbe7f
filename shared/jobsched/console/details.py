"""What the console's job and run pages show beyond their charts, so each answers what its CLI twin answers
(#46): the job's spec, next fires, triggers and latest runs with their status, duration and trigger (`jobsched get
job`, `jobsched runs`); a DAG run's tasks in full, with why each waits, its output, checks and error (`jobsched
run`), and the question each waiting approval asks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from html import escape

from jobsched.console.palette import look
from jobsched.core.records import StoredJob
from jobsched.core.run_records import Run, TaskState
from jobsched.core.runs import instant_text
from jobsched.core.spec import ApprovalTarget, JobSpec
from jobsched.dag.progress import task_reason
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.fires import schedule_of
from jobsched.schedule.steps import ScheduleTooExpensive
from jobsched.watch.health import strip_cell

DASH = "\u2013"
NEXT_FIRES = 5
OUTPUT_SHOWN = 2000  # characters of a task's output on the page (the API and `jobsched run -o json` have it whole)


def job_facts(stored: StoredJob, now: datetime, company: CompanySettings) -> str:
    """Its next fires, its triggers and what it runs, then its spec as stored (YAML)."""
    import yaml

    spec = stored.spec
    compiled = schedule_of(stored, company)
    try:
        upcoming = [instant_text(o.fire_at) for o in compiled.next_fires(now, NEXT_FIRES)] if compiled else []
    except ScheduleTooExpensive:
        upcoming = []
    when = (
        f"{escape(spec.schedule.expression)} ({escape(spec.schedule.timezone)})"
        if spec.schedule
        else "no schedule: runs when triggered"
    )
    triggers = [_trigger_text(index, spec) for index in range(len(spec.triggers))]
    runs = "a DAG of " + ", ".join(task.name for task in spec.dag.tasks) if spec.dag else _target_text(spec)
    rows = [
        ("schedule", when),
        ("next fires", escape(", ".join(upcoming)) if upcoming and stored.state == "ACTIVE" else DASH),
        ("triggers", "<br>".join(escape(t) for t in triggers) or DASH),
        ("runs", escape(runs)),
        ("version", f"{stored.version}, by {escape(stored.updated_by)} at {instant_text(stored.updated_at)}"),
    ]
    table = "<table>" + "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows) + "</table>"
    text = yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False)
    return f"{table}<details><summary>Spec</summary><pre>{escape(text)}</pre></details>"


def _trigger_text(index: int, spec: JobSpec) -> str:
    trigger = spec.triggers[index]
    if trigger.s3 is not None:
        what = f"objects in s3://{trigger.s3.bucket}/{trigger.s3.prefix}*{trigger.s3.suffix}"
    elif trigger.event is not None:
        what = f"events on bus {trigger.event.bus}: {json.dumps(trigger.event.pattern, sort_keys=True)[:200]}"
    elif trigger.after is not None:
        after = trigger.after
        upstreams = [after.job] if after.job else (after.all or after.any or [])
        how = "all of" if after.all else "any of" if after.any else ""
        what = f"after {how} {', '.join(str(u) for u in upstreams)}".replace("  ", " ")
    else:
        what = "a trigger"
    batched = f", batched: {trigger.batch.window} / {trigger.batch.max_events}" if trigger.batch else ""
    return what + batched


def _target_text(spec: JobSpec) -> str:
    target = spec.target
    if target is None:
        return DASH
    fields = ("function", "url", "queue_url", "state_machine_arn", "bus", "cluster", "job_queue")
    named = next((str(getattr(target, field)) for field in fields if getattr(target, field, None)), "")
    return f"{target.type} {named}".strip()


def runs_table(shown: Sequence[Run], link: str | None, *, now: datetime) -> str:
    """The latest runs as `jobsched runs` lists them: status word, attempt, trigger, start, duration, lateness, why."""
    rows = []
    for run in shown:
        outcome = strip_cell(run)
        took = run.finished_at or now
        duration = f"{(took - run.started_at).total_seconds():.1f} s" if run.started_at else DASH
        late = f"{run.lateness_ms / 1000:.1f} s" if run.lateness_ms is not None else DASH
        href = f"{link}/runs/{run.run_id}" if link else None
        name = f'<a href="{escape(href)}">{escape(run.run_id)}</a>' if href else escape(run.run_id)
        why = run.error or run.reason or (", ".join(run.waiting_for) if run.waiting_for else "")
        rows.append(
            f'<tr><td><span title="{escape(look(outcome).label)}">{escape(run.status.value)}</span></td>'
            f"<td>{name}</td><td class=num>{run.attempt}</td><td>{escape(run.trigger)}</td>"
            f"<td>{instant_text(run.started_at) if run.started_at else DASH}</td><td class=num>{duration}</td>"
            f"<td class=num>{late}</td><td class=muted>{escape(why[:300])}</td></tr>"
        )
    header = (
        "<tr><th>status</th><th>run</th><th>attempt</th><th>trigger</th><th>started</th><th>took</th><th>late</th>"
        "<th>why</th></tr>"
    )
    return f"<h2>Latest runs</h2><table>{header}{''.join(rows)}</table>"


def tasks_table(
    run: Run, spec: JobSpec, tasks: dict[str, TaskState], order: Sequence[str], graph_after: dict[str, list[str]]
) -> str:
    """Every task by its whole name: status, attempt, timings, why it waits, its error or output and checks."""
    rows = []
    for name in order:
        state = tasks.get(name)
        reason = task_reason(name, state, graph_after.get(name, []), tasks, spec, run)
        said = (state.error if state else None) or reason or _output(state)
        checks = ", ".join(
            f"{c.get('name')}: {'passed' if c.get('passed') else c.get('message') or 'failed'}"
            for c in (state.checks or [] if state else [])
        )
        rows.append(
            f"<tr><td>{escape(name)}</td><td>{escape(state.status.value if state else 'PENDING')}</td>"
            f"<td class=num>{state.attempt if state else 0}</td>"
            f"<td>{instant_text(state.started_at) if state and state.started_at else DASH}</td>"
            f"<td>{instant_text(state.finished_at) if state and state.finished_at else DASH}</td>"
            f"<td class=muted>{escape(said or DASH)}</td><td class=muted>{escape(checks or DASH)}</td></tr>"
        )
    header = (
        "<tr><th>task</th><th>status</th><th>attempt</th><th>started</th><th>finished</th>"
        "<th>why, error or output</th><th>checks</th></tr>"
    )
    return f"<h2>Tasks</h2><table>{header}{''.join(rows)}</table>"


def _output(state: TaskState | None) -> str:
    text = state.output if state is not None and state.output else ""
    return text if len(text) <= OUTPUT_SHOWN else text[:OUTPUT_SHOWN] + "…"


def approvals_asked(spec: JobSpec, waiting: Sequence[tuple[str, str]]) -> str:
    """What each waiting approval asks, on the run page itself (not only on the confirmation)."""
    if not waiting:
        return ""
    approvals = {t.name for t in (spec.dag.tasks if spec.dag else []) if isinstance(t.target, ApprovalTarget)}
    items = "".join(
        f"<li><b>{escape(task)}</b> asks: {escape(question or 'approve to go on?')}</li>"
        for task, question in waiting
        if task in approvals
    )
    return f"<h2>Waiting for approval</h2><ul>{items}</ul>"
