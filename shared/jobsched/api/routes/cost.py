"""Chargeback: what a team's jobs cost in a month (``planning.chargeback``), by job, tier or target type, the
scheduler's share apart from the targets', priced by the deployment's region's list prices."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, Field

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.planning.chargeback import Chargeback, chargeback, month_days

MONTH = Query(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="YYYY-MM (default: this month, UTC)")


class CostLineView(BaseModel):
    key: str = Field(description="the job, tier or target type")
    runs: int
    attempts: int
    scheduler_usd: float = Field(description="the scheduler's share: table units, queue requests, its functions")
    target_usd: float = Field(description="the targets' own, where their price is known (Lambda, Fargate, states)")
    total_usd: float


class ChargebackView(BaseModel):
    team: str
    month: str
    by: str
    prices: str = Field(description="the price table: region and date")
    scheduler_usd: float
    target_usd: float
    total_usd: float
    lines: list[CostLineView] = Field(description="most expensive first")


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member = access.services, access.member

    @router.get(
        "/teams/<team>/cost",
        operation_id="getTeamCost",
        tags=["cost"],
        summary="What the team's jobs cost in a month, by job, tier or target type (the scheduler's share apart)",
    )
    def team_cost(
        team: str,
        month: Annotated[str | None, MONTH] = None,
        by: Annotated[Literal["job", "tier", "target"], Query()] = "job",
    ) -> ChargebackView:
        member(team)
        month = month or services().clock().strftime("%Y-%m")
        try:
            month_days(month)
        except ValueError:
            raise ApiError(422, "invalid_month", "month: write YYYY-MM", "month") from None
        return view(chargeback(services().jobs, team, month, by=by, prices=services().prices))

    return router


def view(bill: Chargeback) -> ChargebackView:
    lines = [
        CostLineView(
            key=line.key,
            runs=line.runs,
            attempts=line.attempts,
            scheduler_usd=round(line.scheduler, 6),
            target_usd=round(line.target, 6),
            total_usd=round(line.total, 6),
        )
        for line in bill.lines
    ]
    return ChargebackView(
        team=bill.team,
        month=bill.month,
        by=bill.by,
        prices=bill.prices,
        scheduler_usd=round(bill.scheduler, 6),
        target_usd=round(bill.target, 6),
        total_usd=round(bill.total, 6),
        lines=lines,
    )
