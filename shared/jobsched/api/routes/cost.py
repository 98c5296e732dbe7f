"""Chargeback: what a team's jobs cost in a month (``planning.chargeback``), by job, tier or target type, the
scheduler's share apart from the targets', priced by the deployment's region's list prices."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, Field

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.routes.admin import TEAM, record_team_change
from jobsched.core.budgets import Budget
from jobsched.planning.budgets import BudgetWatch
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
    budget_usd: float | None = Field(default=None, description="the team's monthly budget (none: no budget)")
    lines: list[CostLineView] = Field(description="most expensive first")


class BudgetChangeView(BaseModel):
    team: str
    budget: dict[str, Any] | None = Field(description="the budget as stored (none: deleted)")


class BudgetResumedView(BaseModel):
    team: str
    resumed: list[str] = Field(description="the jobs a budget had paused, resumed now")


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
        bill = view(chargeback(services().jobs, team, month, by=by, prices=services().prices))
        budget = services().jobs.budgets().get(team)
        bill.budget_usd = float(budget["monthly_usd"]) if budget else None
        return bill

    @router.put(
        "/admin/teams/<team>/budget",
        operation_id="putTeamBudget",
        tags=["cost"],
        summary="Set a team's monthly budget: warn thresholds page, a hard one pauses its non-critical jobs",
    )
    def put_budget(team: Annotated[str, TEAM], body: Annotated[Budget, Body()]) -> BudgetChangeView:
        caller = access.admin()
        document = body.model_dump(mode="json", exclude_none=True)
        services().jobs.put_budget(team, document)
        record_team_change(access, team, caller.arn, "budget_set", {"budget": document})
        return BudgetChangeView(team=team, budget=document)

    @router.delete(
        "/admin/teams/<team>/budget",
        operation_id="deleteTeamBudget",
        tags=["cost"],
        summary="Delete a team's budget (jobs it paused stay paused until resumed)",
    )
    def delete_budget(team: Annotated[str, TEAM]) -> BudgetChangeView:
        caller = access.admin()
        services().jobs.put_budget(team, None)
        record_team_change(access, team, caller.arn, "budget_deleted", {})
        return BudgetChangeView(team=team, budget=None)

    @router.post(
        "/admin/teams/<team>/budget/resume",
        operation_id="resumeBudgetPaused",
        tags=["cost"],
        summary="Resume exactly the team's jobs a budget paused (each resume in the job's history)",
    )
    def resume_budget(team: Annotated[str, TEAM]) -> BudgetResumedView:
        caller = access.admin()
        now = services().clock()
        watch = BudgetWatch(services().jobs, lambda event: None, services().prices)
        resumed = watch.resume(team, principal=caller.arn, now=now)
        record_team_change(access, team, caller.arn, "budget_resumed", {"resumed": resumed})
        return BudgetResumedView(team=team, resumed=resumed)

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
