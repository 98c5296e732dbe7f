"""API response bodies (the requests' are ``api.requests``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue


class ErrorDetail(BaseModel):
    field: str
    code: str
    message: str


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None
    errors: list[ErrorDetail] = Field(default_factory=list)


class ErrorResponse(BaseModel):
    error: ErrorBody


class IncidentView(BaseModel):
    incident_class: str = Field(description="failing (failures, timeouts, missed schedules) or late (deadlines)")
    opened_at: str
    first_kind: str
    events: int = Field(description="failures (or misses) since it opened")
    paged: list[str] = Field(description="contacts paged: primary, secondary")
    auto_paused: bool = False
    last_error: str | None = None
    acknowledged_by: str | None = Field(default=None, description="who is on it (the secondary is not paged)")
    acknowledged_at: str | None = None
    severity: str | None = Field(default=None, description="ticket: a best-effort job's incident, never paged")
    snoozed_until: str | None = Field(default=None, description="no page for it before this instant")
    snoozed_by: str | None = None
    held: list[dict[str, str]] = Field(
        default_factory=list,
        description="pages a company maintenance window held (role, window, at, kind): recorded, not sent",
    )


class WarningView(BaseModel):
    field: str
    code: str
    message: str


class JobView(BaseModel):
    team: str
    name: str
    version: int
    state: Literal["ACTIVE", "PAUSED"]
    paused_reason: str | None = None
    paused_by: str | None = None
    paused_at: str | None = None
    created_at: str
    updated_at: str
    updated_by: str
    next_fire_times: list[str]
    spec: dict[str, Any]
    open_incidents: list[IncidentView] | None = Field(
        default=None, description="GET of one job: its open incidents (one page each until a success resolves it)"
    )
    warnings: list[WarningView] | None = Field(
        default=None,
        description="PUT: what the job names that cannot work yet (a bucket that does not exist or sends no events"
        " to EventBridge, a topic that does not exist): stored all the same, since it may be created later",
    )


class PauseView(JobView):
    cancelled_runs: list[str] = Field(
        default_factory=list, description="with cancel_running: the runs cancelled (their tasks stopped)"
    )


class JobPage(BaseModel):
    jobs: list[JobView]
    next_token: str | None = None


class CheckView(BaseModel):
    """One quality gate's result on the output (``checks:`` of the job or task)."""

    name: str
    severity: Literal["error", "warn"]
    passed: bool
    message: str | None = Field(default=None, description="why it failed")


class MapItemsView(BaseModel):
    """A map task's items so far: one record each, under the task."""

    total: int = Field(description="items that have started")
    succeeded: int
    failed: int = Field(description="failed or timed out (after their retries)")
    running: int = Field(description="running, or waiting to be retried")


class TaskView(BaseModel):
    name: str
    status: str = Field(
        description="PENDING, WAITING, RUNNING, RETRYING, SUCCEEDED, FAILED, TIMED_OUT, SKIPPED, CANCELLED"
    )
    attempt: int
    depends_on: list[str] = Field(default_factory=list)
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    output: str | None = None
    checks: list[CheckView] | None = Field(default=None, description="its output's checks, when it has any")
    items: MapItemsView | None = Field(default=None, description="a map task: its items done, failed and running")
    reason: str | None = Field(
        default=None, description="a task not started yet: the dependencies or the data it waits for, and since when"
    )
    callback_token: str | None = Field(default=None, description="for RUNNING callback tasks: report with it")


class TriggerBatchView(BaseModel):
    """The batch of events a batched trigger's run received."""

    number: int = Field(description="the trigger's batches are numbered 1, 2, ...")
    trigger: str = Field(description="the trigger's fingerprint (a changed trigger is a new one)")
    window: str
    max_events: int


class UpstreamRunView(BaseModel):
    """An upstream run an after trigger's run came after."""

    job: str
    run_id: str
    status: str | None = Field(default=None, description="the status of the finish that started the run")


class TriggerDetailView(BaseModel):
    """The event that started a run (trigger "event"), or for a batched trigger the batch."""

    kind: str = Field(
        description="event (an EventBridge pattern), s3 (an object created), after (upstream runs), or schedule (of "
        "a job with several schedules: which one)"
    )
    schedule: str | None = Field(default=None, description="the schedule that fired it (a job with several)")
    event_id: str | None = Field(default=None, description="EventBridge's id of the event (not for a batch)")
    source: str | None = None
    batch: TriggerBatchView | None = Field(default=None, description="batched triggers: the run's batch")
    upstreams: list[UpstreamRunView] | None = Field(default=None, description="after triggers: the upstream runs")
    detail_type: str | None = None
    bucket: str | None = None
    key: str | None = None
    size: int | None = None
    etag: str | None = None
    version: str | None = None


class ProgressView(BaseModel):
    at: str = Field(description="when it was reported")
    attempt: int = Field(description="the attempt that reported it (an earlier one's checkpoint is what resumes)")
    percent: float | None = None
    message: str | None = None
    checkpoint: JsonValue = Field(default=None, description="the checkpoint the run's next attempt receives")


