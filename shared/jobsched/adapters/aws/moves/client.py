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

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import is_conditional_failure
from jobsched.adapters.aws.moves.conditions import grouped, over_tombstone
from jobsched.adapters.aws.moves.phase import PHASE_CACHE, Mode, PhaseReader
from jobsched.core.names import MOVE_COPIED, MOVE_COPYING, MOVE_MARK, MOVE_TOMBSTONE, Env, JobsKeys, RunsKeys

MARK = "#move_mark"
GONE = "#move_tombstone"
SIDE = "move_side"  # which table a union's LastEvaluatedKey is in
_COPYING = {"N": str(MOVE_COPYING)}
_COPIED = {"N": str(MOVE_COPIED)}
_REMOVE = re.compile(r"(?<![#:\w])REMOVE\b", re.IGNORECASE)  # the clause, never a name or a value


@dataclass(frozen=True)
class TablePair:
    new: str
    old: str
    key_names: tuple[str, str]  # partition key, sort key

    def key_of(self, item: dict[str, Any]) -> dict[str, Any]:
        return {name: item[name] for name in self.key_names}


def is_tombstone(item: dict[str, Any] | None) -> bool:
    return item is not None and MOVE_TOMBSTONE in item


def _clean(item: dict[str, Any], added: Sequence[str] = ()) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in (MOVE_MARK, MOVE_TOMBSTONE) and k not in added}


def _key_text(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True)


def _named(request: dict[str, Any], **names: str) -> dict[str, Any]:
    return {**request, "ExpressionAttributeNames": {**request.get("ExpressionAttributeNames", {}), **names}}


