"""Circuit breakers per (team, target), across a team's jobs: after K consecutive failures of one target,
that team's runs that would call it wait for a cool-down instead of piling onto it; the first failure that
opens it is escalated once, and the first success after it closes resolves that incident. Keyed by team
too, so one team's failing jobs against a shared endpoint never hold another team's runs.

Half-open: once the cool-down has passed, runs go through again; a failure re-opens the breaker at once
(without a new page), a success closes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from jobsched.core.spec import (
    CallbackTarget,
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SqsTarget,
    StepFunctionsTarget,
)
from jobsched.pipeline.runs import instant_text
from jobsched.watch.escalation import TARGET_PREFIX, EscalationEvent

FAILURES_TO_OPEN = 5
COOL_DOWN = timedelta(minutes=5)


def target_key(target: Any, team: str) -> str | None:
    """What one breaker guards: a team's calls to a function, queue, state machine, event bus or HTTP
    origin. None: no breaker (callbacks report from outside; there is nothing to hold)."""
    if isinstance(target, LambdaTarget):
        return f"{team}:lambda:{target.function}"
    if isinstance(target, SqsTarget):
        return f"{team}:sqs:{target.queue_url}"
    if isinstance(target, StepFunctionsTarget):
        return f"{team}:states:{target.state_machine_arn}"
    if isinstance(target, EventBridgeTarget):
        return f"{team}:events:{target.bus}"
    if isinstance(target, HttpTarget):
        parts = urlsplit(str(target.url))
        return f"{team}:http:{parts.scheme}://{parts.netloc}"
    if isinstance(target, CallbackTarget):
        return None
    raise TypeError(f"unknown target {type(target).__name__}")


@dataclass(frozen=True)
class BreakerState:
    failures: int = 0
    open_until: datetime | None = None

    def holds(self, now: datetime) -> bool:
        return self.open_until is not None and self.open_until > now


def circuit_event(
    kind: str, key: str, now: datetime, *, failures: int = 0, error: str | None = None
) -> EscalationEvent:
    opened = kind == "circuit_open"
    return EscalationEvent(
        kind="circuit_open" if opened else "circuit_closed",
        subject=TARGET_PREFIX + key,
        team=key.split(":", 1)[0],
        occurred_at=instant_text(now),
        scheduled_at=instant_text(now),
        target=key,
        count=failures or 1,
        error=error,
        detail=(
            f"{failures} consecutive failures across jobs: runs calling it wait {COOL_DOWN} before trying again"
            if opened
            else "a run succeeded against it again"
        ),
    )
