"""The dead-letter queues (``jobsched dlq``): what sits in each, and its redrive. A member sees and redrives only
their team's messages (``team``); a platform admin every one (no ``team``: all, including those naming none)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.core.spec import NAME
from jobsched.pipeline.dead_letters import MAX_REDRIVE, QUEUES, DeadLetters

QUEUE = Path(pattern="^[a-z-]{1,40}$", description=f"one of {', '.join(QUEUES)}")


class DeadLetterSample(BaseModel):
    id: str
    team: str = Field(description='the team the message names ("" for none)')
    receives: int
    body: str = Field(description="the message, cut at 500 characters")


class QueueLettersView(BaseModel):
    queue: str
    approximate: int = Field(description="SQS's count of the queue's messages (every team's)")
    read: int = Field(description="messages looked at for this answer (at most 100)")
    by_team: dict[str, int] = Field(description="of those read: per team (only yours for a member)")
    samples: list[DeadLetterSample]


class RedriveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str | None = Field(default=None, pattern=NAME.pattern, description="only this team's (a member: required)")
    max: int = Field(default=100, ge=1, le=MAX_REDRIVE)


class RedriveView(BaseModel):
    queue: str
    moved: int = Field(description="sent back where they came from, then taken off the dead-letter queue")
    left: int = Field(description="other teams' (or naming none), left in place")


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services = access.services

    def box() -> DeadLetters:
        found = services().dead_letters
        if found is None:
            raise ApiError(503, "dlq_not_configured", "this deployment's API cannot reach its dead-letter queues")
        return found

    def caller_for(team: str | None) -> None:
        if team is None:
            access.admin()  # every team's messages: the platform's
        else:
            access.member(team)

    @router.get("/dlq", operation_id="listDeadLetters", tags=["admin"], summary="The dead-letter queues' messages")
    def list_dead_letters(
        team: Annotated[str | None, Query(pattern=NAME.pattern, description="only this team's")] = None,
    ) -> list[QueueLettersView]:
        caller_for(team)
        return [
            QueueLettersView(
                queue=found.queue,
                approximate=found.approximate,
                read=found.read,
                by_team=dict(found.by_team),
                samples=[DeadLetterSample.model_validate(sample) for sample in found.samples],
            )
            for found in box().listing(team=team)
        ]

    @router.post(
        "/dlq/<queue>/redrive",
        operation_id="redriveDeadLetters",
        tags=["admin"],
        summary="Send a dead-letter queue's messages (a team's) back where they came from",
    )
    def redrive(queue: Annotated[str, QUEUE], body: Annotated[RedriveRequest, Body()]) -> RedriveView:
        caller_for(body.team)
        done = box().redrive(queue, team=body.team, limit=body.max)
        return RedriveView(queue=done.queue, moved=done.moved, left=done.left)

    return router
