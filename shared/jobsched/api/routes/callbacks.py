"""Callbacks: a running callback target heartbeats or reports its result with the run's token."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Header
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access, ApiServices
from jobsched.api.errors import ApiError
from jobsched.api.identity import Unauthenticated, caller_arn
from jobsched.api.models import RunView
from jobsched.api.requests import CompleteRequest, HeartbeatRequest
from jobsched.api.tokens import TOKEN_HEADER, CallbackTokenSubject
from jobsched.api.views import run_view
from jobsched.core.messages import CallbackResult
from jobsched.core.records import StoredJob
from jobsched.core.run_records import ProgressReport, StaleAttempt
from jobsched.core.runs import RunStatus
from jobsched.core.spec import CONTAINER_TARGETS
from jobsched.pipeline.containers import reporter_refusal
from jobsched.pipeline.ends import AttemptRef


def checks_of(stored: StoredJob, task: str | None) -> bool:
    """Whether the job's (or the DAG task's) result is judged by checks."""
    if task is None:
        return bool(stored.spec.checks)
    tasks = stored.spec.dag.tasks if stored.spec.dag is not None else []
    return any(candidate.name == task and candidate.checks for candidate in tasks)


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services = access.services

    def subject_of(token: str | None) -> CallbackTokenSubject:
        if not token:
            raise ApiError(401, "missing_run_token", f"send the run's callback token in the {TOKEN_HEADER} header")
        return services().tokens.verify(token, now=services().clock())

    @router.post(
        "/callbacks/heartbeat",
        operation_id="heartbeatRun",
        tags=["callbacks"],
        summary="A callback run is still working: extend its lease",
    )
    def heartbeat(
        body: Annotated[HeartbeatRequest | None, Body()] = None,
        token: Annotated[str | None, Header(alias=TOKEN_HEADER, max_length=2048)] = None,
    ) -> RunView:
        subject = subject_of(token)
        report = body.report() if body is not None else None
        if subject.task is not None:
            if report is not None and report != ProgressReport():
                raise ApiError(
                    422,
                    "progress_not_kept_for_tasks",
                    "a DAG task's heartbeat extends its lease only: progress and checkpoints are kept for runs",
                    "checkpoint" if report.checkpoint is not None else "progress",
                )
        else:
            check_reporter(services(), subject, access.raw_event())
        ref = AttemptRef(subject.job, subject.run_id, subject.attempt, subject.task)
        return run_view(services().worker.ends.heartbeat(ref, report), None)

    @router.post(
        "/callbacks/complete",
        operation_id="completeRun",
        tags=["callbacks"],
        summary="A callback run's result",
        responses={
            200: {"description": "Recorded", "content": {"application/json": {"model": RunView}}},
            202: {
                "description": "Accepted: the job's checks judge it in the worker (the run view shows the outcome)",
                "content": {"application/json": {"model": RunView}},
            },
        },
    )
    def complete(
        body: Annotated[CompleteRequest, Body()],
        token: Annotated[str | None, Header(alias=TOKEN_HEADER, max_length=2048)] = None,
    ) -> Response[RunView]:
        subject = subject_of(token)
        return record_result(services(), subject, body)

    return router


def record_result(services: ApiServices, subject: CallbackTokenSubject, body: CompleteRequest) -> Response[RunView]:
    """A callback's result: recorded now (200), or, when checks judge it, handed to the worker (202)."""
    if not subject.may_complete:
        raise ApiError(
            403,
            "token_cannot_complete",
            "a container's token may heartbeat and report progress only: a container run ends by its exit",
            TOKEN_HEADER,
        )
    stored = services.jobs.get(subject.job)
    if stored is None:
        raise StaleAttempt(f"{subject.job} no longer exists")
    if isinstance(stored.spec.target, CONTAINER_TARGETS):  # a token issued before purposes
        raise ApiError(403, "token_cannot_complete", "a container run ends by its exit, never by a callback")
    result = CallbackResult(
        job=subject.job,
        team=stored.spec.team,
        run_id=subject.run_id,
        attempt=subject.attempt,
        task=subject.task,
        succeeded=body.status == "succeeded",
        output=body.output,
        error=body.error,
    )
    if result.succeeded and checks_of(stored, subject.task):
        # Checks cost CPU (bounded, but seconds): the worker judges the result, not this request, which every
        # team's requests share. The attempt must still be running now; the worker fences it again.
        run = services.runs.get(result.job, result.run_id)
        attempt_moved_on = run is not None and result.task is None and run.attempt != result.attempt
        if run is None or run.status is not RunStatus.RUNNING or attempt_moved_on:
            raise StaleAttempt(f"{result.job} {result.run_id} attempt {result.attempt} is no longer running")
        services.queues.send(stored.spec.priority, [(result, timedelta(0))])
        return Response(202, content_types.APPLICATION_JSON, run_view(run, None))
    done = services.worker.callback_result(result)
    if done.run is None:
        raise StaleAttempt(done.detail)
    return Response(200, content_types.APPLICATION_JSON, run_view(done.run, None))


def check_reporter(services: ApiServices, subject: CallbackTokenSubject, event: dict[str, Any]) -> None:
    """A container's report is taken only from its task's own role (or a platform admin): the token alone is
    readable by whoever may describe the task. 403 ``not_the_task`` otherwise."""
    stored = services.jobs.get(subject.job)
    if stored is None or not isinstance(stored.spec.target, CONTAINER_TARGETS):
        return
    try:
        caller: str | None = caller_arn(event)
    except Unauthenticated:
        caller = None
    if caller is not None and services.membership.principal(caller).admin:
        return
    run = services.runs.get(subject.job, subject.run_id)
    if run is None or run.attempt != subject.attempt:
        raise StaleAttempt(f"{subject.job} {subject.run_id} attempt {subject.attempt} is no longer running")
    refused = reporter_refusal(run, services.worker.containers, caller)
    if refused is not None:
        raise ApiError(403, "not_the_task", refused)
