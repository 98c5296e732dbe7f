"""What the API returns: domain objects turned into the response models of ``api.models``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jobsched.api.errors import ApiError
from jobsched.api.models import (
    BackfillView,
    CheckView,
    IncidentView,
    JobView,
    LogLineView,
    MapItemsView,
    ProgressView,
    RunView,
    TaskView,
    TriggerDetailView,
)
from jobsched.api.tokens import CallbackTokens, token_expiry
from jobsched.core.bounds import parse_bounded_int
from jobsched.core.records import Incident, LogLine, StoredJob
from jobsched.core.run_records import Progress, Run, TaskState
from jobsched.core.runs import RunStatus, TaskStatus, instant_text, moment_text
from jobsched.core.spec import CallbackTarget, JobSpec
from jobsched.core.traces import xray_trace_id
from jobsched.dag.definition import graph_from_values
from jobsched.dag.progress import task_reason
from jobsched.pipeline.manual_runs import BackfillProgress
from jobsched.ports import TaskRunsPort
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.fires import preview_schedule, schedule_of
from jobsched.watch.trace_spans import run_trace_id


def if_match_version(if_match: str | None) -> int | None:
    if if_match is None:
        return None
    version = parse_bounded_int(if_match.strip().strip('"').removeprefix("W/").strip('"'), max_digits=12)
    if version is None:
        raise ApiError(422, "invalid_if_match", "If-Match must be a job version number (the ETag)", "If-Match")
    return version


def next_fires(spec: JobSpec, now: datetime, count: int, company: CompanySettings) -> list[str]:
    """A job's first fire times if it were registered now (a validation's preview)."""
    compiled = preview_schedule(spec, registered_at=now, company=company)
    return [instant_text(o.at) for o in compiled.next_fires(now, count)] if compiled else []


def upcoming(stored: StoredJob, now: datetime, count: int, company: CompanySettings) -> list[str]:
    """A stored job's next fire times (none while paused)."""
    compiled = schedule_of(stored, company)
    if stored.state != "ACTIVE" or compiled is None:
        return []
    return [instant_text(o.at) for o in compiled.next_fires(now, count)]


def job_view(stored: StoredJob, now: datetime, company: CompanySettings) -> JobView:
    next_five = upcoming(stored, now, 5, company)
    return JobView(
        team=stored.spec.team,
        name=stored.spec.name,
        version=stored.version,
        state=stored.state,
        paused_reason=stored.paused_reason,
        paused_by=stored.paused_by,
        paused_at=instant_text(stored.paused_at) if stored.paused_at else None,
        created_at=instant_text(stored.created_at),
        updated_at=instant_text(stored.updated_at),
        updated_by=stored.updated_by,
        next_fire_times=next_five,
        spec=stored.spec.model_dump(mode="json", exclude_none=True),
    )


def run_view(run: Run, token: str | None) -> RunView:
    team, _, name = run.job.partition("/")
    lateness = run.lateness_ms / 1000 if run.lateness_ms is not None else None
    return RunView(
        job=run.job,
        run_id=run.run_id,
        status=run.status.value,
        attempt=run.attempt,
        trigger=run.trigger,
        trigger_detail=TriggerDetailView.model_validate(run.trigger_detail) if run.trigger_detail else None,
        trace_id=run_trace_id(run),
        xray_trace_id=xray_trace_id(run_trace_id(run)),
        scheduled_at=instant_text(run.scheduled_at),
        fire_at=instant_text(run.fire_at),
        started_at=moment_text(run.started_at) if run.started_at else None,
        finished_at=moment_text(run.finished_at) if run.finished_at else None,
        lateness_seconds=lateness,
        next_attempt_at=instant_text(run.next_attempt_at) if run.next_attempt_at else None,
        error=run.error,
        output=run.output,
        checks=check_views(run.checks),
        reason=run.reason,
        waiting_for=run.waiting_for if run.status is RunStatus.WAITING else None,
        wait_started_at=instant_text(run.wait_started_at) if run.wait_started_at else None,
        correlation_id=run.correlation_id,
        callback_token=token,
        progress=progress_view(run.progress) if run.progress is not None else None,
        anomaly=run.anomaly,
        logs=f"/teams/{team}/jobs/{name}/runs/{run.run_id}/logs",
    )


