"""Backfills: re-run a past range of a job's instants, and follow its progress."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.models import (
    BackfillRequest,
    BackfillView,
)
from jobsched.api.views import (
    backfill_view,
)
from jobsched.core.runs import job_key
from jobsched.pipeline.triggers import get_backfill, start_backfill


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.post(
        "/teams/<team>/jobs/<name>/backfill",
        operation_id="startBackfill",
        tags=["backfills"],
        summary="Run a past range of the job's instants",
    )
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
        return Response(202, content_types.APPLICATION_JSON, backfill_view(progress).model_dump_json())

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
