"""Approvals: a member of the team approves or rejects a DAG run's waiting approval task (its name recorded)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.models import RunView
from jobsched.api.requests import DecisionRequest
from jobsched.api.views import run_view
from jobsched.core.runs import job_key
from jobsched.pipeline.approvals import decide


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    def decide_approval(
        team: str, name: str, run_id: str, task: str, body: DecisionRequest | None, approved: bool
    ) -> RunView:
        caller = member(team)
        existing(team, name)
        s = services()
        run = decide(
            s.jobs,
            s.worker.dags,
            job_key(team, name),
            run_id,
            task,
            approved=approved,
            principal=caller.arn,
            comment=body.comment if body else "",
            now=s.clock(),
        )
        return run_view(run, None)

    @router.post(
        "/teams/<team>/jobs/<name>/runs/<run_id>/tasks/<task>/approve",
        operation_id="approveTask",
        tags=["runs"],
        summary="Approve a DAG run's waiting approval task (a member of the team; the approver is recorded)",
    )
    def approve(
        team: str, name: str, run_id: str, task: str, body: Annotated[DecisionRequest | None, Body()] = None
    ) -> RunView:
        return decide_approval(team, name, run_id, task, body, approved=True)

    @router.post(
        "/teams/<team>/jobs/<name>/runs/<run_id>/tasks/<task>/reject",
        operation_id="rejectTask",
        tags=["runs"],
        summary="Reject a DAG run's waiting approval task: it fails, and the tasks after it are skipped",
    )
    def reject(
        team: str, name: str, run_id: str, task: str, body: Annotated[DecisionRequest | None, Body()] = None
    ) -> RunView:
        return decide_approval(team, name, run_id, task, body, approved=False)

    return router
