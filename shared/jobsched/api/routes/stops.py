"""Emergency stops: every job of the named teams that matches a selector paused in one audited call (optionally
its running runs cancelled), and the stop's resume with the catch-up chosen (``pipeline.stops``). A platform admin
may stop any teams; a member only teams they act for."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field

from jobsched.api.access import Access
from jobsched.core.runs import instant_text
from jobsched.core.spec import NAME
from jobsched.core.stops import Selector, Stop
from jobsched.pipeline.stops import MAX_STOP_TEAMS, StopNotFound, resume_stopped, stop_jobs

TargetType = Literal[  # the spec's TARGET_TYPES (a test holds them equal)
    "lambda", "sqs", "stepfunctions", "eventbridge", "http", "callback", "approval", "ecs", "batch", "kubernetes"
]
STOP_ID = Path(pattern=r"^stop-\d{8}T\d{6}Z-[0-9a-f]{6}$", description="a stop's id, as POST /stops answered it")


class StopRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    teams: list[Annotated[str, Field(pattern=NAME.pattern)]] = Field(min_length=1, max_length=MAX_STOP_TEAMS)
    tags: dict[Annotated[str, Field(min_length=1, max_length=128)], Annotated[str, Field(max_length=256)]] = Field(
        default_factory=dict, max_length=20, description="every tag must match (key: value)"
    )
    target_types: list[TargetType] = Field(
        default_factory=list, max_length=20, description="any of these target types (none: every type)"
    )
    reason: str = Field(min_length=1, max_length=500)
    cancel_running: bool = Field(default=False, description="also cancel the matching jobs' running runs")


class ResumeStopRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    catchup: Literal["none", "latest", "all"] = Field(
        description="what fell in the stop runs: nothing, its latest instant, or every instant (a throttled backfill)"
    )


class StopView(BaseModel):
    stop_id: str
    reason: str
    principal: str
    at: str
    teams: list[str]
    tags: dict[str, str]
    target_types: list[str]
    stopped: list[str] = Field(description="the jobs this stop paused (and only these are resumed with it)")
    already_paused: list[str] = Field(description="matched, but paused before: left alone")
    cancelled_runs: list[str] = Field(description='"team/name run_id" of the runs cancelled with it')
    resumed_at: str | None = None
    resumed_by: str | None = None
    catchup: str | None = None
    resumed: list[dict[str, str]] = Field(default_factory=list, description="per job: what the resume did")


def stop_view(stop: Stop) -> StopView:
    return StopView(
        stop_id=stop.stop_id,
        reason=stop.reason,
        principal=stop.principal,
        at=instant_text(stop.at),
        teams=list(stop.selector.teams),
        tags=dict(stop.selector.tags),
        target_types=list(stop.selector.target_types),
        stopped=list(stop.stopped),
        already_paused=list(stop.already_paused),
        cancelled_runs=list(stop.cancelled),
        resumed_at=instant_text(stop.resumed_at) if stop.resumed_at else None,
        resumed_by=stop.resumed_by,
        catchup=stop.catchup,
        resumed=[dict(entry) for entry in stop.resumed],
    )


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services = access.services

    def acting_for(teams: list[str] | tuple[str, ...]) -> str:
        """The caller, who must act for every team (an admin acts for all)."""
        caller = access.principal()
        for team in teams:
            caller.require(team)
        return caller.arn

    def existing(stop_id: str) -> tuple[Stop, str]:
        """The stop, and the caller, who must act for each of its teams (404 when there is none)."""
        stop = services().jobs.get_stop(stop_id)
        if stop is None:
            raise StopNotFound(stop_id)
        return stop, acting_for(stop.selector.teams)

    @router.post(
        "/stops",
        operation_id="emergencyStop",
        tags=["schedule"],
        summary="Pause every job of the teams that matches the selector, in one audited call",
        responses={201: {"description": "Stopped", "content": {"application/json": {"model": StopView}}}},
    )
    def emergency_stop(body: Annotated[StopRequest, Body()]) -> Response[StopView]:
        who = acting_for(body.teams)
        s = services()
        selector = Selector(tuple(dict.fromkeys(body.teams)), dict(body.tags), tuple(body.target_types))
        cancel = s.worker.run_ends.stop_holders if body.cancel_running else None
        stop = stop_jobs(s.jobs, selector, reason=body.reason, principal=who, now=s.clock(), cancel=cancel)
        return Response(201, content_types.APPLICATION_JSON, stop_view(stop))

    @router.get("/stops/<stop_id>", operation_id="getStop", tags=["schedule"], summary="An emergency stop")
    def get_stop(stop_id: Annotated[str, STOP_ID]) -> StopView:
        return stop_view(existing(stop_id)[0])

    @router.post(
        "/stops/<stop_id>/resume",
        operation_id="resumeStop",
        tags=["schedule"],
        summary="Resume exactly the jobs the stop paused, with the catch-up chosen (once)",
    )
    def resume_stop(stop_id: Annotated[str, STOP_ID], body: Annotated[ResumeStopRequest, Body()]) -> StopView:
        s, (_, who) = services(), existing(stop_id)
        return stop_view(resume_stopped(s.jobs, stop_id, catchup=body.catchup, principal=who, now=s.clock()))

    return router
