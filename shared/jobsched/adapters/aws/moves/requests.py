"""What the move adds to a DynamoDB request and takes out of its answer: the mark and tombstone names, a listing's
side, the projection and filter additions, and the pair of tables a key lives in."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jobsched.adapters.aws.moves.conditions import grouped
from jobsched.core.names import MOVE_COPIED, MOVE_COPYING, MOVE_MARK, MOVE_TOMBSTONE

MARK = "#move_mark"
GONE = "#move_tombstone"
SIDE = "move_side"  # which table a union's LastEvaluatedKey is in
COPYING = {"N": str(MOVE_COPYING)}
COPIED = {"N": str(MOVE_COPIED)}
REMOVE_CLAUSE = re.compile(r"(?<![#:\w])REMOVE\b", re.IGNORECASE)  # the clause, never a name or a value


@dataclass(frozen=True)
class TablePair:
    new: str
    old: str
    key_names: tuple[str, str]  # partition key, sort key
    index_keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # index -> its partition and sort key

    def key_of(self, item: dict[str, Any]) -> dict[str, Any]:
        return {name: item[name] for name in self.key_names}


def is_tombstone(item: dict[str, Any] | None) -> bool:
    return item is not None and MOVE_TOMBSTONE in item


def clean(item: dict[str, Any], added: Sequence[str] = ()) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in (MOVE_MARK, MOVE_TOMBSTONE) and k not in added}


def key_text(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True)


def named(request: dict[str, Any], **names: str) -> dict[str, Any]:
    return {**request, "ExpressionAttributeNames": {**request.get("ExpressionAttributeNames", {}), **names}}


def projecting(request: dict[str, Any], attributes: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """``request`` with ``attributes`` added to its projection, if it has one; (request, the ones added)."""
    projection = request.get("ProjectionExpression")
    if not projection:
        return request, []
    names = request.get("ExpressionAttributeNames", {})
    projected = {
        names.get(path, path) for path in (re.split(r"[.\[]", part.strip())[0] for part in projection.split(","))
    }
    added = [a for a in attributes if a not in projected]
    aliases = {"#move_" + re.sub(r"\W", "_", a): a for a in added}  # one alias an attribute, however often added
    if not aliases:
        return request, []
    request = named(request, **aliases)
    return {**request, "ProjectionExpression": ", ".join([projection, *aliases])}, added


def filtered(request: dict[str, Any], extra: str, **names: str) -> dict[str, Any]:
    existing = request.get("FilterExpression")
    expression = f"{grouped(existing)} AND {grouped(extra)}" if existing else extra
    return {**named(request, **names), "FilterExpression": expression}


def without_tombstones(request: dict[str, Any]) -> dict[str, Any]:
    """A listing of a new table, its tombstones left out."""
    return filtered(request, f"attribute_not_exists({GONE})", **{GONE: MOVE_TOMBSTONE})


def unmoved(request: dict[str, Any]) -> dict[str, Any]:
    """A listing of an old table: its items not moved, and those whose copy a crash may have left unfinished."""
    asked = filtered(request, f"attribute_not_exists({MARK}) OR {MARK} = :move_copying", **{MARK: MOVE_MARK})
    asked["ExpressionAttributeValues"] = {**asked.get("ExpressionAttributeValues", {}), ":move_copying": COPYING}
    return asked
