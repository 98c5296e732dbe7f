"""Listings while a table moves: the previous table's unmoved items, then the global table's (an index's entries carry
no mark: the table's marks are read a page at a time); a query of a table itself merges both in key order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from jobsched.adapters.aws.dynamo import batch_get, to_item
from jobsched.adapters.aws.moves.requests import (
    MARK,
    SIDE,
    TablePair,
    clean,
    filtered,
    key_text,
    projecting,
    unmoved,
    without_tombstones,
)
from jobsched.core.names import MOVE_COPYING, MOVE_MARK


class UnionListing:
    def __init__(self, db: Any, move: Callable[[TablePair, dict[str, Any]], Any]) -> None:
        self._db = db
        self._move = move  # finishes a copy a crash left unfinished (``MovingClient.move``)

    def union(self, operation: str, pair: TablePair, request: dict[str, Any]) -> dict[str, Any]:
        """The old table's unmoved items, then the new table's live ones, as pages of one listing (a query of a
        table itself: both merged in key order, ``_merged``)."""
        start = dict(request.get("ExclusiveStartKey") or {})
        merging = operation == "query" and "IndexName" not in request and request.get("Select") != "COUNT"
        if merging and start.get(SIDE, {"S": "both"})["S"] == "both":
            return self._merged(pair, request)
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
                # The old table is through and the page full: go on after its last item (a cursor is a key, as
                # callers read it); with none listed yet, the new table's first page answers within the limit.
                resume = _position(pair, request, items[-1]) if items else None
                if resume is not None:
                    return answer | {"LastEvaluatedKey": {**resume, SIDE: {"S": "old"}}}

    def _merged(self, pair: TablePair, request: dict[str, Any]) -> dict[str, Any]:
        """A query of the table itself, both tables' pages merged in key order: a listing newest first reads as one
        table's would, and its LastEvaluatedKey is a position both tables go on from (so no item shows twice)."""
        start = {k: v for k, v in (request.get("ExclusiveStartKey") or {}).items() if k != SIDE}
        limit, forward, sort = request.get("Limit"), request.get("ScanIndexForward", True), pair.key_names[1]
        asked, added = projecting({k: v for k, v in request.items() if k != "ExclusiveStartKey"}, list(pair.key_names))
        if start:
            asked["ExclusiveStartKey"] = start
        old_page, old_items = self._side("query", pair, "old", asked, False)
        new_page, new_items = self._side("query", pair, "new", asked, False)  # after: a copy made meanwhile is here
        by_key = {key_text(pair.key_of(item)): item for item in [*old_items, *new_items]}  # the new table's wins

        def position(item: dict[str, Any]) -> Any:
            kind, value = next(iter(item[sort].items()))
            return Decimal(value) if kind == "N" else value

        ordered = sorted(by_key.values(), key=position, reverse=not forward)
        # A side that stopped early knows nothing past where it stopped: the page ends at the nearer stop.
        stops = [page["LastEvaluatedKey"] for page in (old_page, new_page) if page.get("LastEvaluatedKey")]
        following = (min if forward else max)(stops, key=position) if stops else None
        if following is not None:
            stop = position(following)
            ordered = [i for i in ordered if (position(i) <= stop if forward else position(i) >= stop)]
        if limit is not None and len(ordered) > limit:
            ordered, following = ordered[:limit], pair.key_of(ordered[limit - 1])
        scanned = int(old_page.get("ScannedCount", 0)) + int(new_page.get("ScannedCount", 0))
        answer: dict[str, Any] = {
            "Items": [clean(i, added) for i in ordered],
            "Count": len(ordered),
            "ScannedCount": scanned,
        }
        if following is not None:
            answer["LastEvaluatedKey"] = {**pair.key_of(following), SIDE: {"S": "both"}}
        return answer

    def _side(
        self, operation: str, pair: TablePair, side: str, request: dict[str, Any], counting: bool
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        call = getattr(self._db, operation)
        if side == "new":
            page = call(**without_tombstones(request))
            return page, [clean(item) for item in page.get("Items", [])]
        old = request | {"TableName": pair.old}
        if "IndexName" in request:
            return self._old_index_side(call, pair, old, counting)
        if counting:  # an item whose copy a crash left unfinished counts on neither side until it is finished
            return call(**filtered(old, f"attribute_not_exists({MARK})", **{MARK: MOVE_MARK})), []
        asked, added = projecting(unmoved(old), [MOVE_MARK, *pair.key_names])
        page = call(**asked)
        found = []
        for item in page.get("Items", []):
            if MOVE_MARK in item:
                self._move(pair, pair.key_of(item))  # finished now, it is read from the new table next
            else:
                found.append(clean(item, added))
        return page, found

    def _old_index_side(
        self, call: Any, pair: TablePair, request: dict[str, Any], counting: bool
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """An index of the previous table: its entries do not carry the mark (an index projects only its own
        attributes), so the items' marks are read from the table, strongly, a batch a page."""
        asked = {k: v for k, v in request.items() if k != "Select"}
        asked, added = projecting(asked, list(pair.key_names))
        page = call(**asked)
        items = page.get("Items", [])
        marks = self._marks(pair, [pair.key_of(item) for item in items])
        found = []
        for item in items:
            mark = marks.get(key_text(pair.key_of(item)))
            if mark is None:
                found.append(clean(item, added))
            elif mark == MOVE_COPYING:
                self._move(pair, pair.key_of(item))  # finished now, it is read from the new table next
        if counting:
            return {**page, "Count": len(found)}, []
        return page, found

    def _marks(self, pair: TablePair, keys: list[dict[str, Any]]) -> dict[str, int]:
        """The previous table's marks at ``keys`` (key text -> mark), for the marked ones."""
        names = {MARK: MOVE_MARK, **{f"#move_k{i}": name for i, name in enumerate(pair.key_names)}}
        found = batch_get(
            self._db,
            pair.old,
            keys,
            ProjectionExpression=", ".join(names),
            ExpressionAttributeNames=names,
            ConsistentRead=True,
        )
        return {
            key_text(to_item(pair.key_of(values))): int(values[MOVE_MARK]) for values in found if MOVE_MARK in values
        }


def _position(pair: TablePair, request: dict[str, Any], item: dict[str, Any]) -> dict[str, Any] | None:
    """The key an ExclusiveStartKey after ``item`` needs (the table's, and the index's), if the item holds it."""
    names = {*pair.key_names, *pair.index_keys.get(request.get("IndexName", ""), ())}
    return {name: item[name] for name in names} if names <= item.keys() else None


class Pages:
    """botocore's paginator for Query and Scan, over ``MovingClient`` (``MaxItems`` honoured as botocore does)."""

    def __init__(self, client: Any, operation: str) -> None:
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
