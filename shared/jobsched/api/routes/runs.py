"""Runs: list, read (with DAG tasks and callback tokens), cancel, rerun, and trigger one now."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import MAX_PAGE, Access
from jobsched.api.errors import ApiError
from jobsched.api.models import RerunRequest, RunPage, RunView, TriggerRequest
from jobsched.api.tokens import token_expiry
from jobsched.api.views import run_view, task_views
from jobsched.core.records import StoredJob
from jobsched.core.runs import RunStatus, job_key
from jobsched.core.spec import CallbackTarget
from jobsched.pipeline.reruns import TaskSelection, rerun_run
from jobsched.pipeline.triggers import payload_not_taken, trigger_run
from jobsched.watch.run_search import (
    MAX_TEAM_JOBS,
    TRIGGERS,
    Cursor,
    RunFilter,
    SearchRefused,
    search_filter,
    search_runs,
)

STATUS_HELP = "one status or several, comma-separated: " + ", ".join(RunStatus.__members__)
TRIGGER_HELP = "what started the run: " + ", ".join(TRIGGERS)
ERROR_HELP = "runs whose error contains this text (case as written)"
SINCE_HELP = "runs of instants from this one on: an instant (2027-01-04T09:00:00Z) or a span back from now (6h, 7d)"
UNTIL_HELP = "runs of instants up to this one: an instant or a span back from now"


def _payload_taken(stored: StoredJob, body: TriggerRequest | None) -> None:
    """A payload the job would not pass on is refused (422), never dropped."""
    refusal = payload_not_taken(stored.spec) if body is not None and body.payload is not None else None
    if refusal is not None:
        raise ApiError(422, "payload_not_taken", refusal, "payload")


def run_filter(
    status: str | None,
    trigger: str | None,
    min_attempts: int | None,
    error: str | None,
    since: str | None,
    until: str | None,
    now: datetime,
) -> RunFilter:
    try:
        return search_filter(status, trigger, min_attempts, error, since, until, now)
    except SearchRefused as refused:
        raise ApiError(422, refused.code, str(refused), refused.field) from None


def cursor(token: str | None) -> Cursor | None:
    try:
        return Cursor.parse(token) if token else None
    except SearchRefused as refused:
        raise ApiError(422, refused.code, str(refused), refused.field) from None


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.get(
        "/teams/<team>/jobs/<name>/runs",
        operation_id="listRuns",
        tags=["runs"],
        summary="A job's runs, newest first, searched by time, status, trigger, attempts and error text",
    )
    def list_runs(
        team: str,
        name: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=300)] = None,
        status: Annotated[str | None, Query(max_length=200, description=STATUS_HELP)] = None,
        trigger: Annotated[str | None, Query(max_length=20, description=TRIGGER_HELP)] = None,
        min_attempts: Annotated[int | None, Query(ge=1, le=1000)] = None,
        error: Annotated[str | None, Query(min_length=1, max_length=200, description=ERROR_HELP)] = None,
        since: Annotated[str | None, Query(max_length=40, description=SINCE_HELP)] = None,
        until: Annotated[str | None, Query(max_length=40, description=UNTIL_HELP)] = None,
    ) -> RunPage:
        member(team)
        where = run_filter(status, trigger, min_attempts, error, since, until, services().clock())
        page = search_runs(services().runs, [job_key(team, name)], where, limit=limit, after=cursor(next_token))
        return RunPage(runs=[run_view(r, None) for r in page.runs], next_token=page.cursor and page.cursor.text())

    @router.get(
        "/teams/<team>/runs",
        operation_id="searchTeamRuns",
        tags=["runs"],
        summary="Every run of a team's jobs, newest first, searched as a job's runs are",
    )
    def search_team_runs(
        team: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=300)] = None,
        status: Annotated[str | None, Query(max_length=200, description=STATUS_HELP)] = None,
        trigger: Annotated[str | None, Query(max_length=20, description=TRIGGER_HELP)] = None,
        min_attempts: Annotated[int | None, Query(ge=1, le=1000)] = None,
        error: Annotated[str | None, Query(min_length=1, max_length=200, description=ERROR_HELP)] = None,
        since: Annotated[str | None, Query(max_length=40, description=SINCE_HELP)] = None,
        until: Annotated[str | None, Query(max_length=40, description=UNTIL_HELP)] = None,
    ) -> RunPage:
        member(team)
        where = run_filter(status, trigger, min_attempts, error, since, until, services().clock())
        jobs, _ = services().jobs.team_page(team, limit=MAX_TEAM_JOBS, after_name=None)
        page = search_runs(services().runs, jobs, where, limit=limit, after=cursor(next_token))
        return RunPage(runs=[run_view(r, None) for r in page.runs], next_token=page.cursor and page.cursor.text())

    @router.get(
        "/teams/<team>/jobs/<name>/runs/<run_id>",
        operation_id="getRun",
        tags=["runs"],
        summary="One run: attempts, timings, DAG tasks",
    )
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
        view = run_view(run, token)
        if run.graph is not None:
            view.tasks = task_views(run, stored.spec, services().runs, services().tokens, now)
        return view

    @router.post(
        "/teams/<team>/jobs/<name>/runs/<run_id>/cancel",
        operation_id="cancelRun",
        tags=["runs"],
        summary="Cancel a run that has not finished",
    )
    def cancel(team: str, name: str, run_id: str) -> RunView:
        caller = member(team)
        stored = existing(team, name)
        cancelled = services().worker.cancel(stored.key, run_id)
        services().jobs.record_action(
            stored.key,
            version=stored.version,
            now=services().clock(),
            principal=caller.arn,
            action="cancel",
            details={"run_id": run_id, "attempt": cancelled.attempt},
        )
        return run_view(cancelled, None)

    @router.post(
        "/teams/<team>/jobs/<name>/runs/<run_id>/rerun",
        operation_id="rerunRun",
        tags=["runs"],
        summary="Run a finished run again with its own instant (same run id, a new attempt)",
        status_code=202,
    )
    def rerun(
        team: str, name: str, run_id: str, body: Annotated[RerunRequest | None, Body()] = None
    ) -> Response[RunView]:
        caller = member(team)
        existing(team, name)
        s = services()
        run = rerun_run(
            s.jobs,
            s.runs,
            s.queues,
            job_key(team, name),
            run_id,
            now=s.clock(),
            principal=caller.arn,
            force=bool(body and body.force),
            downstream=bool(body and body.downstream),
            selection=TaskSelection(
                from_failure=bool(body and body.from_failure),
                tasks=tuple(body.tasks or ()) if body else (),
                downstream=bool(body and body.downstream and body.tasks),
            ),
        )
        return Response(202, content_types.APPLICATION_JSON, run_view(run, None))

    @router.post(
        "/teams/<team>/jobs/<name>/trigger",
        operation_id="triggerJob",
        tags=["runs"],
        summary="Run a job now (Idempotency-Key: one run per key)",
        status_code=202,
    )
    def trigger(
        team: str,
        name: str,
        body: Annotated[TriggerRequest | None, Body()] = None,
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
    ) -> Response[RunView]:
        caller = member(team)
        _payload_taken(existing(team, name), body)
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
        return Response(202, content_types.APPLICATION_JSON, run_view(run, None))

    return router
