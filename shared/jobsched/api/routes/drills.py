"""Paging drills: a marked test page through a job's real escalation chain (or every job's of a team), reported per
destination; and a team's destinations with when each was last verified, or never."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, Field

from jobsched.api.access import Access, ApiServices
from jobsched.api.errors import ApiError
from jobsched.core.records import StoredJob
from jobsched.paging.drills import DrillResult, drill, team_destinations, verified_values

MAX_DRILLED_JOBS = 100  # --all TEAM: a team's jobs drilled in one request


class DrillResultView(BaseModel):
    job: str
    role: str = Field(description="primary or secondary")
    destination: str = Field(description="topic or webhook")
    address: str
    outcome: str = Field(description="delivered, failed (with the reason) or refused (the team may not use it)")
    reason: str | None = None


class DrillView(BaseModel):
    team: str
    results: list[DrillResultView]
    jobs: int = Field(description="jobs whose chains were drilled")
    more: bool = Field(default=False, description=f"the team has more jobs than the {MAX_DRILLED_JOBS} drilled")


class DestinationView(BaseModel):
    address: str
    destination: str
    jobs: list[str] = Field(description="the team's jobs that page it")
    last_outcome: str | None = Field(description="the last drill's outcome; None: never verified")
    last_verified_at: str | None = None
    reason: str | None = None


class DestinationsView(BaseModel):
    team: str
    destinations: list[DestinationView]
    never_verified: int
    failing: int = Field(description="destinations whose last drill failed or was refused")


def result_view(result: DrillResult) -> DrillResultView:
    return DrillResultView(
        job=result.job,
        role=result.role,
        destination=result.destination,
        address=result.address,
        outcome=result.outcome,
        reason=result.reason,
    )


def drilled(s: ApiServices, jobs: list[StoredJob]) -> list[DrillResult]:
    if s.notifier is None:
        raise ApiError(503, "drills_not_configured", "this deployment cannot send pages from the API")
    results = [result for stored in jobs for result in drill(s.notifier, stored, s.default_topic)]
    if jobs:
        s.jobs.record_drills(jobs[0].spec.team, verified_values(results, s.clock()))
    return results


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.post(
        "/teams/<team>/jobs/<name>/page-test",
        operation_id="drillJobPaging",
        tags=["health"],
        summary="Send a marked test page through the job's escalation chain; what became of each destination",
    )
    def drill_job(team: str, name: str) -> DrillView:
        member(team)
        stored = existing(team, name)
        results = drilled(services(), [stored])
        return DrillView(team=team, results=[result_view(r) for r in results], jobs=1)

    @router.post(
        "/teams/<team>/page-test",
        operation_id="drillTeamPaging",
        tags=["health"],
        summary="A marked test page through every job's chain of the team (each destination once a job)",
    )
    def drill_team(team: str) -> DrillView:
        member(team)
        s = services()
        keys, more = s.jobs.team_page(team, limit=MAX_DRILLED_JOBS, after_name=None)
        found = s.jobs.get_many(keys) if keys else {}
        jobs = [found[key] for key in keys if key in found]
        results = drilled(s, jobs)
        return DrillView(team=team, results=[result_view(r) for r in results], jobs=len(jobs), more=more is not None)

    @router.get(
        "/teams/<team>/destinations",
        operation_id="listPagingDestinations",
        tags=["health"],
        summary="Where the team's jobs page, and when each destination was last verified by a drill (or never)",
    )
    def list_destinations(team: str) -> DestinationsView:
        member(team)
        s = services()
        keys, _ = s.jobs.team_page(team, limit=MAX_DRILLED_JOBS * 10, after_name=None)
        found = s.jobs.get_many(keys) if keys else {}
        stored = [found[key] for key in keys if key in found]
        views = [
            DestinationView(
                address=d.address,
                destination=d.destination,
                jobs=list(d.jobs),
                last_outcome=d.last_outcome,
                last_verified_at=d.last_verified_at,
                reason=d.reason,
            )
            for d in team_destinations(stored, s.default_topic, s.jobs.drills(team))
        ]
        return DestinationsView(
            team=team,
            destinations=views,
            never_verified=sum(1 for view in views if view.last_outcome is None),
            failing=sum(1 for view in views if view.last_outcome in ("failed", "refused")),
        )

    return router
