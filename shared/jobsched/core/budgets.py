"""A team's monthly budget (and, optionally, a job's): warn thresholds that page, a hard threshold that pauses the
team's non-critical jobs (or the job) with the reason, until a platform admin resumes them. Pure: a budget, the
month's bill (``planning.chargeback``) and what already happened this month in, what to do now out.

Thresholds are fractions of the budget (0.8: at 80 %). Each fires once a month; a new month starts clean, but jobs a
hard threshold paused stay paused until an admin resumes them (the bill that paused them is real). Critical-tier
jobs are never paused by a budget: their page says so instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field, model_validator

from jobsched.core.spec.base import Name, StrictModel, _fail
from jobsched.core.spec.policies import Escalation

MAX_BUDGET_USD = 10_000_000.0


class Budget(StrictModel):
    monthly_usd: float = Field(gt=0, le=MAX_BUDGET_USD, description="the team's monthly budget, USD")
    warn_at: list[Annotated[float, Field(gt=0, lt=10)]] = Field(
        default_factory=lambda: [0.8], max_length=5, description="fractions that page (0.8: at 80 %)"
    )
    hard_at: float | None = Field(
        default=1.0, gt=0, le=10, description="the fraction that pauses the team's non-critical jobs (None: never)"
    )
    jobs: dict[Name, Annotated[float, Field(gt=0, le=MAX_BUDGET_USD)]] = Field(
        default_factory=dict, max_length=100, description="a job's own monthly budget, USD (team/name by name)"
    )
    escalation: Escalation | None = Field(
        default=None, description="where its pages go (absent: the deployment's escalation topic)"
    )

    @model_validator(mode="after")
    def _thresholds(self) -> Budget:
        if any(not 0 < fraction < 10 for fraction in self.warn_at):
            raise _fail("invalid_threshold", "warn_at: fractions of the budget, above 0 (0.8 is 80 %)")
        if self.hard_at is not None and any(fraction >= self.hard_at for fraction in self.warn_at):
            raise _fail("invalid_threshold", "warn_at must be below hard_at: a warning comes before the stop")
        if any(value <= 0 for value in self.jobs.values()):
            raise _fail("invalid_threshold", "a job's budget is above 0 USD")
        self.warn_at = sorted(set(self.warn_at))
        return self


@dataclass
class BudgetState:
    """What a team's budget did in one month: the thresholds that fired (team-wide, and per job), and the jobs it
    paused (until an admin resumes them)."""

    month: str
    warned: list[float] = field(default_factory=list)
    hard: bool = False
    job_warned: dict[str, list[float]] = field(default_factory=dict)
    job_hard: list[str] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)
    version: int = 0

    def as_values(self) -> dict[str, Any]:
        return {
            "month": self.month,
            "warned": self.warned,
            "hard": self.hard,
            "job_warned": self.job_warned,
            "job_hard": self.job_hard,
            "paused": self.paused,
        }

    @classmethod
    def from_values(cls, values: dict[str, Any], version: int) -> BudgetState:
        return cls(
            month=str(values["month"]),
            warned=[float(v) for v in values.get("warned") or []],
            hard=bool(values.get("hard")),
            job_warned={k: [float(v) for v in vs] for k, vs in (values.get("job_warned") or {}).items()},
            job_hard=list(values.get("job_hard") or []),
            paused=list(values.get("paused") or []),
            version=version,
        )


@dataclass(frozen=True)
class Crossing:
    """A threshold crossed for the first time this month."""

    subject: str  # the team, or team/name for a job's own budget
    fraction: float
    spent: float
    budget: float
    hard: bool

    def message(self, month: str) -> str:
        what = "hard limit" if self.hard else "warning"
        return (
            f"{self.subject} spent ${self.spent:,.2f} of its ${self.budget:,.2f} budget for {month} "
            f"({self.spent / self.budget:.0%}; {what} at {self.fraction:.0%})"
        )


def crossings(
    team: str, budget: Budget, state: BudgetState, spent: float, spent_by_job: dict[str, float]
) -> list[Crossing]:
    """The thresholds ``spent`` (and each job's: ``spent_by_job`` by team/name) crossed that have not fired this
    month, lowest first; a hard one after the warnings it passed."""
    found = [
        Crossing(team, fraction, spent, budget.monthly_usd, False)
        for fraction in budget.warn_at
        if spent >= fraction * budget.monthly_usd and fraction not in state.warned
    ]
    if budget.hard_at is not None and spent >= budget.hard_at * budget.monthly_usd and not state.hard:
        found.append(Crossing(team, budget.hard_at, spent, budget.monthly_usd, True))
    for name, limit in sorted(budget.jobs.items()):
        job = f"{team}/{name}"
        used = spent_by_job.get(job, 0.0)
        found += [
            Crossing(job, fraction, used, limit, False)
            for fraction in budget.warn_at
            if used >= fraction * limit and fraction not in state.job_warned.get(job, [])
        ]
        if budget.hard_at is not None and used >= budget.hard_at * limit and job not in state.job_hard:
            found.append(Crossing(job, budget.hard_at, used, limit, True))
    return found


BUDGET_SUBJECT_PREFIX = "BUDGET#"


def budget_subject(team: str) -> str:
    """The incident subject of a team's budget (a job's own budget pages as the job)."""
    return BUDGET_SUBJECT_PREFIX + team