def map_items(task: str, states: dict[str, TaskState]) -> MapItemsView:
    found = [state.status for name, state in states.items() if name.startswith(f"{task}[")]
    succeeded = sum(1 for status in found if status is TaskStatus.SUCCEEDED)
    failed = sum(1 for status in found if status in (TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.CANCELLED))
    return MapItemsView(total=len(found), succeeded=succeeded, failed=failed, running=len(found) - succeeded - failed)


def check_views(checks: list[dict[str, Any]] | None) -> list[CheckView] | None:
    return [CheckView.model_validate(check) for check in checks] if checks else None


def progress_view(progress: Progress) -> ProgressView:
    return ProgressView(
        at=moment_text(progress.at),
        attempt=progress.attempt,
        percent=progress.percent,
        message=progress.message,
        checkpoint=json.loads(progress.checkpoint) if progress.checkpoint else None,
    )


def task_views(run: Run, spec: JobSpec, runs: TaskRunsPort, tokens: CallbackTokens, now: datetime) -> list[TaskView]:
    """A DAG run's tasks in dependency order, with a callback token for each callback task now running."""
    assert run.graph is not None
    graph = graph_from_values(run.graph)
    states = runs.tasks(run.job, run.run_id)
    callbacks = {
        task.name: task.timeout or task.target.timeout
        for task in (spec.dag.tasks if spec.dag else [])
        if isinstance(task.target, CallbackTarget)
    }
    order = spec.dag.order() if spec.dag else []
    mapped = {task.name for task in (spec.dag.tasks if spec.dag else []) if task.map is not None}
    names = [name for name in order if name in graph] + [name for name in graph if name not in order]
    views = []
    for name in names:
        state = states.get(name)
        running = state is not None and state.status.value == "RUNNING"
        views.append(
            TaskView(
                name=name,
                status=state.status.value if state else "PENDING",
                attempt=state.attempt if state else 0,
                depends_on=list(graph[name].depends_on),
                started_at=instant_text(state.started_at) if state and state.started_at else None,
                finished_at=instant_text(state.finished_at) if state and state.finished_at else None,
                error=state.error if state else None,
                output=state.output if state else None,
                checks=check_views(state.checks) if state else None,
                items=map_items(name, states) if name in mapped else None,
                reason=task_reason(name, state, list(graph[name].depends_on), states, spec, run),
                callback_token=tokens.issue(
                    run.job,
                    run.run_id,
                    state.attempt,
                    name,
                    expires_at=token_expiry(state.started_at, callbacks[name], now),
                )
                if state is not None and running and name in callbacks and run.status is RunStatus.RUNNING
                else None,
            )
        )
    return views


def backfill_view(progress: BackfillProgress) -> BackfillView:
    return BackfillView(
        backfill_id=progress.backfill_id,
        job=progress.job,
        start=instant_text(progress.start),
        end=instant_text(progress.end),
        total=progress.total,
        sent=progress.sent,
        finished=progress.finished,
        in_flight=len(progress.in_flight),
        state=progress.state,
        status=list(progress.statuses),
        rate_per_minute=progress.rate_per_minute,
        priority=progress.priority,
        rerun=progress.rerun,
    )


def incident_view(incident: Incident) -> IncidentView:
    return IncidentView(
        incident_class=incident.incident_class,
        opened_at=incident.opened_at,
        first_kind=incident.first_kind,
        events=incident.failures,
        paged=list(incident.paged),
        auto_paused=incident.auto_paused,
        last_error=incident.last.get("error"),
        acknowledged_by=incident.acknowledged_by,
        acknowledged_at=incident.acknowledged_at,
        severity=incident.severity,
        snoozed_until=incident.snoozed_until,
        snoozed_by=incident.snoozed_by,
        held=list(incident.held),
    )


def log_line_view(line: LogLine) -> LogLineView:
    return LogLineView(
        at=moment_text(line.at), component=line.component, level=line.level, message=line.message, fields=line.fields
    )
