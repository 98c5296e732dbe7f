"""Health: a job's and a team's success rate, lateness and recent outcomes, worst first; freshness, and what
the job's own runs taught its baseline."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import MAX_PAGE, TEAM_RUNS_READ, Access
from jobsched.api.errors import ApiError
from jobsched.api.health_views import JobHealthView, TeamHealthPage, health_view
from jobsched.api.views import upcoming
from jobsched.core.durations import parse_duration
from jobsched.core.freshness import policy_of
from jobsched.core.records import StoredJob
from jobsched.watch.health import MAX_RUNS_READ, MAX_WINDOW, STRIP_LENGTH, JobHealth, job_health, worst_first


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.get(
        "/teams/<team>/jobs/<name>/health",
        operation_id="getJobHealth",
        tags=["health"],
        summary="A job's success rate, lateness percentiles and recent outcomes",
    )
    def get_job_health(
        team: str,
        name: str,
        window: Annotated[str, Query(max_length=16, description="e.g. 7d, 24h (at most 90d)")] = "7d",
        runs: Annotated[int, Query(ge=1, le=100, description="runs in the strip")] = STRIP_LENGTH,
    ) -> JobHealthView:
        member(team)
        stored = existing(team, name)
        health = _health(stored, _window(window), runs, MAX_RUNS_READ)
        item = services().jobs.health(stored.key, consistent=False)
        zone = stored.spec.schedule.timezone if stored.spec.schedule is not None else "UTC"
        policy = policy_of(stored.spec)
        return health_view(health, item=item, policy=policy, zone=zone, now=services().clock())

    @router.get(
        "/teams/<team>/health",
        operation_id="getTeamHealth",
        tags=["health"],
        summary="Every job of a team, worst first",
    )
    def get_team_health(
        team: str,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=200)] = None,
        window: Annotated[str, Query(max_length=16, description="e.g. 7d, 24h (at most 90d)")] = "7d",
    ) -> TeamHealthPage:
        member(team)
        span = _window(window)
        keys, last = services().jobs.team_page(team, limit=limit, after_name=next_token)
        found = services().jobs.get_many(keys)
        healths = [_health(found[key], span, STRIP_LENGTH, TEAM_RUNS_READ) for key in keys if key in found]
        board = services().jobs.team_freshness(team)  # one item: every job's freshness line
        views = [health_view(h, board=board.get(h.job.split("/", 1)[1])) for h in worst_first(healths)]
        return TeamHealthPage(jobs=views, next_token=last)

    def _window(text: str) -> timedelta:
        try:
            span = parse_duration(text)
        except (ValueError, TypeError) as error:
            raise ApiError(422, "invalid_window", f"window: {error}", "window") from None
        if not timedelta(hours=1) <= span <= MAX_WINDOW:
            raise ApiError(422, "invalid_window", "window must be between 1h and 90d", "window")
        return span

    def _health(stored: StoredJob, span: timedelta, strip: int, read: int) -> JobHealth:
        now = services().clock()
        recent = services().runs.page(stored.key, limit=read, newest_first=True)[0]
        next_fire = upcoming(stored, now, 1, services().company())
        return job_health(
            stored.key,
            recent,
            now=now,
            window=span,
            state=stored.state,
            paused_reason=stored.paused_reason,
            next_fire=next_fire[0] if next_fire else None,
            open_incidents=services().jobs.open_incidents(stored.key),
            strip_length=strip,
        )

    return router
