"""A team's SLOs: per tier, the platform's objectives, the error budget left over the rolling window, how fast
it burns, the jobs that burn it most, and the window day by day; and its jobs' freshness. Read from the team's
ledger (at most the window's items a tier) and its freshness board (one item), never from its runs."""

from __future__ import annotations

from datetime import timedelta

from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, Field

from jobsched.api.access import Access
from jobsched.core.durations import format_duration
from jobsched.core.slo import TIERS, TierBudget, tier_budget


class ObjectiveView(BaseModel):
    success: float = Field(description="the share of counted runs that succeed")
    start_lateness: str = Field(description="a run that starts later than this is late")
    on_time: float = Field(description="the share of runs with a deadline that finish by it")


class BurningJobView(BaseModel):
    job: str
    bad: int = Field(description="its FAILED, TIMED_OUT and MISSED runs and stale judgements in the window")


class SloDayView(BaseModel):
    day: str
    runs: int
    bad: int


class TierView(BaseModel):
    tier: str
    objective: ObjectiveView
    runs: int = Field(description="runs counted in the window (cancelled and skipped ones are not)")
    bad: int
    late: int = Field(description="runs that started later than the tier's start lateness")
    past_deadline: int = Field(description="runs with a deadline that finished past it")
    judged: int = Field(description="freshness judgements in the window (events of the budget beside the runs)")
    stale: int = Field(description="judgements that found a job stale (bad events)")
    budget_left: float = Field(description="of the window's error budget: 1 untouched, 0 spent, below 0 overspent")
    burn_rate_1d: float = Field(description="how fast the last day spent it: 1 spends exactly the budget")
    burn_rate_7d: float
    burning: list[BurningJobView] = Field(description="the jobs that burn it most")
    days: list[SloDayView] = Field(description="the window, oldest first")


class FreshJobView(BaseModel):
    job: str
    state: str = Field(description="unknown (not judged yet), fresh or stale")
    policy: str
    since: str | None = None
    reason: str | None = None


class SloView(BaseModel):
    team: str
    window_days: int
    as_of: str = Field(description="the UTC day the window ends on (inclusive)")
    tiers: list[TierView]
    freshness: list[FreshJobView] = Field(description="the team's jobs with a freshness policy, stale first")


def tier_view(budget: TierBudget) -> TierView:
    objective = budget.objective
    return TierView(
        tier=budget.tier,
        objective=ObjectiveView(
            success=objective.success,
            start_lateness=format_duration(objective.start_lateness),
            on_time=objective.on_time,
        ),
        runs=budget.runs,
        bad=budget.bad,
        late=budget.late,
        past_deadline=budget.past_deadline,
        judged=budget.judged,
        stale=budget.stale,
        budget_left=budget.budget_left,
        burn_rate_1d=budget.burn_rate_1d,
        burn_rate_7d=budget.burn_rate_7d,
        burning=[BurningJobView(job=job, bad=bad) for job, bad in budget.top_jobs],
        days=[SloDayView(day=entry.day.isoformat(), runs=entry.ended, bad=entry.bad) for entry in budget.days],
    )


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member = access.services, access.member

    @router.get(
        "/teams/<team>/slo",
        operation_id="getSlo",
        tags=["health"],
        summary="The team's error budget per SLO tier: left, burn rate, the jobs burning it, day by day",
    )
    def get_slo(team: str) -> SloView:
        member(team)
        s = services()
        tiers = s.slo_tiers
        today = s.clock().date()
        first = today - timedelta(days=tiers.window_days - 1)
        views = [
            tier_view(tier_budget(tier, tiers, s.jobs.slo_days(team, tier, first, today), today=today))
            for tier in TIERS
        ]
        board = s.jobs.team_freshness(team)
        fresh = sorted(board.items(), key=lambda item: (item[1].get("state") != "stale", item[0]))
        return SloView(
            team=team,
            window_days=tiers.window_days,
            as_of=today.isoformat(),
            tiers=views,
            freshness=[FreshJobView(job=name, **line) for name, line in fresh],
        )

    return router
