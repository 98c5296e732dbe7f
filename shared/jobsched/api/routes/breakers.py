"""A team's circuit breakers: which targets are held open, until when, and which runs wait behind them; an
admin may close one by hand (audited)."""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.core.records import MAX_HELD_LISTED, BreakerState, breaker_team
from jobsched.core.runs import instant_text
from jobsched.watch.breaker import guarded

log = logging.getLogger(__name__)


class BreakerView(BaseModel):
    breaker: str = Field(description='its key: "{team}:{kind}:{target}", or "{team}/{job}:…" for a job\'s own')
    target: str = Field(description='what it guards: "lambda:nightly-export", "http:https://api.example.com"')
    scope: Literal["team", "job"]
    state: Literal["open", "half-open"] = Field(description="half-open: the next run tries the target again")
    open_until: str
    failures: int = Field(description="consecutive failures that said the target is unwell")
    held: list[str] = Field(
        description=f"runs (team/job/run id) and DAG tasks (…#task) it held back while open (at most {MAX_HELD_LISTED})"
    )


class BreakersView(BaseModel):
    team: str
    breakers: list[BreakerView]


class CloseBreakerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    breaker: str = Field(min_length=3, max_length=2200, description="the breaker's key, as listed")
    reason: str = Field(min_length=1, max_length=500, description="why (kept in the audit entry and the page)")


class ClosedBreakerView(BaseModel):
    breaker: str
    closed: bool
    by: str
    sent: list[str] = Field(description="the held runs sent now, instead of after the cool-down")


def breaker_view(key: str, state: BreakerState, now_text: str) -> BreakerView:
    assert state.open_until is not None
    until = instant_text(state.open_until)
    return BreakerView(
        breaker=key,
        target=guarded(key),
        scope="job" if "/" in key.split(":", 1)[0] else "team",
        state="open" if until > now_text else "half-open",
        open_until=until,
        failures=state.failures,
        held=list(state.held),
    )


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member = access.services, access.member

    @router.get(
        "/teams/<team>/breakers",
        operation_id="listBreakers",
        tags=["health"],
        summary="The team's circuit breakers that are open (or half-open) and what they hold back",
    )
    def list_breakers(team: str) -> BreakersView:
        member(team)
        now = instant_text(services().clock())
        found = services().jobs.open_breakers(team)
        return BreakersView(team=team, breakers=[breaker_view(key, state, now) for key, state in found.items()])

    @router.post(
        "/teams/<team>/breakers/close",
        operation_id="closeBreaker",
        tags=["admin"],
        summary="Close a breaker by hand (platform admins; audited, and its incident resolves)",
    )
    def close_breaker(team: str, body: Annotated[CloseBreakerRequest, Body()]) -> ClosedBreakerView:
        caller = access.admin()
        if breaker_team(body.breaker) != team or ":" not in body.breaker:
            raise ApiError(422, "breaker_not_of_team", f"{body.breaker!r} is not a breaker of team {team}", "breaker")
        worker = services().worker
        held = worker.breakers.close(body.breaker, by=caller.arn, reason=body.reason)
        if held is None:
            raise ApiError(404, "breaker_not_open", f"breaker {body.breaker} is not open", "breaker")
        sent = worker.records.wake_held(held)
        log.info("breaker closed by hand", extra={"team": team, "principal": caller.arn, "breaker": body.breaker})
        return ClosedBreakerView(breaker=body.breaker, closed=True, by=caller.arn, sent=sent)

    return router