def _projecting(request: dict[str, Any], attributes: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """``request`` with ``attributes`` added to its projection, if it has one; (request, the ones added)."""
    projection = request.get("ProjectionExpression")
    if not projection:
        return request, []
    names = request.get("ExpressionAttributeNames", {})
    projected = {
        names.get(path, path) for path in (re.split(r"[.\[]", part.strip())[0] for part in projection.split(","))
    }
    added = [a for a in attributes if a not in projected]
    aliases = {f"#move_p{i}": a for i, a in enumerate(added)}
    if not aliases:
        return request, []
    request = _named(request, **aliases)
    return {**request, "ProjectionExpression": ", ".join([projection, *aliases])}, added


def _filtered(request: dict[str, Any], extra: str, **names: str) -> dict[str, Any]:
    existing = request.get("FilterExpression")
    expression = f"{grouped(existing)} AND {grouped(extra)}" if existing else extra
    return {**_named(request, **names), "FilterExpression": expression}


class MovingClient:
    def __init__(self, db: Any, pairs: Sequence[TablePair], phases: PhaseReader) -> None:
        self._db = db
        self._pairs = {pair.new: pair for pair in pairs}
        self.phases = phases

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)  # every other call (and ``exceptions``) as the plain client

    def _route(self, table: str) -> tuple[TablePair | None, Mode]:
        """The pair ``table`` is the new table of, unless it is not one or the move is clean (then: as it is)."""
        pair = self._pairs.get(table)
        if pair is None or self.phases.mode() is Mode.CLEAN:
            return None, Mode.CLEAN
        return pair, self.phases.mode()

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
            if there is None or there.get(MOVE_MARK) == _COPIED:
                return None
        old = (
            self._db.update_item(
                TableName=pair.old,
                Key=key,
                UpdateExpression=f"SET {MARK} = if_not_exists({MARK}, :copying)",
                ExpressionAttributeNames={MARK: MOVE_MARK},
                ExpressionAttributeValues={":copying": _COPYING},
                ReturnValues="ALL_OLD",
            ).get("Attributes")
            or {}
        )
        if old.get(MOVE_MARK) == _COPIED:
            return None  # copied before, and deleted from the new table since (after the move was done)
        content = _clean(old)
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
            ExpressionAttributeValues={":copied": _COPIED},
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
            asked, added = _projecting(request | {"TableName": pair.old}, [MOVE_MARK])
            item = self._db.get_item(**asked).get("Item")
            if item is None or MOVE_MARK not in item:
                return {"Item": _clean(item, added)} if item is not None else {}
            self.phases.saw_moved_key()
            mode = Mode.MOVING
        if mode is Mode.MOVING:
            current = self.ensure(pair, request["Key"])
            if "ProjectionExpression" not in request:
                return {} if current is None or is_tombstone(current) else {"Item": _clean(current)}
        asked, added = _projecting(request, [MOVE_TOMBSTONE])
        item = self._db.get_item(**asked).get("Item")
        return {} if item is None or is_tombstone(item) else {"Item": _clean(item, added)}

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
            asked, added = _projecting(ask, [marker])
            answer = self._db.batch_get_item(RequestItems={table: asked})
            items = answer.get("Responses", {}).get(table, [])
            left = (answer.get("UnprocessedKeys") or {}).get(table)
            if mode is Mode.DONE or not any(MOVE_MARK in item for item in items):
                return [_clean(item, added) for item in items if not is_tombstone(item)], left
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
                gone_on = position and start[SIDE]["S"] == "new"  # else from the start: items may show again
                request = {k: v for k, v in request.items() if k != "ExclusiveStartKey"}
                request |= {"ExclusiveStartKey": position} if gone_on else {}
            return dict(call(**request))
        if SIDE in start:
            return self._union(operation, pair, request)  # a listing begun while moving goes on as it began
        if mode is Mode.OLD:
            asked, added = _projecting(request | {"TableName": pair.old}, [MOVE_MARK])
            page = call(**asked)
            items = page.get("Items")
            if not any(MOVE_MARK in item for item in items or ()):
                return {**page, "Items": [_clean(i, added) for i in items]} if items is not None else dict(page)
            self.phases.saw_moved_key()
            mode = Mode.MOVING
        if mode is not Mode.MOVING:  # done: tombstones may be left
            page = call(**_filtered(request, f"attribute_not_exists({GONE})", **{GONE: MOVE_TOMBSTONE}))
            return {**page, "Items": [_clean(i) for i in page.get("Items", [])]} if "Items" in page else dict(page)
        return self._union(operation, pair, request)

    def _union(self, operation: str, pair: TablePair, request: dict[str, Any]) -> dict[str, Any]:
        """The old table's unmoved items, then the new table's live ones, as pages of one listing."""
        start = dict(request.get("ExclusiveStartKey") or {})
        side = start.pop(SIDE, {"S": "old"})["S"]
        limit = request.get("Limit")
        counting = request.get("Select") == "COUNT"
        items: list[dict[str, Any]] = []
        count = scanned = 0
        while True:
            asked = {k: v for k, v in request.items() if k not in ("ExclusiveStartKey", "Limit")}
            if start:
                asked["ExclusiveStartKey"] = start
            if limit is not None:
                asked["Limit"] = max(1, limit - scanned)
            page, found = self._side(operation, pair, side, asked, counting)
            items.extend(found)
            count += len(found) if not counting else int(page.get("Count", 0))
            scanned += int(page.get("ScannedCount", 0))
            following = page.get("LastEvaluatedKey")
            answer: dict[str, Any] = {"Count": count, "ScannedCount": scanned}
            if not counting:
                answer["Items"] = items
            if following:
                return answer | {"LastEvaluatedKey": {**following, SIDE: {"S": side}}}
            if side == "new":
                return answer
            side, start = "new", {}
            if limit is not None and scanned >= limit:
                return answer | {"LastEvaluatedKey": {SIDE: {"S": "new"}}}

    def _side(
        self, operation: str, pair: TablePair, side: str, request: dict[str, Any], counting: bool
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        call = getattr(self._db, operation)
        if side == "new":
            page = call(**_filtered(request, f"attribute_not_exists({GONE})", **{GONE: MOVE_TOMBSTONE}))
            return page, [_clean(item) for item in page.get("Items", [])]
        old = request | {"TableName": pair.old}
        if "IndexName" in request:
            return self._old_index_side(call, pair, old, counting)
        if counting:  # an item whose copy a crash left unfinished counts on neither side until it is finished
            return call(**_filtered(old, f"attribute_not_exists({MARK})", **{MARK: MOVE_MARK})), []
        unmoved = f"attribute_not_exists({MARK}) OR {MARK} = :move_copying"
        old = _filtered(old, unmoved, **{MARK: MOVE_MARK})
        old["ExpressionAttributeValues"] = {**old.get("ExpressionAttributeValues", {}), ":move_copying": _COPYING}
        asked, added = _projecting(old, [MOVE_MARK, *pair.key_names])
        page = call(**asked)
        found = []
        for item in page.get("Items", []):
            if MOVE_MARK in item:
                self.move(pair, pair.key_of(item))  # finished now, it is read from the new table next
            else:
                found.append(_clean(item, added))
        return page, found

    def _old_index_side(
        self, call: Any, pair: TablePair, request: dict[str, Any], counting: bool
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """An index of the previous table: its entries do not carry the mark (an index projects only its own
        attributes), so the items' marks are read from the table, strongly, a batch a page."""
        asked = {k: v for k, v in request.items() if k != "Select"}
        asked, added = _projecting(asked, list(pair.key_names))
        page = call(**asked)
        items = page.get("Items", [])
        marks = self._marks(pair, [pair.key_of(item) for item in items])
        found = []
        for item in items:
            mark = marks.get(_key_text(pair.key_of(item)))
            if mark is None:
                found.append(_clean(item, added))
            elif mark == _COPYING:
                self.move(pair, pair.key_of(item))  # finished now, it is read from the new table next
        if counting:
            return {**page, "Count": len(found)}, []
        return page, found

    def _marks(self, pair: TablePair, keys: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The previous table's marks at ``keys`` (key text -> mark), for the marked ones."""
        marks: dict[str, dict[str, Any]] = {}
        names = {MARK: MOVE_MARK, **{f"#move_k{i}": name for i, name in enumerate(pair.key_names)}}
        projection = ", ".join(names)
        for start in range(0, len(keys), 100):
            ask: dict[str, Any] = {
                pair.old: {
                    "Keys": keys[start : start + 100],
                    "ConsistentRead": True,
                    "ProjectionExpression": projection,
                    "ExpressionAttributeNames": names,
                }
            }
            while ask:
                answer = self._db.batch_get_item(RequestItems=ask)
                for item in answer.get("Responses", {}).get(pair.old, []):
                    if MOVE_MARK in item:
                        marks[_key_text(pair.key_of(item))] = item[MOVE_MARK]
                ask = answer.get("UnprocessedKeys") or {}
        return marks

    def get_paginator(self, operation: str) -> Any:
        return _Pages(self, operation) if operation in ("query", "scan") else self._db.get_paginator(operation)

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
            request = _named(request, **{GONE: MOVE_TOMBSTONE})
            expression = request["UpdateExpression"]
            removed = _REMOVE.sub(f"REMOVE {GONE},", expression, count=1)
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
        guarded = _named(request | {"TableName": pair.old}, **{MARK: MOVE_MARK})
        guarded["ConditionExpression"] = f"{fence} AND {grouped(condition)}" if condition else fence
        return guarded

    @staticmethod
    def _over_tombstone(request: dict[str, Any]) -> dict[str, Any]:
        condition = over_tombstone(request.get("ConditionExpression"), request.get("ExpressionAttributeValues"), GONE)
        if condition is None:
            return request
        return _named(request, **{GONE: MOVE_TOMBSTONE}) | {"ConditionExpression": condition}

    @staticmethod
    def _returned(response: dict[str, Any]) -> dict[str, Any]:
        """What the call answers, a tombstone it replaced read as no item."""
        attributes = response.get("Attributes")
        if attributes is None:
            return dict(response)
        if is_tombstone(attributes):
            return {k: v for k, v in response.items() if k != "Attributes"}
        return {**response, "Attributes": _clean(attributes)}


class _Pages:
    """botocore's paginator for Query and Scan, over ``MovingClient`` (``MaxItems`` honoured as botocore does)."""

    def __init__(self, client: MovingClient, operation: str) -> None:
        self._client = client
        self._operation = operation

    def paginate(self, PaginationConfig: dict[str, Any] | None = None, **request: Any) -> Iterator[dict[str, Any]]:
        most = (PaginationConfig or {}).get("MaxItems")
        taken = 0
        while True:
            page = getattr(self._client, self._operation)(**request)
            items = page.get("Items", [])
            if most is not None and taken + len(items) >= most:
                yield {**page, "Items": items[: most - taken]}
                return
            taken += len(items)
            yield page
            following = page.get("LastEvaluatedKey")
            if not following:
                return
            request = {**request, "ExclusiveStartKey": following}


def table_pairs(jobs: str, runs: str, previous_jobs: str, previous_runs: str) -> list[TablePair]:
    return [
        TablePair(jobs, previous_jobs, (JobsKeys.PK, JobsKeys.SK)),
        TablePair(runs, previous_runs, (RunsKeys.PK, RunsKeys.SK)),
    ]


def moving_client(db: Any, environ: Mapping[str, str], clock: Callable[[], datetime]) -> Any:
    """``db`` itself, or (while the environment names the tables a stage is moving from) a ``MovingClient``."""
    previous_jobs, previous_runs = environ.get(Env.PREVIOUS_JOBS_TABLE), environ.get(Env.PREVIOUS_RUNS_TABLE)
    if not previous_jobs or not previous_runs:
        return db
    jobs, runs = environ[Env.JOBS_TABLE], environ[Env.RUNS_TABLE]
    cache = timedelta(seconds=float(environ.get(Env.MOVE_PHASE_SECONDS) or PHASE_CACHE.total_seconds()))
    phases = PhaseReader(db, jobs, clock, previous_tables=(previous_jobs, previous_runs), cache=cache)
    return MovingClient(db, table_pairs(jobs, runs, previous_jobs, previous_runs), phases)
