"""The team API: Powertools REST resolver with validation, one router per resource, one error mapping.

Every error is ``{"error": {"code", "message", "field", "errors": [...]}}`` with a 4xx status for
anything a client sends. A team's jobs and runs are visible only to its members and platform admins:
others get 403, the same answer for existing and missing jobs (team names are not secret inside one
organisation, job names are hidden by answering the same either way).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.queues import WorkQueues
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.adapters.aws.workflows import WorkflowsNotConfigured
from jobsched.api.identity import Forbidden, Membership, MembershipCache, Principal, Unauthenticated, caller_arn
from jobsched.api.models import (
    BackfillRequest,
    BackfillView,
    CompleteRequest,
    ErrorDetail,
    IncidentView,
    JobBody,
    JobHealthView,
    JobPage,
    JobView,
    PauseRequest,
    PreviewEntry,
    RunPage,
    RunView,
    TaskView,
    TeamHealthPage,
    TriggerRequest,
    ValidationResult,
)
from jobsched.api.tokens import TOKEN_HEADER, CallbackClaim, CallbackTokens, InvalidToken, token_expiry
from jobsched.core.durations import parse_duration
from jobsched.core.errors import FieldError, SpecError, field_errors_from
from jobsched.core.records import JobExists, JobNotFound, Run, StaleAttempt, StoredJob, VersionConflict
from jobsched.core.spec import CallbackTarget, JobSpec
from jobsched.dag.definition import graph_from_values
from jobsched.pipeline.runs import RunStatus, instant_text, job_key, moment_text
from jobsched.pipeline.triggers import (
    BackfillLimit,
    BackfillProgress,
    BackfillTooLarge,
    NoSchedule,
    get_backfill,
    start_backfill,
    trigger_run,
)
from jobsched.pipeline.worker import Worker
from jobsched.registry.jobfile import validate_document
from jobsched.registry.jobs import DagDeployer, pause_job, put_job, resume_job
from jobsched.registry.jobs import delete_job as remove_job
from jobsched.schedule.engine import ScheduleTooExpensive, compile_schedule
from jobsched.tenancy.admission import admission_errors, priority_errors, schedule_cost_errors
from jobsched.tenancy.egress import AddressPolicy
from jobsched.tenancy.ownership import OwnershipGuard
from jobsched.tenancy.quotas import QuotaExceeded
from jobsched.watch.health import MAX_RUNS_READ, MAX_WINDOW, STRIP_LENGTH, JobHealth, job_health, worst_first

MAX_BODY_BYTES = 256 * 1024
MAX_PAGE = 100
TEAM_RUNS_READ = 100  # per job in the team view: a page of 100 jobs reads at most 10,000 runs


@dataclass
class ApiServices:
    jobs: JobsStore
    runs: RunsStore
    queues: WorkQueues
    worker: Worker
    tokens: CallbackTokens
    membership: Membership | MembershipCache
    clock: Callable[[], datetime]
    dags: DagDeployer | None = None  # None: this deployment refuses DAG jobs
    guard: OwnershipGuard | None = None  # refuses jobs naming another team's (or jobsched's) resources
    egress: AddressPolicy | None = None  # refuses URLs whose literal address this stage may not reach


class Throttled(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many requests for this team; retry in {retry_after} s")
        self.retry_after = retry_after


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, field: str | None = None, errors: list[FieldError] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.errors = status, code, message, field, errors or []


def error_response(
    status: int, code: str, message: str, field: str | None = None, errors: list[FieldError] | None = None
) -> Response[str]:
    body = {
        "error": {
            "code": code,
            "message": message,
            "field": field,
            "errors": [ErrorDetail(field=e.path, code=e.code, message=e.message).model_dump() for e in errors or []],
        }
    }
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body))


def build_app(services: Callable[[], ApiServices]) -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(enable_validation=True)
    jobs_router = APIGatewayRouter()
    runs_router = APIGatewayRouter()
    callbacks_router = APIGatewayRouter()

    def principal() -> Principal:
        """The caller, counted toward its own rate on every authenticated route (team routes count per
        team too), so /validate and the like cannot be used to burn the API's capacity."""
        event = app.current_event
        s = services()
        caller = s.membership.principal(caller_arn(event.raw_event))
        now = s.clock()
        limit = s.jobs.team_defaults.requests_per_minute  # a principal may act for several teams
        if not s.jobs.count_principal_request(caller.arn, now=now, limit=limit):
            raise Throttled(60 - now.second)
        return caller

    def member(team: str) -> Principal:
        caller = principal()
        caller.require(team)
        s = services()
        now = s.clock()
        if not s.jobs.count_request(team, now=now, limit=s.jobs.team_limits(team).requests_per_minute):
            raise Throttled(60 - now.second)
        return caller

    def existing(team: str, name: str) -> StoredJob:
        stored = services().jobs.get(job_key(team, name))
        if stored is None:
            raise ApiError(404, "job_not_found", f"no job {team}/{name}", "name")
        return stored

    # ----------------------------------------------------------------------- middleware

    @app.exception_handler(RequestValidationError)
    def _invalid_request(error: RequestValidationError) -> Response[str]:
        found = _request_errors(error.errors())
        first = found[0] if found else FieldError("", "invalid_request", "invalid request")
        return error_response(422, "invalid_request", str(first), first.path or None, found)

    @app.exception_handler(ApiError)
    def _api_error(error: ApiError) -> Response[str]:
        return error_response(error.status, error.code, error.message, error.field, error.errors)

    @app.exception_handler(Throttled)
    def _throttled(error: Throttled) -> Response[str]:
        response = error_response(429, "throttled", str(error))
        response.headers["Retry-After"] = str(error.retry_after)
        return response

    @app.exception_handler(SpecError)
    def _spec_error(error: SpecError) -> Response[str]:
        first = error.errors[0]
        return error_response(422, "invalid_job", str(first), first.path or None, error.errors)

    @app.exception_handler(Unauthenticated)
    def _unauthenticated(error: Unauthenticated) -> Response[str]:
        return error_response(401, "unauthenticated", str(error))

    @app.exception_handler(Forbidden)
    def _forbidden(error: Forbidden) -> Response[str]:
        return error_response(403, "forbidden", str(error), "team")

    @app.exception_handler(JobNotFound)
    def _not_found(error: JobNotFound) -> Response[str]:
        return error_response(404, "not_found", f"no such job or backfill: {error}")

    @app.exception_handler(VersionConflict)
    def _version_conflict(error: VersionConflict) -> Response[str]:
        return error_response(412, "version_mismatch", str(error), "If-Match")

    @app.exception_handler(JobExists)
    def _exists(error: JobExists) -> Response[str]:
        return error_response(409, "job_exists", f"{error} was created concurrently; retry")

    @app.exception_handler(StaleAttempt)
    def _stale(error: StaleAttempt) -> Response[str]:
        return error_response(409, "attempt_superseded", str(error))

    @app.exception_handler(InvalidToken)
    def _token(error: InvalidToken) -> Response[str]:
        return error_response(404, "unknown_run_token", str(error), TOKEN_HEADER)

    @app.exception_handler(WorkflowsNotConfigured)
    def _unsupported(error: WorkflowsNotConfigured) -> Response[str]:
        return error_response(422, "unsupported", str(error), "dag")

    @app.exception_handler(ScheduleTooExpensive)
    def _too_expensive(error: ScheduleTooExpensive) -> Response[str]:
        return error_response(422, "schedule_too_expensive", str(error), "schedule")

    @app.exception_handler(BackfillLimit)
    def _backfill_limit(error: BackfillLimit) -> Response[str]:
        return error_response(429, "backfill_limit", str(error))

    @app.exception_handler(QuotaExceeded)
    def _quota(error: QuotaExceeded) -> Response[str]:
        return error_response(429, "quota_exceeded", str(error), error.limit)

    @app.exception_handler(BackfillTooLarge)
    def _too_large(error: BackfillTooLarge) -> Response[str]:
        return error_response(422, "backfill_too_large", str(error), "to")

    @app.exception_handler(NoSchedule)
    def _no_schedule(error: NoSchedule) -> Response[str]:
        return error_response(422, "no_schedule", str(error), "schedule")

    @app.not_found
    def _no_route(_: Exception) -> Response[str]:
        return error_response(404, "no_route", f"no route {app.current_event.http_method} {app.current_event.path}")

    # ---------------------------------------------------------------------------- misc

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/openapi.json")
    def openapi() -> Response[str]:
        return Response(200, content_types.APPLICATION_JSON, app.get_openapi_json_schema(title="jobsched", version="1"))

    @app.post("/validate")
    def validate(body: Annotated[dict[str, Any], Body()]) -> ValidationResult:
        principal()
        try:
            spec = validate_document(body)
        except SpecError as error:
            return ValidationResult(valid=False, errors=[_detail(e) for e in error.errors])
        too_expensive = schedule_cost_errors(spec, services().clock())
        if too_expensive:
            return ValidationResult(valid=False, errors=[_detail(e) for e in too_expensive])
        return ValidationResult(valid=True, next_fire_times=_next_fires(spec, services().clock(), 5))

    # ---------------------------------------------------------------------------- jobs

    @jobs_router.put("/teams/<team>/jobs/<name>")
    def put(
        team: str,
        name: str,
        body: Annotated[JobBody, Body()],
        if_match: Annotated[str | None, Header(alias="If-Match")] = None,
    ) -> Response[str]:
        caller = member(team)
        for field, value, in_path in (("team", body.team, team), ("name", body.name, name)):
            if value is not None and value != in_path:
                raise ApiError(
                    422, "path_mismatch", f"{field} '{value}' in the body differs from the path '{in_path}'", field
                )
        document = body.model_dump(mode="json", exclude_none=True) | {"team": team, "name": name}
        spec = validate_document(document)
        refused = (
            priority_errors(spec, services().membership.priorities_for(team))
            or schedule_cost_errors(spec, services().clock())
            or admission_errors(spec, services().guard, services().egress)
        )
        if refused:
            raise SpecError(refused)
        expected = _version(if_match)
        stored, created = put_job(
            services().jobs,
            spec,
            now=services().clock(),
            principal=caller.arn,
            expected_version=expected,
            dags=services().dags,
        )
        view = _job_view(stored, services().clock())
        return Response(
            201 if created else 200,
            content_types.APPLICATION_JSON,
            view.model_dump_json(),
            headers={"ETag": str(stored.version)},
        )

    @jobs_router.get("/teams/<team>/jobs")
    def list_jobs(
        team: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=200)] = None,
        state: Annotated[str | None, Query(pattern="^(ACTIVE|PAUSED)$")] = None,
        tag: Annotated[str | None, Query(max_length=400, description="key=value")] = None,
    ) -> JobPage:
        member(team)
        keys, last = services().jobs.team_page(team, limit=limit, after_name=next_token)
        found = services().jobs.get_many(keys)
        now = services().clock()
        tag_key, _, tag_value = (tag or "").partition("=")
        jobs = [
            _job_view(found[key], now)
            for key in keys
            if key in found
            and (state is None or found[key].state == state)
            and (not tag or found[key].spec.tags.get(tag_key) == tag_value)
        ]
        return JobPage(jobs=jobs, next_token=last)

    @jobs_router.get("/teams/<team>/jobs/<name>")
    def get_job(team: str, name: str) -> Response[str]:
        member(team)
        stored = existing(team, name)
        view = _job_view(stored, services().clock())
        view.open_incidents = [
            IncidentView(
                incident_class=incident.values["incident_class"],
                opened_at=incident.values["opened_at"],
                first_kind=incident.values["first_kind"],
                events=int(incident.values.get("failures", 0)),
                paged=list(incident.values.get("paged", [])),
                auto_paused=bool(incident.values.get("auto_paused")),
                last_error=incident.values.get("last", {}).get("error"),
            )
            for incident in services().jobs.incidents(stored.key)
            if not incident.resolved
        ]
        return Response(
            200, content_types.APPLICATION_JSON, view.model_dump_json(), headers={"ETag": str(stored.version)}
        )

    @jobs_router.get("/teams/<team>/jobs/<name>/health")
    def get_job_health(
        team: str,
        name: str,
        window: Annotated[str, Query(max_length=16, description="e.g. 7d, 24h (at most 90d)")] = "7d",
        runs: Annotated[int, Query(ge=1, le=100, description="runs in the strip")] = STRIP_LENGTH,
    ) -> JobHealthView:
        member(team)
        stored = existing(team, name)
        return _health_view(_health(stored, _window(window), runs, MAX_RUNS_READ))

    @jobs_router.get("/teams/<team>/health")
    def get_team_health(
        team: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=200)] = None,
        window: Annotated[str, Query(max_length=16, description="e.g. 7d, 24h (at most 90d)")] = "7d",
    ) -> TeamHealthPage:
        member(team)
        span = _window(window)
        keys, last = services().jobs.team_page(team, limit=limit, after_name=next_token)
        found = services().jobs.get_many(keys)
        healths = [_health(found[key], span, STRIP_LENGTH, TEAM_RUNS_READ) for key in keys if key in found]
        return TeamHealthPage(jobs=[_health_view(h) for h in worst_first(healths)], next_token=last)

    def _window(text: str) -> timedelta:
        try:
            span = parse_duration(text)
        except (ValueError, TypeError) as error:
            raise ApiError(422, "invalid_window", f"window: {error}", "window") from None
        if not timedelta(hours=1) <= span <= MAX_WINDOW:
            raise ApiError(422, "invalid_window", "window must be between 1h and 90d", "window")
        return span

    def _health(stored: StoredJob, span: timedelta, strip: int, read: int) -> JobHealth:
        now = services().clock()
        recent = services().runs.page(stored.key, limit=read, newest_first=True)[0]
        upcoming = _upcoming(stored, now, 1)
        return job_health(
            stored.key,
            recent,
            now=now,
            window=span,
            state=stored.state,
            paused_reason=stored.paused_reason,
            next_fire=upcoming[0] if upcoming else None,
            open_incidents=services().jobs.open_incidents(stored.key),
            strip_length=strip,
        )

    @jobs_router.delete("/teams/<team>/jobs/<name>")
    def delete_job(
        team: str, name: str, if_match: Annotated[str | None, Header(alias="If-Match")] = None
    ) -> Response[str]:
        caller = member(team)
        stored = existing(team, name)
        expected = _version(if_match)
        if expected is not None and expected != stored.version:
            raise VersionConflict(f"{stored.key} is at version {stored.version}, not {expected}")
        remove_job(services().jobs, stored, now=services().clock(), principal=caller.arn, dags=services().dags)
        return Response(204, content_types.APPLICATION_JSON, "")

    @jobs_router.post("/teams/<team>/jobs/<name>/pause")
    def pause(team: str, name: str, body: Annotated[PauseRequest, Body()]) -> JobView:
        caller = member(team)
        existing(team, name)
        stored = pause_job(
            services().jobs, job_key(team, name), now=services().clock(), principal=caller.arn, reason=body.reason
        )
        return _job_view(stored, services().clock())

    @jobs_router.post("/teams/<team>/jobs/<name>/resume")
    def resume(team: str, name: str) -> JobView:
        caller = member(team)
        existing(team, name)
        stored = resume_job(services().jobs, job_key(team, name), now=services().clock(), principal=caller.arn)
        return _job_view(stored, services().clock())

    @jobs_router.post("/teams/<team>/jobs/<name>/trigger")
    def trigger(
        team: str,
        name: str,
        body: Annotated[TriggerRequest | None, Body()] = None,
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
    ) -> Response[str]:
        caller = member(team)
        existing(team, name)
        s = services()
        run = trigger_run(
            s.jobs,
            s.runs,
            s.queues,
            job_key(team, name),
            now=s.clock(),
            principal=caller.arn,
            payload=body.payload if body else None,
            idempotency_key=idempotency_key,
        )
        return Response(202, content_types.APPLICATION_JSON, _run_view(run, None).model_dump_json())

    @jobs_router.post("/teams/<team>/jobs/<name>/backfill")
    def backfill(team: str, name: str, body: Annotated[BackfillRequest, Body()]) -> Response[str]:
        caller = member(team)
        existing(team, name)
        if body.end <= body.start:
            raise ApiError(422, "invalid_range", "'to' must be after 'from'", "to")
        if body.end > services().clock():
            # The future belongs to the schedule: a backfill that ran ahead would claim the run ids of
            # instants the dispatcher has not fired yet.
            raise ApiError(
                422, "backfill_in_future", "'to' must not be later than now; backfills re-run the past", "to"
            )
        progress = start_backfill(
            services().jobs,
            job_key(team, name),
            start=body.start,
            end=body.end,
            max_in_flight=body.max_in_flight,
            now=services().clock(),
            principal=caller.arn,
        )
        return Response(202, content_types.APPLICATION_JSON, _backfill_view(progress).model_dump_json())

    @jobs_router.get("/teams/<team>/jobs/<name>/backfills/<backfill_id>")
    def backfill_progress(team: str, name: str, backfill_id: str) -> BackfillView:
        member(team)
        return _backfill_view(get_backfill(services().jobs, job_key(team, name), backfill_id))

    @jobs_router.get("/teams/<team>/jobs/<name>/preview")
    def preview(
        team: str,
        name: str,
        count: Annotated[int, Query(ge=1, le=100)] = 10,
        after: Annotated[datetime | None, Query()] = None,
    ) -> list[PreviewEntry]:
        member(team)
        stored = existing(team, name)
        if stored.spec.schedule is None:
            return []
        start = after if after and after.tzinfo else services().clock()
        compiled = compile_schedule(stored.spec.schedule, hash_key=stored.key, anchor=stored.created_at)
        return [
            PreviewEntry(utc=instant_text(o.at), local=o.at.astimezone(compiled.zone).isoformat(), reason=o.reason)
            for o in compiled.next_fires(start, count)
        ]

    # ---------------------------------------------------------------------------- runs

    @runs_router.get("/teams/<team>/jobs/<name>/runs")
    def list_runs(
        team: str,
        name: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=200)] = None,
        status: Annotated[str | None, Query(pattern="^[A-Z_]+$")] = None,
    ) -> RunPage:
        member(team)
        if status is not None and status not in RunStatus.__members__:
            raise ApiError(
                422, "invalid_status", f"unknown status {status}; allowed: {', '.join(RunStatus.__members__)}", "status"
            )
        runs, last = services().runs.page(job_key(team, name), limit=limit, after_run_id=next_token)
        shown = [r for r in runs if status is None or r.status.value == status]
        return RunPage(runs=[_run_view(r, None) for r in shown], next_token=last)

    @runs_router.get("/teams/<team>/jobs/<name>/runs/<run_id>")
    def get_run(team: str, name: str, run_id: str) -> RunView:
        member(team)
        stored = existing(team, name)
        run = services().runs.get(stored.key, run_id)
        if run is None:
            raise ApiError(404, "run_not_found", f"no run {run_id} of {stored.key}", "run_id")
        token = None
        now = services().clock()
        target = stored.spec.target
        if run.status is RunStatus.RUNNING and isinstance(target, CallbackTarget):
            expires_at = token_expiry(run.started_at, target.timeout, now)
            token = services().tokens.issue(run.job, run.run_id, run.attempt, expires_at=expires_at)
        view = _run_view(run, token)
        if run.graph is not None:
            view.tasks = _task_views(run, stored.spec, services().runs, services().tokens, now)
        return view

    @runs_router.post("/teams/<team>/jobs/<name>/runs/<run_id>/cancel")
    def cancel(team: str, name: str, run_id: str) -> RunView:
        member(team)
        stored = existing(team, name)
        return _run_view(services().worker.cancel(stored.key, run_id), None)

    # ------------------------------------------------------------------ callback results

    def claim_of(token: str | None) -> CallbackClaim:
        if not token:
            raise ApiError(401, "missing_run_token", f"send the run's callback token in the {TOKEN_HEADER} header")
        return services().tokens.verify(token, now=services().clock())

    @callbacks_router.post("/callbacks/heartbeat")
    def heartbeat(token: Annotated[str | None, Header(alias=TOKEN_HEADER, max_length=2048)] = None) -> RunView:
        claim = claim_of(token)
        if claim.task is not None:
            worker = services().worker
            return _run_view(worker.dags.heartbeat_external(claim.job, claim.run_id, claim.task, claim.attempt), None)
        return _run_view(services().worker.heartbeat_external(claim.job, claim.run_id, claim.attempt), None)

    @callbacks_router.post("/callbacks/complete")
    def complete(
        body: Annotated[CompleteRequest, Body()],
        token: Annotated[str | None, Header(alias=TOKEN_HEADER, max_length=2048)] = None,
    ) -> RunView:
        claim = claim_of(token)
        if claim.task is not None:
            done = services().worker.dags.complete_external(
                claim.job,
                claim.run_id,
                claim.task,
                claim.attempt,
                succeeded=body.status == "succeeded",
                output=body.output,
                error=body.error,
            )
            return _run_view(done, None)
        run = services().worker.complete_external(
            claim.job,
            claim.run_id,
            claim.attempt,
            succeeded=body.status == "succeeded",
            output=body.output,
            error=body.error,
        )
        return _run_view(run, None)

    app.include_router(jobs_router)
    app.include_router(runs_router)
    app.include_router(callbacks_router)
    return app


