"""The work a schedule may cost between two fires: a budget of candidate instants, spent by the engine and by the
blackouts' windows, and the error when a schedule would spend more."""

from __future__ import annotations

from datetime import datetime


class ScheduleTooExpensive(Exception):
    """Finding the next fire would examine more than the step limit: the schedule costs unbounded work."""

    def __init__(self, limit: int, after: datetime) -> None:
        super().__init__(
            f"after {after.isoformat()} the schedule examines more than {limit} candidate instants without "
            "firing (a long blackout or calendar exclusion over a frequent expression); shorten the blackout, "
            "or use an expression that does not fire inside it"
        )
        self.limit = limit


class StepBudget:
    """Steps spent since the last fire; reset by each fire."""

    def __init__(self, limit: int, after: datetime) -> None:
        self.limit, self.after, self.spent = limit, after, 0

    def spend(self, steps: int = 1) -> None:
        self.spent += steps
        if self.spent > self.limit:
            raise ScheduleTooExpensive(self.limit, self.after)

    def fired(self, at: datetime) -> None:
        self.spent, self.after = 0, at
