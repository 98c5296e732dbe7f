"""Circuit breakers per (team, target), across a team's jobs: after K consecutive failures of one target that
say it is unwell (timeouts, throttles, 5xx, refused connections; never a job's own errors), that team's runs
that would call it wait for a cool-down instead of piling onto it; the first failure that opens it is
escalated once, and the first success after it closes resolves that incident. Keyed by team too, so one
team's failing jobs against a shared endpoint never hold another team's runs; a job may keep a breaker of its
own (``circuit_breaker: job``) or none (``off``).

Half-open: once the cool-down has passed, runs go through again; a failure re-opens the breaker at once
(without a new page), a success closes it. An admin may close one by hand (audited).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from jobsched.core.names import TARGET_PREFIX
from jobsched.core.outcome import Outcome
from jobsched.core.records import BreakerState, breaker_team
from jobsched.core.run_records import TargetResult
from jobsched.core.runs import instant_text
from jobsched.core.spec import (
    EXTERNAL_TARGETS,
    EventBridgeTarget,
    HttpTarget,
    JobSpec,
    LambdaTarget,
    SqsTarget,
    StepFunctionsTarget,
)
from jobsched.paging.escalation_events import Alerts, EscalationEvent
from jobsched.ports import JobsPort

FAILURES_TO_OPEN = 5
COOL_DOWN = timedelta(minutes=5)


def breaker_owner(spec: JobSpec) -> str | None:
    """Whose failures count together: the team's jobs' ("team"), the job's own ("team/job"), or none."""
    if spec.circuit_breaker == "off":
        return None
    return spec.team if spec.circuit_breaker == "team" else f"{spec.team}/{spec.name}"


def target_key(target: Any, owner: str | None) -> str | None:
    """What one breaker guards: an owner's (``breaker_owner``) calls to a function, queue, state machine, event
    bus or HTTP origin. None: no breaker (the job opted out, or callbacks report from outside: nothing to hold)."""
    if owner is None:
        return None
    if isinstance(target, LambdaTarget):
        return f"{owner}:lambda:{target.function}"
    if isinstance(target, SqsTarget):
        return f"{owner}:sqs:{target.queue_url}"
    if isinstance(target, StepFunctionsTarget):
        return f"{owner}:states:{target.state_machine_arn}"
    if isinstance(target, EventBridgeTarget):
        return f"{owner}:events:{target.bus}"
    if isinstance(target, HttpTarget):
        parts = urlsplit(str(target.url))
        return f"{owner}:http:{parts.scheme}://{parts.netloc}"
    if isinstance(target, EXTERNAL_TARGETS):
        return None  # their results come later, from outside: there is no call whose failures a circuit counts
    raise TypeError(f"unknown target {type(target).__name__}")


def guarded(key: str) -> str:
    """What a breaker guards, without its owner: "lambda:nightly-export"."""
    return key.split(":", 1)[1]


def circuit_event(
    kind: str, key: str, now: datetime, *, failures: int = 0, error: str | None = None, detail: str | None = None
) -> EscalationEvent:
    opened = kind == "circuit_open"
    return EscalationEvent(
        kind="circuit_open" if opened else "circuit_closed",
        subject=TARGET_PREFIX + key,
        team=breaker_team(key),
        occurred_at=instant_text(now),
        scheduled_at=instant_text(now),
        target=key,
        count=failures or 1,
        error=error,
        detail=detail
        or (
            f"{failures} consecutive failures that say it is unwell: runs calling it wait {COOL_DOWN} before trying"
            " again"
            if opened
            else "a run succeeded against it again"
        ),
    )


BREAKER_MARGIN = timedelta(seconds=1)  # a held run comes back just after the cool-down ends


@dataclass
class Breakers:
    """The worker's and the DAG runner's view of the breakers: hold a run, count a result."""

    jobs: JobsPort
    alerts: Alerts
    clock: Callable[[], datetime]
    failures_to_open: int = FAILURES_TO_OPEN
    cool_down: timedelta = COOL_DOWN
    known: dict[str, BreakerState] = field(default_factory=dict)  # read already, by a worker batch

    def check(self, target: Any, owner: str | None, now: datetime) -> tuple[str | None, BreakerState, Outcome | None]:
        """The owner's breaker for the target (one eventually consistent read, unless a worker batch read it
        with the others of its targets); an Outcome to wait if open."""
        key = target_key(target, owner) if target is not None else None
        state = (self.known[key] if key in self.known else self.jobs.breaker(key)) if key else BreakerState()
        if not state.holds(now):
            return key, state, None
        assert key is not None and state.open_until is not None
        wait = state.open_until - now + BREAKER_MARGIN
        held = f"held: circuit open until {instant_text(state.open_until)} ({guarded(key)})"
        return key, state, Outcome("waiting", held, wait=wait)

    def holding(self, key: str, held: str) -> None:
        """Name a run ("team/job/run id") or task ("…#task") on the breaker that holds it back."""
        self.jobs.breaker_holds(key, held)

    def close(self, key: str, *, by: str, reason: str) -> tuple[str, ...] | None:
        """An admin closes the breaker by hand (audited: who and why); its incident resolves. What it held
        (to send now), or None: it was not open."""
        now = self.clock()
        held = self.jobs.breaker(key).held
        if not self.jobs.close_breaker(key, by=by, reason=reason, now=now):
            return None
        self.alerts.publish(circuit_event("circuit_closed", key, now, detail=f"closed by {by}: {reason}"))
        return held

    def record(self, key: str | None, before: BreakerState, result: TargetResult) -> None:
        """Count a target's failure towards its breaker (escalated once when it opens); a success after
        failures closes it. Only failures that say the target is unwell count: an exception the job's code
        raised, or a 4xx, says this job's work failed, not that the target is down."""
        if key is None:
            return
        now = self.clock()
        if result.outcome == "failed" and result.unhealthy:
            change = self.jobs.breaker_failed(key, now=now, threshold=self.failures_to_open, cool_down=self.cool_down)
            if change is not None and key in self.known:
                # The rest of the batch that read it closed holds back from now on, as a fresh read would.
                self.known[key] = BreakerState(self.failures_to_open, now + self.cool_down)
            if change == "opened":
                self.alerts.publish(
                    circuit_event("circuit_open", key, now, failures=self.failures_to_open, error=result.error)
                )
        elif result.outcome == "succeeded" and before.failures and self.jobs.breaker_succeeded(key):
            self.alerts.publish(circuit_event("circuit_closed", key, now))