def build_handler(services: Callable[[], ApiServices]) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The API entry point: limits before routing (Powertools validates bodies before any middleware)."""
    app = build_app(services)

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        body = event.get("body") or ""
        if len(body.encode()) > MAX_BODY_BYTES:
            message = f"request bodies are limited to {MAX_BODY_BYTES} bytes"
            payload: dict[str, Any] = {
                "error": {"code": "body_too_large", "message": message, "field": None, "errors": []}
            }
            return {"statusCode": 413, "headers": {"Content-Type": "application/json"}, "body": json.dumps(payload)}
        return app.resolve(event, context)

    handle.app = app  # type: ignore[attr-defined]
    return handle


# ------------------------------------------------------------------------------- helpers


def _version(if_match: str | None) -> int | None:
    if if_match is None:
        return None
    text = if_match.strip().strip('"').removeprefix("W/").strip('"')
    if not text.isdigit():
        raise ApiError(422, "invalid_if_match", "If-Match must be a job version number (the ETag)", "If-Match")
    return int(text)


def _next_fires(spec: JobSpec, now: datetime, count: int) -> list[str]:
    if spec.schedule is None:
        return []
    compiled = compile_schedule(spec.schedule, hash_key=spec.key, anchor=now)
    return [instant_text(o.at) for o in compiled.next_fires(now, count)]


def _upcoming(stored: StoredJob, now: datetime, count: int) -> list[str]:
    """A stored job's next fire times (none while paused)."""
    if stored.state != "ACTIVE" or stored.spec.schedule is None:
        return []
    compiled = compile_schedule(stored.spec.schedule, hash_key=stored.key, anchor=stored.created_at)
    return [instant_text(o.at) for o in compiled.next_fires(now, count)]


