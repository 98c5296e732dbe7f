"""The move's driver: announce it, copy every old item a page at a time, say it is done, then clear tombstones.

Every step is resumable (its cursors live in the phase item, written after each page) and idempotent (a page read
again moves nothing twice: ``MovingClient.move`` is). A pass runs once the announced instant is the phase's
``settle`` behind (no old-mode write is still under way); a pass that finds nothing left to move ends a table's
move; tombstones are removed ``settle`` after the move is done, when no process can still be moving.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import from_item, is_conditional_failure, to_item
from jobsched.adapters.aws.moves.client import MovingClient
from jobsched.adapters.aws.moves.phase import LEAD, SETTLE, MovePhase, read_phase, write_phase
from jobsched.adapters.aws.moves.requests import TablePair, unmoved
from jobsched.core.names import MOVE_TOMBSTONE

PAGE = 200


@dataclass(frozen=True)
class Step:
    """What one call of ``TableMover.step`` did, for the command to print."""

    phase: str
    moved: int = 0
    removed: int = 0
    table: str | None = None
    wait_until: datetime | None = None  # nothing to do before then


class TableMover:
    def __init__(self, client: MovingClient, db: Any, pairs: Sequence[TablePair], jobs_table: str) -> None:
        self._client = client  # its ``move``: the same three writes a process makes on first touch
        self._db = db
        self._pairs = list(pairs)
        self._jobs_table = jobs_table

    def phase(self) -> MovePhase | None:
        return read_phase(self._db, self._jobs_table)

    def announce(self, now: datetime, lead: timedelta = LEAD, settle: timedelta = SETTLE) -> MovePhase:
        """Start the move ``lead`` from now (the one already announced, if any)."""
        cursors = {pair.old: "" for pair in self._pairs}
        phase = MovePhase("moving", moving_from=now + lead, cursors=cursors, settle=settle)
        try:
            write_phase(self._db, self._jobs_table, phase)
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
        found = self.phase()
        assert found is not None
        return found

    def step(self, now: datetime, page: int = PAGE) -> Step:
        """One page of work (or none, saying until when to wait)."""
        phase = self.phase()
        if phase is None:
            return Step("not started")
        if phase.phase == "clean":
            return Step("clean")
        if phase.phase == "done":
            if now < (phase.done_at or now) + phase.settle:
                return Step("done", wait_until=(phase.done_at or now) + phase.settle)
            return self._clear_tombstones(phase, page)
        if now < phase.moving_from + phase.settle:
            return Step("moving", wait_until=phase.moving_from + phase.settle)
        for pair in self._pairs:
            cursor = phase.cursors.get(pair.old, "")
            if cursor != "done":
                return self._copy_page(phase, pair, cursor, page)
        return self._finish_pass(phase, now)

    def _copy_page(self, phase: MovePhase, pair: TablePair, cursor: str, page: int) -> Step:
        """Move one page of the old table's unmoved items. A pass ends where the scan does; the move of a table is
        through after a pass that found nothing left to move (normally the second)."""
        state: dict[str, Any] = json.loads(cursor) if cursor else {"pass": 1, "at": None, "found": 0}
        request = unmoved({"TableName": pair.old, "Limit": page, "ConsistentRead": True})
        if state["at"]:
            request["ExclusiveStartKey"] = to_item(state["at"])
        answer = self._db.scan(**request)
        items = answer.get("Items", [])
        for item in items:
            self._client.move(pair, pair.key_of(item))
        found = state["found"] + len(items)
        following = answer.get("LastEvaluatedKey")
        if following:
            next_cursor = json.dumps({"pass": state["pass"], "at": from_item(following), "found": found})
        elif found:
            next_cursor = json.dumps({"pass": state["pass"] + 1, "at": None, "found": 0})
        else:
            next_cursor = "done"
        self._save(phase, pair.old, next_cursor)
        return Step("moving", moved=len(items), table=pair.old)

    def _save(self, phase: MovePhase, table: str, cursor: str) -> None:
        write_phase(self._db, self._jobs_table, replace(phase, cursors=dict(phase.cursors) | {table: cursor}))

    def _finish_pass(self, phase: MovePhase, now: datetime) -> Step:
        write_phase(self._db, self._jobs_table, replace(phase, phase="done", done_at=now))
        return Step("done", wait_until=now + phase.settle)

    def _clear_tombstones(self, phase: MovePhase, page: int) -> Step:
        for pair in self._pairs:
            cursor = phase.cursors.get(pair.new, "")
            if cursor == "done":
                continue
            request: dict[str, Any] = {
                "TableName": pair.new,
                "Limit": page,
                "FilterExpression": "attribute_exists(#gone)",
                "ExpressionAttributeNames": {"#gone": MOVE_TOMBSTONE},
            }
            if cursor:
                request["ExclusiveStartKey"] = to_item(json.loads(cursor))
            answer = self._db.scan(**request)
            removed = 0
            for item in answer.get("Items", []):
                try:
                    self._db.delete_item(
                        TableName=pair.new,
                        Key=pair.key_of(item),
                        ConditionExpression="attribute_exists(#gone)",
                        ExpressionAttributeNames={"#gone": MOVE_TOMBSTONE},
                    )
                    removed += 1
                except ClientError as error:
                    if not is_conditional_failure(error):
                        raise
            following = answer.get("LastEvaluatedKey")
            next_cursor = json.dumps(from_item(following), sort_keys=True, default=str) if following else "done"
            self._save(phase, pair.new, next_cursor)
            return Step("done", removed=removed, table=pair.new)
        write_phase(self._db, self._jobs_table, replace(phase, phase="clean"))
        return Step("clean")
