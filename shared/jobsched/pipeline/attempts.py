"""Executing one attempt, the same way for a run and for a DAG task.

1. the target's circuit is asked first: an open one holds the attempt back before anything is written;
2. the attempt is claimed (the caller's claim: ``claiming.Claims.claim`` for a run, ``TaskRunsPort.claim_task``
   for a DAG task), one claimer per attempt;
3. the target is executed with the attempt's context (the idempotency key is run id + task + attempt);
4. the result is counted on the circuit, then judged by the job's or task's checks (``core.checks``).
What the result means (finish, retry, fail) is the caller's to record: ``recording`` for runs,
``pipeline.dag`` for tasks (its ``conductor`` and ``recording``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Generic, TypeVar

from jobsched.core.checks import CheckLike, evaluate
from jobsched.core.outcome import Outcome
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.ports import TargetsPort
from jobsched.watch.breaker import Breakers

Claimed = TypeVar("Claimed")


@dataclass(frozen=True)
class Held:
    """The target's circuit is open: nothing was claimed or written; ``outcome`` says when to come back."""

    outcome: Outcome
    breaker: str  # the key of the breaker that holds it


@dataclass(frozen=True)
class Executed(Generic[Claimed]):
    claimed: Claimed
    result: TargetResult


@dataclass(frozen=True)
class AttemptSteps:
    """The names the crash-injection hook hears after each step (tests stop a worker between two writes)."""

    claimed: str = "claim"
    executed: str = "execute"


@dataclass
class Attempts:
    targets: TargetsPort
    breakers: Breakers
    after_step: Callable[[str], None]

    def execute(
        self,
        target: Any,
        owner: str | None,
        now: datetime,
        *,
        claim: Callable[[], Claimed | Outcome],
        context: Callable[[Claimed], RunContext],
        steps: AttemptSteps = AttemptSteps(),
        checks: Sequence[CheckLike] = (),
        metered: Callable[[RunContext, TargetResult], None] | None = None,
    ) -> Executed[Claimed] | Held | Outcome:
        """Held (circuit open), the claim's own outcome when it did not claim (or claimed and handed the attempt
        on, as a DAG job's start does), or the executed attempt with its result. ``owner``: whose breaker
        guards the target (``breaker_owner``; None: none does)."""
        key, breaker, held = self.breakers.check(target, owner, now)
        if held is not None:
            assert key is not None
            return Held(held, key)
        claimed = claim()
        if isinstance(claimed, Outcome):
            return claimed
        self.after_step(steps.claimed)
        attempt = context(claimed)
        result = self.targets.execute(target, attempt)
        if metered is not None:
            metered(attempt, result)  # what the attempt used (pipeline.usage): written whatever its outcome
        self.after_step(steps.executed)
        self.breakers.record(key, breaker, result)  # the target's own answer: a failed check is not its fault
        return Executed(claimed, judge(result, checks))


# Outputs checked at once in one worker process (its batch runs on threads): parsing 1 MB of JSON can take
# 24 MB (a list of 350,000 ``{}``), so ten at once would fill a 256 MB worker every team shares.
CHECKS_AT_ONCE = threading.BoundedSemaphore(2)


def judge(result: TargetResult, checks: Sequence[CheckLike]) -> TargetResult:
    """A succeeded result with its checks applied: failed (not retried) when an error-severity check fails."""
    if result.outcome != "succeeded" or not checks:
        return result
    with CHECKS_AT_ONCE:
        results = evaluate(checks, result.body if result.body is not None else result.output)
    blocking = next((r for r in results if not r.passed and r.severity == "error"), None)
    if blocking is None:
        return replace(result, checks=results)
    return replace(
        result,
        outcome="failed",
        error=f"check {blocking.name} failed: {blocking.message}",
        retryable=False,
        checks=results,
    )
