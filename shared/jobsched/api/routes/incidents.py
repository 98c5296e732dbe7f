"""Working a job's open incident: acknowledge it (someone is on it: named on it, its secondary contact not
paged), snooze it (no page for it before an instant), resolve it by hand with a reason (a notice to everyone
who was paged). Each is audited in the job's history."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.models import IncidentView
from jobsched.api.views import incident_view
from jobsched.core.runs import instant_text
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.paging.incidents import acknowledge, snooze

MAX_SNOOZE = timedelta(days=7)

AcknowledgedClass = Literal["failing", "late", "quality", "approval", "stale", "anomaly"]


class AcknowledgeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    comment: str = Field(default="", max_length=500, description="kept in the job's history")


class SnoozeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    until: AwareDatetime = Field(description="no page for the incident before this instant (at most 7 days ahead)")
    reason: str = Field(min_length=1, max_length=500, description="kept in the job's history")


class ResolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=500, description="in the resolve notice and the job's history")


class ResolvingView(BaseModel):
    incident: IncidentView
    resolving: bool = Field(description="the resolve is queued: notices go to everyone who was paged")


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

    @router.post(
        "/teams/<team>/jobs/<name>/incidents/<incident_class>/snooze",
        operation_id="snoozeIncident",
        tags=["health"],
        summary="No page for a job's open incident before an instant (its events still counted; audited)",
    )
    def snooze_incident(
        team: str, name: str, incident_class: AcknowledgedClass, body: Annotated[SnoozeRequest, Body()]
    ) -> IncidentView:
        caller = member(team)
        stored = existing(team, name)
        s = services()
        now = s.clock()
        if not now < body.until <= now + MAX_SNOOZE:
            raise ApiError(422, "snooze_out_of_range", "until: an instant in the next 7 days", "until")
        found = snooze(s.jobs, stored.key, incident_class, by=caller.arn, until=body.until)
        if found is None:
            raise ApiError(
                404, "no_open_incident", f"{stored.key} has no open {incident_class} incident", "incident_class"
            )
        details = {"incident_class": incident_class, "until": instant_text(body.until), "reason": body.reason}
        s.jobs.record_action(
            stored.key, version=stored.version, now=now, principal=caller.arn, action="snooze", details=details
        )
        return incident_view(found)

    @router.post(
        "/teams/<team>/jobs/<name>/incidents/<incident_class>/resolve",
        operation_id="resolveIncident",
        tags=["health"],
        summary="Resolve a job's open incident by hand, with a reason (notices to those paged; audited)",
    )
    def resolve_incident(
        team: str, name: str, incident_class: AcknowledgedClass, body: Annotated[ResolveRequest, Body()]
    ) -> Response[ResolvingView]:
        caller = member(team)
        stored = existing(team, name)
        s = services()
        now = s.clock()
        found = s.jobs.get_incident(stored.key, incident_class)
        if found is None or found.resolved:
            raise ApiError(
                404, "no_open_incident", f"{stored.key} has no open {incident_class} incident", "incident_class"
            )
        reason = f"{body.reason} (by {caller.arn})"
        s.worker.alerts.publish(
            EscalationEvent(
                kind="resolved_by_hand",
                subject=stored.key,
                occurred_at=instant_text(now),
                team=team,
                job=stored.key,
                detail=reason,
                incident_class=incident_class,
            )
        )
        details = {"incident_class": incident_class, "reason": body.reason}
        s.jobs.record_action(
            stored.key, version=stored.version, now=now, principal=caller.arn, action="resolve", details=details
        )
        view = ResolvingView(incident=incident_view(found.incident), resolving=True)
        return Response(202, content_types.APPLICATION_JSON, view)

    return router
