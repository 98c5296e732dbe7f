"""Backfills and range reruns: a past range of a job's instants run (again), paced, followed, cancelled."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.models import BackfillView
from jobsched.api.requests import BackfillRequest, RerunsRequest
from jobsched.api.views import backfill_view
from jobsched.core.runs import RunStatus, job_key
from jobsched.pipeline.manual_runs import cancel_backfill, get_backfill, start_backfill


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    def start(team: str, name: str, body: BackfillRequest) -> Response[BackfillView]:
        caller = member(team)
        existing(team, name)
        if body.end <= body.start:
            raise ApiError(422, "invalid_range", "'to' must be after 'from'", "to")
        if body.end > services().clock():
            # The future belongs to the schedule: a backfill that ran ahead would take the run ids of
            # instants the dispatcher has not fired yet.
            raise ApiError(
                422, "backfill_in_future", "'to' must not be later than now; backfills re-run the past", "to"
            )
        if body.priority is not None and body.priority not in services().membership.priorities_for(team):
            granted = ", ".join(services().membership.priorities_for(team))
            raise ApiError(422, "priority_not_granted", f"team {team} may use: {granted}", "priority")
        progress = start_backfill(
            services().jobs,
            job_key(team, name),
            start=body.start,
            end=body.end,
            max_in_flight=body.max_in_flight,
            now=services().clock(),
            principal=caller.arn,
            statuses=frozenset(RunStatus(status) for status in body.status),
            rate_per_minute=body.rate_per_minute,
            priority=body.priority,
            downstream=body.downstream,
        )
        return Response(202, content_types.APPLICATION_JSON, backfill_view(progress))

    @router.post(
        "/teams/<team>/jobs/<name>/backfill",
        operation_id="startBackfill",
        tags=["backfills"],
        summary="Run a past range of the job's instants (those already run are skipped unless status names them)",
        status_code=202,
    )
    def backfill(team: str, name: str, body: Annotated[BackfillRequest, Body()]) -> Response[BackfillView]:
        return start(team, name, body)

    @router.post(
        "/teams/<team>/jobs/<name>/reruns",
        operation_id="startReruns",
        tags=["backfills"],
        summary="Run again, with their own instants, the runs of a range that ended in the given statuses",
        status_code=202,
    )
    def reruns(team: str, name: str, body: Annotated[RerunsRequest, Body()]) -> Response[BackfillView]:
        return start(team, name, body)

    @router.delete(
        "/teams/<team>/jobs/<name>/backfills/<backfill_id>",
        operation_id="cancelBackfill",
        tags=["backfills"],
        summary="Stop a backfill or range rerun (runs already started go on)",
    )
    def cancel(team: str, name: str, backfill_id: str) -> BackfillView:
        caller = member(team)
        progress = cancel_backfill(
            services().jobs, job_key(team, name), backfill_id, now=services().clock(), principal=caller.arn
        )
        return backfill_view(progress)

    @router.get(
        "/teams/<team>/jobs/<name>/backfills/<backfill_id>",
        operation_id="getBackfill",
        tags=["backfills"],
        summary="A backfill's progress",
    )
    def backfill_progress(team: str, name: str, backfill_id: str) -> BackfillView:
        member(team)
        return backfill_view(get_backfill(services().jobs, job_key(team, name), backfill_id))

    return router
