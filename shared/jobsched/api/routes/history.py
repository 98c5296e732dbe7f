"""History: every change and action on a job, newest first, and rollback to an earlier spec version."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import MAX_PAGE, Access
from jobsched.api.errors import ApiError
from jobsched.api.models import HistoryEntryView, HistoryPage, JobView
from jobsched.api.requests import RollbackRequest
from jobsched.api.routes.jobs import admitted
from jobsched.api.views import job_view
from jobsched.core.names import JobsKeys
from jobsched.core.records import AuditEntry
from jobsched.core.runs import instant_text, job_key
from jobsched.registry.jobs import put_job

MAX_HISTORY_PAGES = 50  # a rollback looks back at most this many pages of 100 entries for its version


def entry_view(entry: AuditEntry, now: datetime) -> HistoryEntryView:
    return HistoryEntryView(
        at=instant_text(entry.at),
        version=entry.version,
        action=entry.action,
        principal=entry.principal,
        confirmed_by=entry.confirmed_by,
        unconfirmed=entry.unconfirmed(now),
        reason=entry.reason,
        spec=entry.spec,
        details=entry.details,
    )


def to_token(sort_key: str | None) -> str | None:
    """The page token: opaque and URL-safe (a sort key holds '#' and ':')."""
    return base64.urlsafe_b64encode(sort_key.encode()).decode().rstrip("=") if sort_key else None


def from_token(token: str) -> str:
    try:
        sort_key = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        sort_key = ""
    if not sort_key.startswith(JobsKeys.AUDIT_PREFIX):
        raise ApiError(422, "invalid_token", "next_token is not one this API returned", "next_token")
    return sort_key


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.get(
        "/teams/<team>/jobs/<name>/history",
        operation_id="getJobHistory",
        tags=["history"],
        summary="Every change and action on a job, newest first (a deleted job's too)",
    )
    def history(
        team: str,
        name: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=200, pattern="^[A-Za-z0-9_-]+$")] = None,
    ) -> HistoryPage:
        member(team)
        before = from_token(next_token) if next_token else None
        entries, last = services().jobs.history(job_key(team, name), limit=limit, before=before)
        now = services().clock()
        return HistoryPage(entries=[entry_view(entry, now) for entry in entries], next_token=to_token(last))

    @router.post(
        "/teams/<team>/jobs/<name>/rollback",
        operation_id="rollbackJob",
        tags=["history"],
        summary="Apply an earlier version's spec again, as a new version",
    )
    def rollback(team: str, name: str, body: Annotated[RollbackRequest, Body()]) -> Response[JobView]:
        caller = member(team)
        current = existing(team, name)
        wanted = find_version(team, name, body.to_version)
        spec = admitted(services(), wanted)  # today's rules: a version stored before them may be refused now
        stored, _ = put_job(
            services().jobs,
            spec,
            now=services().clock(),
            principal=caller.arn,
            expected_version=current.version,
            dags=services().dags,
            rules=services().rules,
            action="rollback",
            reason=f"rollback to version {body.to_version}",
        )
        view = job_view(stored, services().clock(), services().company())
        return Response(200, content_types.APPLICATION_JSON, view, headers={"ETag": str(stored.version)})

    def find_version(team: str, name: str, version: int) -> dict[str, object]:
        token = None
        for _ in range(MAX_HISTORY_PAGES):
            entries, token = services().jobs.history(job_key(team, name), limit=100, before=token)
            for entry in entries:
                if entry.version == version and entry.spec is not None:
                    return entry.spec
            if token is None:
                break
        raise ApiError(
            404, "version_not_found", f"no spec of version {version} in {team}/{name}'s history", "to_version"
        )

    return router
