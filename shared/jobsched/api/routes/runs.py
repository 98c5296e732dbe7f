"""Runs: list, read (with DAG tasks and callback tokens), cancel, rerun, and trigger one now."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import MAX_PAGE, Access
from jobsched.api.errors import ApiError
from jobsched.api.models import RunPage, RunView
from jobsched.api.requests import RerunRequest, TriggerRequest
from jobsched.api.tokens import token_expiry
from jobsched.api.views import run_view, task_views
from jobsched.core.records import StoredJob
from jobsched.core.runs import RunStatus, job_key
from jobsched.core.spec import CallbackTarget
from jobsched.pipeline.ends import AttemptRef
from jobsched.pipeline.manual_runs import payload_not_taken, trigger_run
from jobsched.pipeline.reruns import TaskSelection, rerun_run
from jobsched.pipeline.run_ends import CANCELLED_BY_REQUEST
from jobsched.watch.run_search import (
    MAX_TEAM_JOBS,
    TRIGGERS,
    Cursor,
    RunQueries,
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


Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
PageToken = Annotated[str | None, Query(max_length=300)]
Statuses = Annotated[str | None, Query(max_length=200, description=STATUS_HELP)]
TriggerKind = Annotated[str | None, Query(max_length=20, description=TRIGGER_HELP)]
MinAttempts = Annotated[int | None, Query(ge=1, le=1000)]
ErrorText = Annotated[str | None, Query(min_length=1, max_length=200, description=ERROR_HELP)]
Since = Annotated[str | None, Query(max_length=40, description=SINCE_HELP)]
Until = Annotated[str | None, Query(max_length=40, description=UNTIL_HELP)]


def searched(runs: RunQueries, jobs: list[str], limit: int, next_token: str | None, filters: dict[str, Any]) -> RunPage:
    """A page of the search (``filters``: the query string's, as ``search_filter`` takes them); 422 on the
    parameter it cannot use."""
    try:
        where = search_filter(**filters)
        after = Cursor.parse(next_token) if next_token else None
    except SearchRefused as refused:
        raise ApiError(422, refused.code, str(refused), refused.field) from None
    page = search_runs(runs, jobs, where, limit=limit, after=after)
    return RunPage(runs=[run_view(r, None) for r in page.runs], next_token=page.cursor and page.cursor.text())


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
        limit: Limit = 50,
        next_token: PageToken = None,
        status: Statuses = None,
        trigger: TriggerKind = None,
        min_attempts: MinAttempts = None,
        error: ErrorText = None,
        since: Since = None,
        until: Until = None,
    ) -> RunPage:
        member(team)
        typed = {"status": status, "trigger": trigger, "min_attempts": min_attempts, "error": error}
        filters = typed | {"since": since, "until": until, "now": services().clock()}
        return searched(services().runs, [job_key(team, name)], limit, next_token, filters)

    @router.get(
        "/teams/<team>/runs",
        operation_id="searchTeamRuns",
        tags=["runs"],
        summary="Every run of a team's jobs, newest first, searched as a job's runs are",
    )
    def search_team_runs(
        team: str,
        limit: Limit = 50,
        next_token: PageToken = None,
        status: Statuses = None,
        trigger: TriggerKind = None,
        min_attempts: MinAttempts = None,
        error: ErrorText = None,
        since: Since = None,
        until: Until = None,
    ) -> RunPage:
        member(team)
        typed = {"status": status, "trigger": trigger, "min_attempts": min_attempts, "error": error}
        filters = typed | {"since": since, "until": until, "now": services().clock()}
        jobs, _ = services().jobs.team_page(team, limit=MAX_TEAM_JOBS, after_name=None)
        return searched(services().runs, jobs, limit, next_token, filters)

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
        cancelled = services().worker.ends.stop(AttemptRef(stored.key, run_id), CANCELLED_BY_REQUEST)
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