class RunView(BaseModel):
    job: str
    run_id: str
    status: str
    attempt: int
    trigger: str = Field(description="what started the run: schedule, manual, backfill or event")
    trigger_detail: TriggerDetailView | None = Field(default=None, description="runs started by an event")
    trace_id: str = Field(description="the run's W3C trace id: what its targets received as traceparent")
    xray_trace_id: str = Field(description="the same trace as AWS X-Ray names it")
    scheduled_at: str
    fire_at: str
    started_at: str | None = None
    finished_at: str | None = None
    lateness_seconds: float | None = None
    next_attempt_at: str | None = None
    error: str | None = None
    output: str | None = None
    checks: list[CheckView] | None = Field(
        default=None, description="the output's checks (a DAG run: the checks its tasks failed, named task: check)"
    )
    reason: str | None = None
    waiting_for: list[str] | None = Field(default=None, description="WAITING runs: the wait_for conditions not met")
    wait_started_at: str | None = Field(default=None, description="runs that waited for data: when the wait began")
    correlation_id: str
    callback_token: str | None = Field(default=None, description="for RUNNING callback runs: report with it")
    progress: ProgressView | None = Field(default=None, description="what a long attempt last reported")
    anomaly: str | None = Field(
        default=None, description='far outside the job\'s learned baseline, e.g. "took 41 min, usual 6-9 min"'
    )
    tasks: list[TaskView] | None = Field(default=None, description="DAG runs: every task, in dependency order")
    logs: str = Field(default="", description="the run's log lines, from every component (GET this path)")


class LastRunView(BaseModel):
    run_id: str
    status: str
    scheduled_at: str


class DependencyView(BaseModel):
    job: str
    how: str = Field(description="the after trigger: 'all of 2, on succeeded', 'any of, on failed', ...")
    exists: bool
    last_run: LastRunView | None = Field(
        default=None, description="absent when the job has none, or it is another team's that does not share it"
    )


class DependenciesView(BaseModel):
    """The jobs a job runs after, and the jobs that run after it."""

    job: str
    upstreams: list[DependencyView]
    downstreams: list[DependencyView]


class RunEvents(BaseModel):
    """The events a run was started by, whole: an event larger than its payload's bound, or a batch's list."""

    job: str
    run_id: str
    events: list[dict[str, JsonValue]] = Field(
        description="one event for a run started by an event; a batch's entries, in time order, for a batch"
    )


class RunPage(BaseModel):
    runs: list[RunView]
    next_token: str | None = None


class BackfillView(BaseModel):
    backfill_id: str
    job: str
    start: str
    end: str
    total: int
    sent: int
    finished: dict[str, int]
    in_flight: int
    state: str
    status: list[str] = Field(default_factory=list, description="the statuses this range reruns")
    rate_per_minute: int | None = None
    priority: str | None = None
    rerun: int = Field(default=0, description="instants that had a run and were run again")


class SkippedInstant(BaseModel):
    utc: str | None = Field(description="none for a wall time that did not exist (a DST gap)")
    local: str
    reason: str | None = Field(default=None, description='why it does not fire: "holiday", "blackout ...", "dst gap"')


class PreviewEntry(BaseModel):
    utc: str
    local: str
    reason: str | None = None
    fire_at: str | None = Field(default=None, description="with jitter: when it is sent (utc is its identity)")
    moved_from: list[str] | None = Field(default=None, description="the wall times it was moved from (deferred)")
    schedule: str | None = Field(default=None, description="a job with several schedules: the one that fires it")
    skipped: list[SkippedInstant] | None = Field(
        default=None, description="the instants skipped since the previous fire, each with its reason"
    )


class ValidationResult(BaseModel):
    valid: bool
    errors: list[ErrorDetail] = Field(default_factory=list)
    next_fire_times: list[str] = Field(default_factory=list)
    runs_per_month: int | None = Field(default=None, description="its runs in the next 30 days")
    usd_per_month: float | None = Field(
        default=None, description="the scheduler's cost of those runs (the targets' own not foreseen)"
    )


class TeamLimitsView(BaseModel):
    team: str
    limits: dict[str, int] = Field(description="what the team is held to now: its overrides over the defaults")
    overrides: dict[str, int] = Field(description="the limits set for this team")
    defaults: dict[str, int] = Field(description="the platform's defaults (CDK context team_limits)")


class HistoryEntryView(BaseModel):
    at: str
    version: int = Field(description="the job's version after the change (for actions: the version it was at)")
    action: str = Field(
        description="create, replace, rollback, pause, resume, delete, trigger, cancel, rerun, backfill, reruns,"
        " backfill_cancel"
    )
    principal: str
    confirmed_by: str | None = Field(
        default=None, description="a console action: the caller CloudTrail recorded invoking it (minutes later)"
    )
    unconfirmed: bool = Field(
        default=False,
        description="a console action CloudTrail named nobody for within an hour: find the person in CloudTrail by"
        " the request id in principal",
    )
    reason: str | None = None
    spec: dict[str, Any] | None = Field(default=None, description="the spec a create, replace or rollback stored")
    details: dict[str, Any] | None = None


class HistoryPage(BaseModel):
    entries: list[HistoryEntryView]
    next_token: str | None = None


class LogLineView(BaseModel):
    at: str
    component: str = Field(description="the function that wrote it, e.g. jobsched-worker")
    level: str
    message: str
    fields: dict[str, Any]


class RunLogs(BaseModel):
    job: str
    run_id: str
    lines: list[LogLineView]
    query: str = Field(description="the Logs Insights query, to run it in the console")
