"""What the health routes return: a job's outcomes (``watch.health``), its freshness (``core.freshness``) and its
learned baseline (``core.baseline``); a team's jobs worst first, each with its line of the freshness board."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from jobsched.core.freshness import FreshnessPolicy
from jobsched.core.health import HealthItem
from jobsched.core.runs import instant_text
from jobsched.watch.health import JobHealth


class FreshnessView(BaseModel):
    state: Literal["unknown", "fresh", "stale"] = Field(description="unknown until the first judgement")
    policy: str = Field(description='what the job promises, e.g. "a success within 24h before 09:00 Europe/London"')
    since: str | None = Field(default=None, description="when it went stale (or, on a team's page, became fresh)")
    reason: str | None = Field(default=None, description="why it is stale")
    last_success_at: str | None = None
    next_check_at: str | None = Field(default=None, description="the next judgement (none: stale until a success)")


class AnomalyView(BaseModel):
    run_id: str
    kind: Literal["slow", "fast", "late"]
    text: str = Field(description='e.g. "took 41 min, usual 6-9 min"')
    at: str


class BaselineView(BaseModel):
    samples: int = Field(description="recent runs the baseline holds (duration samples)")
    learning: bool = Field(description="too few runs yet to judge any")
    usual_duration: str | None = Field(default=None, description="10th to 90th percentile, this hour's if it has one")
    usual_lateness: str | None = None
    last_anomaly: AnomalyView | None = None


class JobHealthView(BaseModel):
    job: str
    state: Literal["ACTIVE", "PAUSED"]
    paused_reason: str | None = None
    window_days: float
    runs: int = Field(description="runs scheduled in the window, every status")
    success_rate: float | None = Field(
        description="succeeded / (succeeded + failed + timed out + missed) in the window; null if none ended"
    )
    strip: list[str] = Field(
        description="the last runs, oldest first: succeeded, retried, failed, timed_out, missed, skipped, "
        "cancelled, running, waiting"
    )
    lateness_p50_s: float | None = None
    lateness_p95_s: float | None = None
    duration_p50_s: float | None = None
    duration_p95_s: float | None = None
    streak: str | None = Field(default=None, description='the current run of one result, e.g. "3 failed"')
    next_fire: str | None = None
    open_incidents: list[str] = Field(description="incident classes open: failing, late, stale, anomaly, ...")
    freshness: FreshnessView | None = Field(default=None, description="with a freshness policy: fresh or stale")
    baseline: BaselineView | None = Field(default=None, description="what the job's own runs taught (a job's view)")


class TeamHealthPage(BaseModel):
    jobs: list[JobHealthView] = Field(description="this page of the team's jobs, worst first")
    next_token: str | None = None


def health_view(
    health: JobHealth,
    *,
    item: HealthItem | None = None,
    policy: FreshnessPolicy | None = None,
    board: dict[str, str] | None = None,
    zone: str = "UTC",
    now: datetime | None = None,
) -> JobHealthView:
    """A job's health; with its health ``item`` (a job's view) its freshness and baseline in full, with its
    ``board`` line (a team's page) its freshness as the team's board has it."""
    view = JobHealthView.model_validate(asdict(health))
    if item is not None and item.freshness is not None and policy is not None:
        fresh = item.freshness
        view.freshness = FreshnessView(
            state=fresh.state.value,
            policy=policy.describe(),
            since=_text(fresh.stale_since),
            reason=fresh.reason,
            last_success_at=_text(fresh.last_success_at),
            next_check_at=_text(fresh.check_at),
        )
    elif board is not None:
        view.freshness = FreshnessView.model_validate(board, strict=False)
    if item is not None and item.baseline is not None:
        usual = item.baseline.usual(zone, now)
        last = item.baseline.last_anomaly
        view.baseline = BaselineView(
            samples=usual["samples"],
            learning=usual["learning"],
            usual_duration=usual["duration"],
            usual_lateness=usual["lateness"],
            last_anomaly=AnomalyView.model_validate(last) if last else None,
        )
    return view


def _text(value: datetime | None) -> str | None:
    return instant_text(value) if value is not None else None
