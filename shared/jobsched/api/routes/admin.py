"""Platform administration: a team's limits (max running, max jobs, max backfills, API rate)."""

from __future__ import annotations

import logging
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.models import TeamLimitsRequest, TeamLimitsView

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
        services().jobs.set_team_limits(team, changes)
        log.info("team limits changed", extra={"team": team, "principal": caller.arn, "changes": changes})
        return view(team)

    return router
