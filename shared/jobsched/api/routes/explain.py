"""Why did (or will, or didn't) a job run at an instant: ``GET /teams/{team}/jobs/{name}/explain?at=…``."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, Field

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.models import RunView
from jobsched.api.views import run_view
from jobsched.core.runs import instant_text
from jobsched.watch.explain import NotAnInstant, explanation_for


class InstantAnswerView(BaseModel):
    at: str = Field(description="the instant, UTC (a scheduled run's id is made of it)")
    wall: str = Field(description="the instant as the job's timezone shows it")
    verdict: str = Field(
        description="ran, failed, running, waiting, held, skipped, missed, cancelled, will-fire, will-not-fire,"
        " not-scheduled, no-record"
    )
    why: list[str] = Field(description="the reasons, most decisive last")
    run: RunView | None = Field(default=None, description="the scheduled run of that instant, if it has one")
    other_runs: list[RunView] = Field(default_factory=list, description="runs triggered in the same second")


class ExplanationView(BaseModel):
    job: str
    asked: str
    timezone: str
    notes: list[str] = Field(description="how the asked time was read (a DST gap, a wall time that occurs twice)")
    answers: list[InstantAnswerView]
    next_fire: str | None = Field(description="the job's next fire from now (none while paused)")


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.get(
        "/teams/<team>/jobs/<name>/explain",
        operation_id="explainInstant",
        tags=["health"],
        summary="Why a job ran, will run, or did not run at an instant (past or future)",
    )
    def explain_instant(
        team: str,
        name: str,
        at: Annotated[
            str,
            Query(
                min_length=10,
                max_length=40,
                description="an instant with its offset (2027-03-28T01:30:00Z) or a wall time in the job's"
                " timezone (2027-03-28T02:30)",
            ),
        ],
    ) -> ExplanationView:
        member(team)
        stored = existing(team, name)
        s = services()
        try:
            answer = explanation_for(s.jobs, s.runs, stored, at, s.clock())
        except NotAnInstant as refused:
            raise ApiError(422, "invalid_instant", str(refused), "at") from None
        return ExplanationView(
            job=answer.job,
            asked=answer.asked,
            timezone=answer.timezone,
            notes=answer.notes,
            answers=[
                InstantAnswerView(
                    at=instant_text(each.at),
                    wall=each.wall,
                    verdict=each.verdict,
                    why=each.why,
                    run=run_view(each.run, None) if each.run is not None else None,
                    other_runs=[run_view(run, None) for run in each.other_runs],
                )
                for each in answer.answers
            ],
            next_fire=instant_text(answer.next_fire) if answer.next_fire else None,
        )

    return router
