"""Where a move stands: the new Jobs table's item pk=TABLE_MOVE, read at most once a minute by each process.

A move is announced ahead (``moving_from``): every process reads the phase at least once a minute, so each knows
the instant before it comes and switches to moving at that instant, whatever it cached. Modes only go forward in a
process: an old item found marked proves the move has started, whatever a stale read says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import from_item, is_conditional_failure, to_item, to_values
from jobsched.core.names import TABLE_MOVE, JobsKeys

PHASE_CACHE = timedelta(seconds=60)  # deployed; the local runtime, one process, reads it every second
# How far ahead a move is announced: longer than a process may go without reading the phase, plus a write's retries.
LEAD = PHASE_CACHE + timedelta(seconds=30)
# How long after the move begins (and after it is done) no process can still act on the phase before: the copier
# waits that long before its pass (and before removing tombstones).
SETTLE = PHASE_CACHE + timedelta(seconds=30)


class Mode(IntEnum):
    OLD = 0  # every key is in the old tables; writes there carry a guard against a key already moved
    MOVING = 1  # a key moves on first touch; queries read both tables
    DONE = 2  # every key is in the new tables
    CLEAN = 3  # and no tombstone is left: calls go to the new tables as they are


@dataclass(frozen=True)
class MovePhase:
    phase: str  # "moving" | "done" | "clean" (tombstones removed)
    moving_from: datetime
    done_at: datetime | None = None
    cursors: dict[str, str] = field(default_factory=dict)  # table -> the copier's scan cursor ("done" when through)
    settle: timedelta = SETTLE  # as announced (the local runtime's processes read the phase every second)
    version: int = 0  # each write's condition: two copiers at once never set an older phase over a newer one

    def mode(self, now: datetime) -> Mode:
        if now < self.moving_from:
            return Mode.OLD
        return {"moving": Mode.MOVING, "done": Mode.DONE}.get(self.phase, Mode.CLEAN)

    def values(self) -> dict[str, Any]:
        return {
            JobsKeys.PK: TABLE_MOVE,
            JobsKeys.SK: TABLE_MOVE,
            "phase": self.phase,
            "moving_from": self.moving_from.isoformat(),
            "done_at": self.done_at.isoformat() if self.done_at else None,
            "cursors": dict(self.cursors),
            "settle_seconds": int(self.settle.total_seconds()),
            "version": self.version,
        }

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> MovePhase:
        done_at = values.get("done_at")
        return cls(
            phase=str(values["phase"]),
            moving_from=datetime.fromisoformat(values["moving_from"]),
            done_at=datetime.fromisoformat(done_at) if done_at else None,
            cursors={str(k): str(v) for k, v in (values.get("cursors") or {}).items()},
            settle=timedelta(seconds=int(values.get("settle_seconds", SETTLE.total_seconds()))),
            version=int(values.get("version", 0)),
        )


def phase_key() -> dict[str, Any]:
    return to_item({JobsKeys.PK: TABLE_MOVE, JobsKeys.SK: TABLE_MOVE})


def read_phase(db: Any, jobs_table: str) -> MovePhase | None:
    item = db.get_item(TableName=jobs_table, Key=phase_key(), ConsistentRead=True).get("Item")
    return MovePhase.from_values(from_item(item)) if item else None


def write_phase(db: Any, jobs_table: str, phase: MovePhase) -> MovePhase:
    """Store ``phase`` over the version it was read at (the first: over none); raises a conditional failure if
    another copier wrote since."""
    written = replace(phase, version=phase.version + 1)
    if phase.version == 0:
        condition: dict[str, Any] = {
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": JobsKeys.PK},
        }
    else:
        condition = {
            "ConditionExpression": "#version = :version",
            "ExpressionAttributeNames": {"#version": "version"},
            "ExpressionAttributeValues": to_values({":version": phase.version}),
        }
    db.put_item(TableName=jobs_table, Item=to_item(written.values()), **condition)
    return written


class PhaseReader:
    """The process's view of the move's mode: the phase item read at most every ``PHASE_CACHE``.

    A stage installed with this layout has nothing to move: with no phase and the previous tables empty, the first
    process to look records the move as clean (a stage deployed before has items there: the sweeper's state if
    nothing else, written every minute)."""

    def __init__(
        self,
        db: Any,
        jobs_table: str,
        clock: Callable[[], datetime],
        previous_tables: Sequence[str] = (),
        cache: timedelta = PHASE_CACHE,
    ) -> None:
        self._db = db
        self._cache = cache
        self._jobs_table = jobs_table
        self._previous_tables = tuple(previous_tables)
        self._clock = clock
        self._lock = threading.Lock()
        self._phase: MovePhase | None = None
        self._read_at: datetime | None = None
        self._floor = Mode.OLD

    def mode(self) -> Mode:
        now = self._clock()
        with self._lock:
            if self._read_at is None or now - self._read_at >= self._cache:
                self._phase = read_phase(self._db, self._jobs_table) or self._nothing_to_move(now)
                self._read_at = now
            found = self._phase.mode(now) if self._phase else Mode.OLD
            self._floor = max(self._floor, found)
            return self._floor

    def _nothing_to_move(self, now: datetime) -> MovePhase | None:
        if not self._previous_tables:
            return None
        for table in self._previous_tables:
            if self._db.scan(TableName=table, Limit=1, ConsistentRead=True).get("Items"):
                return None
        try:
            return write_phase(self._db, self._jobs_table, MovePhase("clean", moving_from=now, done_at=now))
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            return read_phase(self._db, self._jobs_table)

    def settled(self) -> bool:
        """No write begun the old way can still land: the move began its ``settle`` ago (as last read)."""
        phase = self._phase
        return phase is not None and self._clock() >= phase.moving_from + phase.settle

    def saw_moved_key(self) -> None:
        """An old item carries the mark: the move is on, whatever this process read of the phase."""
        with self._lock:
            self._floor = max(self._floor, Mode.MOVING)
