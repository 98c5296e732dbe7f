"""A distributed map's list: an object in the team's S3 bucket, read by Step Functions (Distributed Map). Pure.

An inline map's list travels in the state machine's payload, so it is bounded by the 32 KB an upstream may
pass on. A distributed map names an object instead (``s3://bucket/key``: the upstream's output, or written in
the spec with ``{logical_date}`` placeholders) and Step Functions reads it with an ItemReader. Before that, the
worker reads it once as the team, on a bucket checked to be the team's, and refuses here what would be
unbounded work or fail half-way: an object too large, a list too long, an item too large for a task's
message, CSV without a usable header. The count it finds is the MaxItems Step Functions reads, so an object
replaced in between yields at most the items that were checked.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any, Literal

from jobsched.core.templates import S3_URI

ItemFormat = Literal["json", "csv"]
MAX_DISTRIBUTED_ITEMS = 10_000  # items of one distributed map (the team's object)
MAX_ITEMS_OBJECT_BYTES = 8 * 1024 * 1024  # the object a distributed map reads
MAX_ITEM_BYTES = 16 * 1024  # one item, as JSON: it travels in its task's message
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class BadItems(ValueError):
    """The object is not a list a distributed map can run over: the message says why and what is allowed."""


def items_object(value: Any) -> tuple[str, str]:
    """(bucket, key) of the ``s3://bucket/key`` a distributed map runs over, as its upstream returned it."""
    found = S3_URI.fullmatch(value) if isinstance(value, str) else None
    if found is None or not _BUCKET.fullmatch(found["bucket"]) or ".." in found["bucket"]:
        shown = value if isinstance(value, str) else type(value).__name__ if value is not None else "null"
        raise BadItems(f"{str(shown)[:200]!r} is not s3://bucket/key (an object in the team's bucket)")
    if len(found["key"].encode()) > 1024:
        raise BadItems("the object key is longer than S3's 1024 bytes")
    return found["bucket"], found["key"]


def count_items(data: bytes, form: ItemFormat) -> int:
    """How many items the object holds, once every one was checked; BadItems saying what is wrong."""
    if len(data) > MAX_ITEMS_OBJECT_BYTES:
        raise BadItems(f"the object is {len(data)} bytes; at most {MAX_ITEMS_OBJECT_BYTES // (1024 * 1024)} MB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadItems("the object is not UTF-8 text") from None
    items = _json_items(text) if form == "json" else _csv_items(text)
    if len(items) > MAX_DISTRIBUTED_ITEMS:
        raise BadItems(f"{len(items)} items; at most {MAX_DISTRIBUTED_ITEMS}")
    for index, item in enumerate(items):
        size = len(json.dumps(item, separators=(",", ":")).encode())
        if size > MAX_ITEM_BYTES:
            raise BadItems(f"item {index} is {size} bytes as JSON; at most {MAX_ITEM_BYTES // 1024} KB")
    return len(items)


def _json_items(text: str) -> list[Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise BadItems(f"the object is not JSON ({str(error)[:120]})") from None
    if not isinstance(value, list):
        raise BadItems(f"the object holds a JSON {type(value).__name__}, not a list")
    return value


def _csv_items(text: str) -> list[dict[str, str]]:
    """Rows as Step Functions gives them with CSVHeaderLocation FIRST_ROW: one object per row, by header."""
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as error:
        raise BadItems(f"the object is not CSV ({error})") from None
    if not rows or not any(rows[0]):
        raise BadItems("the CSV object has no header row (its first row names the columns)")
    header = rows[0]
    if len(set(header)) < len(header):
        raise BadItems("the CSV header names a column twice")
    items = []
    for number, row in enumerate(rows[1:], start=2):
        if not row:  # Step Functions would make an item of it: refused rather than guessed at
            raise BadItems(f"CSV row {number} is empty")
        if len(row) > len(header):
            raise BadItems(f"CSV row {number} has {len(row)} fields; the header names {len(header)}")
        items.append({name: row[index] if index < len(row) else "" for index, name in enumerate(header)})
    return items
