"""Acknowledging a job's open incident: someone is on it (their name on the incident and in the job's history),
and its secondary contact is not paged."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.models import IncidentView
from jobsched.api.views import incident_view
from jobsched.paging.incidents import acknowledge

AcknowledgedClass = Literal["failing", "late", "quality", "approval"]


class AcknowledgeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    comment: str = Field(default="", max_length=500, description="kept in the job's history")


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.post(
        "/teams/<team>/jobs/<name>/incidents/<incident_class>/acknowledge",
        operation_id="acknowledgeIncident",
        tags=["health"],
        summary="Say someone is on a job's open incident: named on it, and its secondary contact is not paged",
    )
    def acknowledge_incident(
        team: str,
        name: str,
        incident_class: AcknowledgedClass,
        body: Annotated[AcknowledgeRequest | None, Body()] = None,
    ) -> IncidentView:
        caller = member(team)
        stored = existing(team, name)
        s = services()
        now = s.clock()
        found = acknowledge(s.jobs, stored.key, incident_class, by=caller.arn, now=now)
        if found is None:
            raise ApiError(
                404, "no_open_incident", f"{stored.key} has no open {incident_class} incident", "incident_class"
            )
        details = {"incident_class": incident_class, "comment": body.comment if body else ""}
        s.jobs.record_action(
            stored.key, version=stored.version, now=now, principal=caller.arn, action="acknowledge", details=details
        )
        return incident_view(found)

    return router
