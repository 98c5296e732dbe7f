"""Ports of what the platform operates around runs: the SLO ledger, usage and budgets, paging drills, emergency
stops and the dead-letter queues."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from jobsched.core.slo import RunCount, SloDay
from jobsched.core.stops import Stop


class BudgetsPort(Protocol):
    """Teams' budgets (``core.budgets``, one document each, read all at once) and what each did in a month."""

    def put_budget(self, team: str, budget: dict[str, Any] | None) -> None: ...
    def budgets(self) -> dict[str, dict[str, Any]]: ...
    def budget_state(self, team: str, month: str) -> tuple[dict[str, Any] | None, int]:
        """The month's state as stored, and its version (0: none yet)."""
        ...

    def put_budget_state(self, team: str, month: str, values: dict[str, Any], *, expected_version: int) -> bool:
        """Store it only if its version is still ``expected_version``; False when another wrote it first."""
        ...


class SloLedgerPort(Protocol):
    """A team's SLO ledger (``core.slo``): each ended run adds to its job's item of the day (the usage item: one
    write with the attempt's usage), a tier's day is the sum of the team's jobs under that tier."""

    def count_run(self, team: str, tier: str, day: date, count: RunCount, *, job: str) -> None:
        """Add ``count`` to ``job``'s (``team/name``) item of ``day``, under ``tier``."""
        ...

    def slo_days(self, team: str, tier: str, first: date, last: date) -> list[SloDay]: ...
    def note_team_day(self, team: str, day: date) -> None:
        """``team`` had counted events on ``day`` (idempotent)."""
        ...

    def teams_between(self, first: date, last: date) -> set[str]:
        """The teams with counted events on any day from ``first`` to ``last``."""
        ...


@dataclass(frozen=True)
class UsageDay:
    """One job's usage on one UTC day (``core.usage`` counters), with the tier and target type it ran under."""

    job: str
    day: date
    tier: str
    target_type: str
    counters: dict[str, float]


class UsagePort(Protocol):
    """Usage counters, one item per team, job and day (``core.usage``): added to, read a team's range at a time."""

    def add_usage(
        self,
        team: str,
        job: str,
        day: date,
        counters: dict[str, float],
        *,
        tier: str,
        target_type: str | None = None,
        count: RunCount | None = None,
    ) -> None:
        """Add ``counters`` (and a run's end, ``count``, for its SLO ledger: one write) to the job's day item."""
        ...

    def usage_between(self, team: str, first: date, last: date) -> list[UsageDay]:
        """Every job's days from ``first`` to ``last`` (inclusive)."""
        ...


class DrillsPort(Protocol):
    """A team's paging drills: the last outcome per destination address (``paging.drills``)."""

    def record_drills(self, team: str, verified: dict[str, dict[str, str]]) -> None: ...
    def drills(self, team: str) -> dict[str, dict[str, str]]: ...


class StopsPort(Protocol):
    """Emergency stops kept on the Jobs table (one item each)."""

    def put_stop(self, stop: Stop) -> None: ...
    def get_stop(self, stop_id: str) -> Stop | None: ...
    def resume_stop_once(self, stop: Stop) -> bool:
        """Store ``stop`` as resumed, only if it was not resumed yet; False when it was."""
        ...


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    receipt: str
    body: str
    receives: int


class DeadLettersPort(Protocol):
    """The deployment's dead-letter queues by name (``pipeline.dead_letters.QUEUES``)."""

    def names(self) -> tuple[str, ...]:
        """The dead-letter queues this deployment has (of ``pipeline.dead_letters.QUEUES``)."""
        ...

    def count(self, queue: str) -> int: ...
    def receive(self, queue: str, *, max_messages: int, hold: timedelta) -> list[DeadLetter]:
        """Up to ``max_messages`` (≤ 10), out of sight for ``hold`` (0: visible again at once)."""
        ...

    def delete(self, queue: str, letters: Sequence[DeadLetter]) -> None: ...
    def release(self, queue: str, letters: Sequence[DeadLetter]) -> None:
        """Visible again at once."""
        ...


@dataclass(frozen=True)
class ExpiredPage:
    """One page of a sweep pass over a table: the keys of items whose expiry has passed, how many items the page
    read, and where the pass goes on (None: the pass has read the whole table)."""

    keys: list[dict[str, Any]]
    scanned: int
    cursor: str | None


@dataclass(frozen=True)
class SweepState:
    """Where a table's sweep pass has got to (None: between passes), and when the next pass may start."""

    cursor: str | None = None
    next_pass_at: datetime | None = None


class ExpiredItemsPort(Protocol):
    """Retention without TTL (#51: a table with multi-Region strong consistency has none): the hot tables read a
    page at a time for items whose ``expires_at`` has passed, deleted only while it still has."""

    def tables(self) -> tuple[str, ...]:
        """The tables swept, by logical name."""
        ...

    def expired_page(self, table: str, *, cursor: str | None, now: datetime, limit: int) -> ExpiredPage: ...
    def delete_expired(self, table: str, keys: Sequence[dict[str, Any]], *, now: datetime) -> int:
        """Delete each item whose expiry is still past (one conditional write each); returns how many went."""
        ...

    def sweep_state(self, table: str) -> SweepState: ...
    def save_sweep_state(self, table: str, state: SweepState) -> None: ...
