"""What started a run, whole: the event too large for its payload, or a batched run's full list."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.models import RunEvents
from jobsched.pipeline.intake import run_events


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.get(
        "/teams/<team>/jobs/<name>/runs/<run_id>/events",
        operation_id="getRunEvents",
        tags=["runs"],
        summary="The events that started a run, whole (what its payload's events_ref points at)",
    )
    def get_run_events(team: str, name: str, run_id: str) -> RunEvents:
        member(team)
        stored = existing(team, name)
        s = services()
        run = s.runs.get(stored.key, run_id)
        if run is None:
            raise ApiError(404, "run_not_found", f"no run {run_id} of {stored.key}", "run_id")
        events = run_events(s.jobs, run)
        if events is None:
            raise ApiError(404, "no_events", f"run {run_id} of {stored.key} was not started by an event", "run_id")
        return RunEvents(job=stored.key, run_id=run_id, events=events)

    return router