def _job_view(stored: StoredJob, now: datetime) -> JobView:
    upcoming = _upcoming(stored, now, 5)
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
        next_fire_times=upcoming,
        spec=stored.spec.model_dump(mode="json", exclude_none=True),
    )


def _run_view(run: Run, token: str | None) -> RunView:
    lateness = run.lateness_ms / 1000 if run.lateness_ms is not None else None
    return RunView(
        job=run.job,
        run_id=run.run_id,
        status=run.status.value,
        attempt=run.attempt,
        trigger=run.trigger,
        scheduled_at=instant_text(run.scheduled_at),
        fire_at=instant_text(run.fire_at),
        started_at=moment_text(run.started_at) if run.started_at else None,
        finished_at=moment_text(run.finished_at) if run.finished_at else None,
        lateness_seconds=lateness,
        next_attempt_at=instant_text(run.next_attempt_at) if run.next_attempt_at else None,
        error=run.error,
        output=run.output,
        reason=run.reason,
        correlation_id=run.correlation_id,
        callback_token=token,
    )


def _task_views(run: Run, spec: JobSpec, runs: RunsStore, tokens: CallbackTokens, now: datetime) -> list[TaskView]:
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


def _backfill_view(progress: BackfillProgress) -> BackfillView:
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
    )


def _detail(error: FieldError) -> ErrorDetail:
    return ErrorDetail(field=error.path, code=error.code, message=error.message)


def _request_errors(errors: Any) -> list[FieldError]:
    """Powertools' request validation errors in our form: the location prefix dropped, messages explained."""
    stripped = []
    for detail in errors:
        location = tuple(detail.get("loc", ()))
        if location and location[0] in ("body", "query", "path", "header"):
            location = location[1:]
        stripped.append({**detail, "loc": location})
    return field_errors_from(stripped, JobBody)


def _health_view(health: JobHealth) -> JobHealthView:
    return JobHealthView.model_validate(asdict(health))
