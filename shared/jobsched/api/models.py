"""API request and response bodies. Job bodies are the job specification itself (spec.JobSpec)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, WithJsonSchema, field_validator
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from jobsched.core.bounds import WHOLE_NUMBER, Instant
from jobsched.core.run_records import MAX_CHECKPOINT_BYTES, MAX_PROGRESS_MESSAGE, ProgressReport
from jobsched.core.spec import JobSpec, Name

_OBJECT: JsonDict = {"type": "object"}


class JobBody(JobSpec):
    """A job spec as a request body: team and name come from the path (if given here, they must match)."""

    # What the spec's validator requires, said in the schema: exactly one of target and dag is an object.
    # As if/then/else, not a model-level anyOf: client generators read an anyOf as alternative models.
    model_config = ConfigDict(
        **JobSpec.model_config,
        json_schema_extra={
            "if": {"required": ["target"], "properties": {"target": _OBJECT}},
            "then": {"properties": {"dag": {"type": "null"}}},
            "else": {"required": ["dag"], "properties": {"dag": _OBJECT}},
        },
    )

    name: Name | None = None  # type: ignore[assignment]
    team: Name | None = None  # type: ignore[assignment]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PauseRequest(_Request):
    reason: str = Field(min_length=1, max_length=500)
    cancel_running: bool = Field(
        default=False, description="also cancel the runs now running (their containers and executions are stopped)"
    )


class TriggerRequest(_Request):
    payload: JsonValue = None


RerunStatus = Literal["FAILED", "TIMED_OUT", "MISSED", "SKIPPED", "CANCELLED", "SUCCEEDED"]


class BackfillRequest(_Request):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: Instant = Field(alias="from")
    end: Instant = Field(alias="to")
    max_in_flight: int = Field(default=5, ge=1, le=100)
    rate_per_minute: int | None = Field(default=None, ge=1, le=6000, description="instants started per minute")
    priority: Literal["high", "normal", "low"] | None = Field(
        default=None, description="the class its runs go to (default: the job's); one the team may use"
    )
    downstream: bool = Field(
        default=False,
        description="instants run again carry the jobs after this one (their runs of the instant run again too)",
    )
    status: list[RerunStatus] = Field(
        default_factory=list,
        max_length=6,
        description="run again the instants whose run ended in one of these; empty: only those that never ran"
        " (MISSED, SKIPPED) and those with no run",
    )


class RerunsRequest(BackfillRequest):
    status: list[RerunStatus] = Field(min_length=1, max_length=6, description="which ended runs to run again")


class RerunRequest(_Request):
    force: bool = Field(default=False, description="also a run that SUCCEEDED")
    downstream: bool = Field(
        default=False,
        description="when the rerun finishes, rerun the runs of the same instant of the jobs after it; with "
        "tasks: also every task that depends on them",
    )
    from_failure: bool = Field(
        default=False,
        description="DAG runs: keep the tasks that succeeded (and their outputs); run the others and what depends "
        "on them",
    )
    tasks: list[Annotated[str, Field(max_length=63)]] | None = Field(
        default=None, max_length=100, description="DAG runs: run these tasks again (with downstream: and theirs)"
    )


class DecisionRequest(_Request):
    comment: str = Field(default="", max_length=1000, description="why: kept with the decision and in the history")


MAX_RESULT_TEXT = 10_000


class CompleteRequest(_Request):
    """What an external worker reports. Runs' statuses are upper case everywhere, so either case is taken; the output
    may be text or JSON (checks read it as JSON either way)."""

    status: Annotated[
        Literal["succeeded", "failed"],
        # A pattern, not an enum: generated clients make one enum member per value, and these differ only in case.
        WithJsonSchema({"type": "string", "pattern": "^(succeeded|failed|SUCCEEDED|FAILED)$"}),
    ]
    output: Annotated[
        str | None,
        WithJsonSchema({"description": f"text, or any JSON value (kept as its text, at most {MAX_RESULT_TEXT})"}),
    ] = Field(default=None, max_length=MAX_RESULT_TEXT)
    error: str | None = Field(default=None, max_length=MAX_RESULT_TEXT)

    @field_validator("status", mode="before")
    @classmethod
    def _either_case(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("output", mode="before")
    @classmethod
    def _json_as_text(cls, value: Any) -> Any:
        """A JSON value is kept as its compact text, within the same bound as text."""
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"))


class HeartbeatRequest(_Request):
    """What a long attempt reports with its heartbeat: all optional (an empty body only says it is alive)."""

    progress: float | None = Field(default=None, ge=0, le=100, description="percent done")
    message: str | None = Field(default=None, max_length=MAX_PROGRESS_MESSAGE, description="what it is doing")
    checkpoint: JsonValue = Field(
        default=None,
        description=f"where the run's next attempt resumes (JSON, at most {MAX_CHECKPOINT_BYTES} bytes): a retry "
        "receives it as JOBSCHED_CHECKPOINT",
    )

    @field_validator("checkpoint")
    @classmethod
    def _small(cls, value: JsonValue) -> JsonValue:
        if value is not None and len(checkpoint_text(value).encode()) > MAX_CHECKPOINT_BYTES:
            raise PydanticCustomError(
                "checkpoint_too_large",
                "the checkpoint is over {limit} bytes as JSON: keep a key or an offset, and the data in your own store",
                {"limit": MAX_CHECKPOINT_BYTES},
            )
        return value

    def report(self) -> ProgressReport:
        checkpoint = checkpoint_text(self.checkpoint) if self.checkpoint is not None else None
        return ProgressReport(percent=self.progress, message=self.message, checkpoint=checkpoint)


def checkpoint_text(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


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


MAX_TEAM_LIMIT = 1_000_000  # a typo like 10**9 is refused rather than stored


# On the number itself, not the optional field: the schema's integer then carries the bounds.
TeamLimit = Annotated[int, Field(ge=1, le=MAX_TEAM_LIMIT), WHOLE_NUMBER]


class TeamLimitsRequest(_Request):
    """Limits to set for one team; a limit given as null goes back to the platform's default; one not
    given is left as it is."""

    # Whole numbers only: true is not 1 and "5" is not 5 here.
    max_running: TeamLimit | None = None
    max_jobs: TeamLimit | None = None
    max_backfills: TeamLimit | None = None
    requests_per_minute: TeamLimit | None = None


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


class RollbackRequest(_Request):
    to_version: int = Field(ge=1, description="the version whose spec is applied again, as a new version")


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
