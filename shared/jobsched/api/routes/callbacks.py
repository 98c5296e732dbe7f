"""Callbacks: a running callback target heartbeats or reports its result with the run's token."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Header
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.models import CompleteRequest, HeartbeatRequest, RunView
from jobsched.api.tokens import TOKEN_HEADER, CallbackTokenSubject
from jobsched.api.views import run_view
from jobsched.core.records import ProgressReport
from jobsched.core.spec import CONTAINER_TARGETS


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
            worker = services().worker
            return run_view(
                worker.dags.heartbeat_external(subject.job, subject.run_id, subject.task, subject.attempt), None
            )
        worker = services().worker
        return run_view(worker.heartbeat_external(subject.job, subject.run_id, subject.attempt, report), None)

    @router.post(
        "/callbacks/complete",
        operation_id="completeRun",
        tags=["callbacks"],
        summary="A callback run's result",
    )
    def complete(
        body: Annotated[CompleteRequest, Body()],
        token: Annotated[str | None, Header(alias=TOKEN_HEADER, max_length=2048)] = None,
    ) -> RunView:
        subject = subject_of(token)
        if not subject.may_complete:
            raise ApiError(
                403,
                "token_cannot_complete",
                "a container's token may heartbeat and report progress only: a container run ends by its exit",
                TOKEN_HEADER,
            )
        if subject.task is not None:
            done = services().worker.dags.complete_external(
                subject.job,
                subject.run_id,
                subject.task,
                subject.attempt,
                succeeded=body.status == "succeeded",
                output=body.output,
                error=body.error,
            )
            return run_view(done, None)
        stored = services().jobs.get(subject.job)
        if stored is not None and isinstance(stored.spec.target, CONTAINER_TARGETS):  # a token issued before purposes
            raise ApiError(403, "token_cannot_complete", "a container run ends by its exit, never by a callback")
        run = services().worker.complete_external(
            subject.job,
            subject.run_id,
            subject.attempt,
            succeeded=body.status == "succeeded",
            output=body.output,
            error=body.error,
        )
        return run_view(run, None)

    return router
