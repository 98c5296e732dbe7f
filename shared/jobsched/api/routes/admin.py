"""Platform administration: a team's limits (max running, max jobs, max backfills, API rate), each change kept in
the team's history."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import MAX_PAGE, Access
from jobsched.api.models import HistoryPage, TeamLimitsView
from jobsched.api.requests import TeamLimitsRequest
from jobsched.api.routes.history import entry_view, from_token, to_token
from jobsched.core.names import JobsKeys

TEAM = Path(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$", description="a team name")
log = logging.getLogger(__name__)


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services = access.services

    def view(team: str) -> TeamLimitsView:
        jobs = services().jobs
        overrides = jobs.team_overrides(team)  # read now, not the one-minute cache the functions use
        return TeamLimitsView(
            team=team,
            limits=jobs.team_defaults.with_overrides(overrides).as_dict(),
            overrides=overrides,
            defaults=jobs.team_defaults.as_dict(),
        )

    @router.get(
        "/admin/teams/<team>",
        operation_id="getTeamLimits",
        tags=["admin"],
        summary="A team's limits: its overrides over the platform's defaults",
    )
    def get_team_limits(team: Annotated[str, TEAM]) -> TeamLimitsView:
        access.admin()
        return view(team)

    @router.put(
        "/admin/teams/<team>",
        operation_id="putTeamLimits",
        tags=["admin"],
        summary="Set a team's limits (null: back to the default; absent: unchanged)",
    )
    def put_team_limits(team: Annotated[str, TEAM], body: Annotated[TeamLimitsRequest, Body()]) -> TeamLimitsView:
        caller = access.admin()
        changes = body.model_dump(exclude_unset=True)
        jobs = services().jobs
        before = jobs.team_overrides(team)
        jobs.set_team_limits(team, changes)
        record_team_change(access, team, caller.arn, "team_limits", {"before": before, "changes": changes})
        log.info("team limits changed", extra={"team": team, "principal": caller.arn, "changes": changes})
        return view(team)

    @router.get(
        "/admin/teams/<team>/history",
        operation_id="getTeamHistory",
        tags=["admin"],
        summary="Changes to a team's limits, newest first",
    )
    def team_history(
        team: Annotated[str, TEAM],
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=200, pattern="^[A-Za-z0-9_-]+$")] = None,
    ) -> HistoryPage:
        access.admin()
        before = from_token(next_token) if next_token else None
        entries, last = services().jobs.history(f"{JobsKeys.TEAM_PREFIX}{team}", limit=limit, before=before)
        now = services().clock()
        return HistoryPage(entries=[entry_view(entry, now) for entry in entries], next_token=to_token(last))

    return router


def record_team_change(access: Access, team: str, principal: str, action: str, details: dict[str, Any]) -> None:
    """In the team's history (GET /admin/teams/{team}/history): who changed which limit or budget, and how."""
    jobs = access.services().jobs
    subject = f"{JobsKeys.TEAM_PREFIX}{team}"
    latest, _ = jobs.history(subject, limit=1)  # numbered: changes in one millisecond keep their order
    version = latest[0].version + 1 if latest else 1
    now = access.services().clock()
    jobs.record_action(subject, version=version, now=now, principal=principal, action=action, details=details)
