"""Executing one attempt, the same way for a run and for a DAG task.

1. the target's circuit is asked first: an open one holds the attempt back before anything is written;
2. the attempt is claimed (the caller's claim: ``claiming.Claims.claim`` for a run, ``TaskRunsPort.claim_task``
   for a DAG task), one claimer per attempt;
3. the target is executed with the attempt's context (the idempotency key is run id + task + attempt);
4. the result is counted on the circuit.
What the result means (finish, retry, fail) is the caller's to record: ``recording`` for runs,
``dag_tasks`` for tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from jobsched.core.outcome import Outcome
from jobsched.core.records import RunContext, TargetResult
from jobsched.ports import TargetsPort
from jobsched.watch.breaker import Breakers

Claimed = TypeVar("Claimed")


@dataclass(frozen=True)
class Held:
    """The target's circuit is open: nothing was claimed or written; ``outcome`` says when to come back."""

    outcome: Outcome


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
        team: str,
        now: datetime,
        *,
        claim: Callable[[], Claimed | Outcome],
        context: Callable[[Claimed], RunContext],
        steps: AttemptSteps = AttemptSteps(),
    ) -> Executed[Claimed] | Held | Outcome:
        """Held (circuit open), the claim's own outcome when it did not claim (or claimed and handed the attempt
        on, as a DAG job's start does), or the executed attempt with its result."""
        key, breaker, held = self.breakers.check(target, team, now)
        if held is not None:
            return Held(held)
        claimed = claim()
        if isinstance(claimed, Outcome):
            return claimed
        self.after_step(steps.claimed)
        result = self.targets.execute(target, context(claimed))
        self.after_step(steps.executed)
        self.breakers.record(key, breaker, result)
        return Executed(claimed, result)
