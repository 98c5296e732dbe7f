"""Jobs: register (PUT, with the admission checks), list, read, delete."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import MAX_PAGE, Access, ApiServices
from jobsched.api.errors import ApiError
from jobsched.api.models import JobPage, JobView, WarningView
from jobsched.api.requests import JobBody
from jobsched.api.views import if_match_version, incident_view, job_view
from jobsched.core.errors import SpecError
from jobsched.core.records import VersionConflict
from jobsched.core.spec import JobSpec
from jobsched.registry.jobfile import validate_document
from jobsched.registry.jobs import delete_job as remove_job
from jobsched.registry.jobs import put_job
from jobsched.registry.policy import admission_errors as policy_errors
from jobsched.schedule.company import CompanySettings
from jobsched.tenancy.admission import admission_errors, admission_warnings, priority_errors, schedule_cost_errors


def admitted(services: ApiServices, document: dict[str, Any], written: dict[str, Any] | None = None) -> JobSpec:
    """A job document as PUT accepts it: valid, a priority the team may use, a schedule whose cost is
    bounded, within the organisation's policy (``written``: the document as the caller wrote it, defaults left
    out), and only resources the team owns and addresses the stage may reach (422 otherwise)."""
    spec = validate_document(document)
    company = CompanySettings.read(services.jobs)
    now = services.clock()
    refused = (
        priority_errors(spec, services.membership.priorities_for(spec.team))
        or schedule_cost_errors(spec, now, company)
        or policy_errors(written if written is not None else document, spec, services.policy, now=now, company=company)
        or admission_errors(spec, services.guard, services.egress)
    )
    if refused:
        raise SpecError(refused)
    return spec


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.put(
        "/teams/<team>/jobs/<name>",
        operation_id="putJob",
        tags=["jobs"],
        summary="Create or replace a job (If-Match: the version read)",
        responses={
            200: {"description": "Replaced", "content": {"application/json": {"model": JobView}}},
            201: {"description": "Created", "content": {"application/json": {"model": JobView}}},
        },
    )
    def put(
        team: str,
        name: str,
        body: Annotated[JobBody, Body()],
        if_match: Annotated[str | None, Header(alias="If-Match")] = None,
    ) -> Response[JobView]:
        caller = member(team)
        for field, value, in_path in (("team", body.team, team), ("name", body.name, name)):
            if value is not None and value != in_path:
                raise ApiError(
                    422, "path_mismatch", f"{field} '{value}' in the body differs from the path '{in_path}'", field
                )
        document = body.model_dump(mode="json", exclude_none=True) | {"team": team, "name": name}
        written = body.model_dump(mode="json", exclude_unset=True, exclude_none=True)
        spec = admitted(services(), document, written)
        expected = if_match_version(if_match)
        stored, created = put_job(
            services().jobs,
            spec,
            now=services().clock(),
            principal=caller.arn,
            expected_version=expected,
            dags=services().dags,
            rules=services().rules,
        )
        view = job_view(stored, services().clock(), services().company())
        warned = admission_warnings(spec, services().guard)
        view.warnings = [WarningView(field=w.path, code=w.code, message=w.message) for w in warned] or None
        return Response(
            201 if created else 200,
            content_types.APPLICATION_JSON,
            view,
            headers={"ETag": str(stored.version)},
        )

    @router.get(
        "/teams/<team>/jobs",
        operation_id="listJobs",
        tags=["jobs"],
        summary="List a team's jobs",
    )
    def list_jobs(
        team: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=200)] = None,
        state: Annotated[str | None, Query(pattern="^(ACTIVE|PAUSED)$")] = None,
        tag: Annotated[str | None, Query(max_length=400, description="key=value")] = None,
    ) -> JobPage:
        member(team)
        keys, last = services().jobs.team_page(team, limit=limit, after_name=next_token)
        found = services().jobs.get_many(keys)
        now = services().clock()
        company = services().company()
        tag_key, _, tag_value = (tag or "").partition("=")
        jobs = [
            job_view(found[key], now, company)
            for key in keys
            if key in found
            and (state is None or found[key].state == state)
            and (not tag or found[key].spec.tags.get(tag_key) == tag_value)
        ]
        return JobPage(jobs=jobs, next_token=last)

    @router.get(
        "/teams/<team>/jobs/<name>",
        operation_id="getJob",
        tags=["jobs"],
        summary="Read a job, its next fire times and open incidents",
    )
    def get_job(team: str, name: str) -> Response[JobView]:
        member(team)
        stored = existing(team, name)
        view = job_view(stored, services().clock(), services().company())
        view.open_incidents = [
            incident_view(stored_incident.incident)
            for stored_incident in services().jobs.incidents(stored.key)
            if not stored_incident.resolved
        ]
        return Response(200, content_types.APPLICATION_JSON, view, headers={"ETag": str(stored.version)})

    @router.delete(
        "/teams/<team>/jobs/<name>",
        operation_id="deleteJob",
        tags=["jobs"],
        summary="Delete a job (its runs are kept for their retention)",
        status_code=204,
    )
    def delete_job(
        team: str, name: str, if_match: Annotated[str | None, Header(alias="If-Match")] = None
    ) -> Response[None]:
        caller = member(team)
        stored = existing(team, name)
        expected = if_match_version(if_match)
        if expected is not None and expected != stored.version:
            raise VersionConflict(f"{stored.key} is at version {stored.version}, not {expected}")
        remove_job(
            services().jobs,
            stored,
            now=services().clock(),
            principal=caller.arn,
            dags=services().dags,
            rules=services().rules,
        )
        return Response(204, content_types.APPLICATION_JSON, None)

    return router
