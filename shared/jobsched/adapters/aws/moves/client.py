"""A DynamoDB client for a stage whose tables move: the calls jobsched's adapters make, each key moved on first touch.

The adapters name the new tables; this client decides where each call goes (``Mode``):
- OLD: to the old table, every write guarded by ``attribute_not_exists(move_mark)``: once a key has moved, a write
  there fails and is made again against the new table.
- MOVING: a call on a key first makes sure the key is in the new table (``ensure``): read it there strongly; if it
  is absent, mark the old item (``move_mark`` = copying: from then on no old-mode write succeeds on it, and a key
  that was absent gets a bare marked item, so no one creates it there either), copy what it held if absent from
  the new table, mark it copied. Then the call runs against the new table. A delete leaves a tombstone there (an
  old item copied but not yet marked copied would otherwise be copied back); a write over a tombstone passes or
  fails as over no item (``conditions.over_tombstone``). Queries and scans read the old table's unmarked items,
  then the new table's: an item may be listed twice while it moves (every write is conditional), never missed.
- DONE: to the new table only; tombstones still read as absent until the copier removes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import is_conditional_failure
from jobsched.adapters.aws.moves.conditions import grouped, over_tombstone
from jobsched.adapters.aws.moves.listing import Pages, UnionListing
from jobsched.adapters.aws.moves.phase import PHASE_CACHE, Mode, PhaseReader
from jobsched.adapters.aws.moves.requests import (
    COPIED,
    COPYING,
    GONE,
    MARK,
    REMOVE_CLAUSE,
    SIDE,
    TablePair,
    clean,
    is_tombstone,
    named,
    projecting,
    without_tombstones,
)
from jobsched.core.names import JOBS_TABLE, MOVE_MARK, MOVE_TOMBSTONE, RUNS_TABLE, Env, TableDefinition


class MovingClient:
    def __init__(self, db: Any, pairs: Sequence[TablePair], phases: PhaseReader) -> None:
        self._db = db
        self._pairs = {pair.new: pair for pair in pairs}
        self.phases = phases
        self._listings = UnionListing(db, self.move)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)  # every other call (and ``exceptions``) as the plain client

    def _route(self, table: str) -> tuple[TablePair | None, Mode]:
        """The pair ``table`` is the new table of, unless it is not one or the move is clean (then: as it is)."""
        pair = self._pairs.get(table)
        mode = self.phases.mode() if pair is not None else Mode.CLEAN
        return (None, mode) if mode is Mode.CLEAN else (pair, mode)

    # -- keys ----------------------------------------------------------------------------------------------------

    def ensure(self, pair: TablePair, key: dict[str, Any]) -> dict[str, Any] | None:
        """The key's item in the new table (a tombstone included), moved there first if it was still old."""
        found = self._db.get_item(TableName=pair.new, Key=key, ConsistentRead=True).get("Item")
        return found if found is not None else self.move(pair, key)

    def move(self, pair: TablePair, key: dict[str, Any]) -> dict[str, Any] | None:
        """Fence the old item, copy it if the new table has nothing at its key, mark it copied (a key that was in
        neither table too: its absence is the new table's to keep). Idempotent: any crash between the writes is
        finished by the next call on the key (or the copier's pass). Once no old-way write can land (the phase's
        settle has passed), a key absent from the old table needs no fence: one strong read instead of two writes."""
        if self.phases.settled():
            there = self._db.get_item(TableName=pair.old, Key=key, ConsistentRead=True).get("Item")
            if there is None or there.get(MOVE_MARK) == COPIED:
                return None
        old = (
            self._db.update_item(
                TableName=pair.old,
                Key=key,
                UpdateExpression=f"SET {MARK} = if_not_exists({MARK}, :copying)",
                ExpressionAttributeNames={MARK: MOVE_MARK},
                ExpressionAttributeValues={":copying": COPYING},
                ReturnValues="ALL_OLD",
            ).get("Attributes")
            or {}
        )
        if old.get(MOVE_MARK) == COPIED:
            return None  # copied before, and deleted from the new table since (after the move was done)
        content = clean(old)
        result: dict[str, Any] | None = None  # nothing there: the marked item keeps old-mode writers from creating it
        if not set(content) <= set(pair.key_names):
            try:
                self._db.put_item(
                    TableName=pair.new,
                    Item=content,
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": pair.key_names[0]},
                )
                result = content
            except ClientError as error:
                if not is_conditional_failure(error):
                    raise
                # Another mover copied it (and it may have been written or deleted since): the new table's is it.
                result = self._db.get_item(TableName=pair.new, Key=key, ConsistentRead=True).get("Item")
        self._db.update_item(
            TableName=pair.old,
            Key=key,
            UpdateExpression=f"SET {MARK} = :copied",
            ExpressionAttributeNames={MARK: MOVE_MARK},
            ExpressionAttributeValues={":copied": COPIED},
        )
        return result

    def _marked_in_old(self, pair: TablePair, key: dict[str, Any]) -> bool:
        item = self._db.get_item(
            TableName=pair.old,
            Key=key,
            ConsistentRead=True,
            ProjectionExpression=MARK,
            ExpressionAttributeNames={MARK: MOVE_MARK},
        ).get("Item")
        return bool(item)

    # -- reads ---------------------------------------------------------------------------------------------------

    def get_item(self, **request: Any) -> dict[str, Any]:
        pair, mode = self._route(request["TableName"])
        if pair is None:
            return dict(self._db.get_item(**request))
        if mode is Mode.OLD:
            asked, added = projecting(request | {"TableName": pair.old}, [MOVE_MARK])
            item = self._db.get_item(**asked).get("Item")
            if item is None or MOVE_MARK not in item:
                return {"Item": clean(item, added)} if item is not None else {}
            self.phases.saw_moved_key()
            mode = Mode.MOVING
        if mode is Mode.MOVING:
            current = self.ensure(pair, request["Key"])
            if "ProjectionExpression" not in request:
                return {} if current is None or is_tombstone(current) else {"Item": clean(current)}
        asked, added = projecting(request, [MOVE_TOMBSTONE])
        item = self._db.get_item(**asked).get("Item")
        return {} if item is None or is_tombstone(item) else {"Item": clean(item, added)}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        responses: dict[str, list[dict[str, Any]]] = {}
        plain = {table: ask for table, ask in RequestItems.items() if table not in self._pairs}
        unprocessed: dict[str, Any] = {}
        if plain:
            answer = self._db.batch_get_item(RequestItems=plain)
            responses.update(answer.get("Responses", {}))
            unprocessed = answer.get("UnprocessedKeys") or {}
        for table, ask in RequestItems.items():
            if table in self._pairs:
                found, left = self._batch(self._pairs[table], ask)
                responses[table] = found
                if left:
                    unprocessed[table] = left
        return {"Responses": responses, "UnprocessedKeys": unprocessed}

    def _batch(self, pair: TablePair, ask: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """One table's part of a BatchGetItem: (items, its unprocessed keys under the new table's name)."""
        mode = self.phases.mode()
        if mode is Mode.CLEAN:
            answer = self._db.batch_get_item(RequestItems={pair.new: ask})
            return answer.get("Responses", {}).get(pair.new, []), (answer.get("UnprocessedKeys") or {}).get(pair.new)
        if mode is not Mode.MOVING:
            table, marker = (pair.old, MOVE_MARK) if mode is Mode.OLD else (pair.new, MOVE_TOMBSTONE)
            asked, added = projecting(ask, [marker])
            answer = self._db.batch_get_item(RequestItems={table: asked})
            items = answer.get("Responses", {}).get(table, [])
            left = (answer.get("UnprocessedKeys") or {}).get(table)
            if mode is Mode.DONE or not any(MOVE_MARK in item for item in items):
                return [clean(item, added) for item in items if not is_tombstone(item)], left
            self.phases.saw_moved_key()
        options = {k: v for k, v in ask.items() if k != "Keys"}
        found = (self.get_item(TableName=pair.new, Key=key, **options).get("Item") for key in ask["Keys"])
        return [item for item in found if item is not None], None

    def query(self, **request: Any) -> dict[str, Any]:
        return self._listing("query", request)

    def scan(self, **request: Any) -> dict[str, Any]:
        return self._listing("scan", request)

    def _listing(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        pair, mode = self._route(request["TableName"])
        call = getattr(self._db, operation)
        start = request.get("ExclusiveStartKey") or {}
        if pair is None:
            if SIDE in start:  # a listing begun while moving, the move now clean: on in the new table
                position = {k: v for k, v in start.items() if k != SIDE}
                gone_on = position and start[SIDE]["S"] in ("new", "both")  # else from the start: items may show again
                request = {k: v for k, v in request.items() if k != "ExclusiveStartKey"}
                request |= {"ExclusiveStartKey": position} if gone_on else {}
            return dict(call(**request))
        if SIDE in start:
            return self._listings.union(operation, pair, request)  # a listing begun while moving goes on as it began
        if mode is Mode.OLD:
            asked, added = projecting(request | {"TableName": pair.old}, [MOVE_MARK])
            page = call(**asked)
            items = page.get("Items")
            if not any(MOVE_MARK in item for item in items or ()):
                return {**page, "Items": [clean(i, added) for i in items]} if items is not None else dict(page)
            self.phases.saw_moved_key()
            mode = Mode.MOVING
        if mode is not Mode.MOVING:  # done: tombstones may be left
            page = call(**without_tombstones(request))
            return {**page, "Items": [clean(i) for i in page.get("Items", [])]} if "Items" in page else dict(page)
        return self._listings.union(operation, pair, request)

    def get_paginator(self, operation: str) -> Any:
        return Pages(self, operation) if operation in ("query", "scan") else self._db.get_paginator(operation)

    # -- writes --------------------------------------------------------------------------------------------------

    def put_item(self, **request: Any) -> dict[str, Any]:
        return self._write("put_item", request)

    def update_item(self, **request: Any) -> dict[str, Any]:
        return self._write("update_item", request)

    def delete_item(self, **request: Any) -> dict[str, Any]:
        return self._write("delete_item", request)

    def _write(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        pair, mode = self._route(request["TableName"])
        if pair is None:
            return dict(getattr(self._db, operation)(**request))
        key = request["Key"] if "Key" in request else pair.key_of(request["Item"])
        if mode is Mode.OLD:
            try:
                return self._returned(getattr(self._db, operation)(**self._guarded(pair, request)))
            except ClientError as error:
                if not is_conditional_failure(error) or not self._marked_in_old(pair, key):
                    raise
            self.phases.saw_moved_key()
            mode = Mode.MOVING
        if mode is Mode.MOVING:
            self.ensure(pair, key)
        request = self._over_tombstone(request)
        if operation == "update_item":
            request = named(request, **{GONE: MOVE_TOMBSTONE})
            expression = request["UpdateExpression"]
            removed = REMOVE_CLAUSE.sub(f"REMOVE {GONE},", expression, count=1)
            request["UpdateExpression"] = removed if removed != expression else f"{expression} REMOVE {GONE}"
        elif operation == "delete_item" and mode is Mode.MOVING:
            tombstone = {**key, MOVE_TOMBSTONE: {"BOOL": True}}
            request = {k: v for k, v in request.items() if k != "Key"} | {"Item": tombstone}
            operation = "put_item"
        return self._returned(getattr(self._db, operation)(**request))

    @staticmethod
    def _guarded(pair: TablePair, request: dict[str, Any]) -> dict[str, Any]:
        condition = request.get("ConditionExpression")
        fence = f"attribute_not_exists({MARK})"
        guarded = named(request | {"TableName": pair.old}, **{MARK: MOVE_MARK})
        guarded["ConditionExpression"] = f"{fence} AND {grouped(condition)}" if condition else fence
        return guarded

    @staticmethod
    def _over_tombstone(request: dict[str, Any]) -> dict[str, Any]:
        condition = over_tombstone(request.get("ConditionExpression"), request.get("ExpressionAttributeValues"), GONE)
        if condition is None:
            return request
        return named(request, **{GONE: MOVE_TOMBSTONE}) | {"ConditionExpression": condition}

    @staticmethod
    def _returned(response: dict[str, Any]) -> dict[str, Any]:
        """What the call answers, a tombstone it replaced read as no item."""
        attributes = response.get("Attributes")
        if attributes is None:
            return dict(response)
        if is_tombstone(attributes):
            return {k: v for k, v in response.items() if k != "Attributes"}
        return {**response, "Attributes": clean(attributes)}


def table_pairs(jobs: str, runs: str, previous_jobs: str, previous_runs: str) -> list[TablePair]:
    def pair(new: str, old: str, table: TableDefinition) -> TablePair:
        indexes = {index.name: (index.partition_key[0], index.sort_key[0]) for index in table.indexes}
        return TablePair(new, old, (table.partition_key[0], table.sort_key[0]), indexes)

    return [pair(jobs, previous_jobs, JOBS_TABLE), pair(runs, previous_runs, RUNS_TABLE)]


def moving_client(db: Any, environ: Mapping[str, str], clock: Callable[[], datetime]) -> Any:
    """``db`` itself, or (while the environment names the tables a stage is moving from) a ``MovingClient``."""
    previous_jobs, previous_runs = environ.get(Env.PREVIOUS_JOBS_TABLE), environ.get(Env.PREVIOUS_RUNS_TABLE)
    if not previous_jobs or not previous_runs:
        return db
    jobs, runs = environ[Env.JOBS_TABLE], environ[Env.RUNS_TABLE]
    cache = timedelta(seconds=float(environ.get(Env.MOVE_PHASE_SECONDS) or PHASE_CACHE.total_seconds()))
    phases = PhaseReader(db, jobs, clock, previous_tables=(previous_jobs, previous_runs), cache=cache)
    return MovingClient(db, table_pairs(jobs, runs, previous_jobs, previous_runs), phases)
