"""Runs: list, read (with DAG tasks and callback tokens), cancel, rerun, and trigger one now."""

from __future__ import annotations

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


def _payload_taken(stored: StoredJob, body: TriggerRequest | None) -> None:
    """A payload the job would not pass on is refused (422), never dropped."""
    refusal = payload_not_taken(stored.spec) if body is not None and body.payload is not None else None
    if refusal is not None:
        raise ApiError(422, "payload_not_taken", refusal, "payload")


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.get(
        "/teams/<team>/jobs/<name>/runs",
        operation_id="listRuns",
        tags=["runs"],
        summary="A job's runs, newest first",
    )
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
        return RunPage(runs=[run_view(r, None) for r in shown], next_token=last)

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
