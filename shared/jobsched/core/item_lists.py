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
import json
import re
from collections.abc import Iterator
from typing import Any, Literal

from jobsched.core.templates import S3_URI, is_bucket_name

ItemFormat = Literal["json", "csv"]
MAX_DISTRIBUTED_ITEMS = 10_000  # items of one distributed map (the team's object)
MAX_ITEMS_OBJECT_BYTES = 8 * 1024 * 1024  # the object a distributed map reads
MAX_ITEM_BYTES = 16 * 1024  # one item, as JSON: it travels in its task's message


class BadItems(ValueError):
    """The object is not a list a distributed map can run over: the message says why and what is allowed."""


def too_large(size: int | None, most: int = MAX_ITEMS_OBJECT_BYTES) -> BadItems:
    """An object larger than a distributed map may read; ``size`` None: only known to be over (it grew between
    reading its size and its bytes)."""
    megabytes = most // (1024 * 1024)
    if size is None:
        return BadItems(f"the object is over {megabytes} MB")
    return BadItems(f"the object is {size} bytes; at most {megabytes} MB")


def items_object(value: Any) -> tuple[str, str]:
    """(bucket, key) of the ``s3://bucket/key`` a distributed map runs over, as its upstream returned it."""
    found = S3_URI.fullmatch(value) if isinstance(value, str) else None
    if found is None or not is_bucket_name(found["bucket"]):
        shown = value if isinstance(value, str) else type(value).__name__ if value is not None else "null"
        raise BadItems(f"{str(shown)[:200]!r} is not s3://bucket/key (an object in the team's bucket)")
    if len(found["key"].encode()) > 1024:
        raise BadItems("the object key is longer than S3's 1024 bytes")
    return found["bucket"], found["key"]


def count_items(data: bytes, form: ItemFormat) -> int:
    """How many items the object holds, once every one was checked; BadItems saying what is wrong.

    Items are read one at a time and dropped once checked, and reading stops past the limit: whatever the
    object holds, the memory used is the object's text and one item (a list of millions of ``{}`` would
    otherwise take hundreds of MB in a worker that other teams' runs share)."""
    if len(data) > MAX_ITEMS_OBJECT_BYTES:
        raise too_large(len(data))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadItems("the object is not UTF-8 text") from None
    count = 0
    for item in _json_items(text) if form == "json" else _csv_items(text):
        if count == MAX_DISTRIBUTED_ITEMS:
            raise BadItems(f"more than {MAX_DISTRIBUTED_ITEMS} items; at most {MAX_DISTRIBUTED_ITEMS}")
        size = len(json.dumps(item, separators=(",", ":")).encode())
        if size > MAX_ITEM_BYTES:
            raise BadItems(f"item {count} is {size} bytes as JSON; at most {MAX_ITEM_BYTES // 1024} KB")
        count += 1
    return count


_SPACE = re.compile(r"[ \t\n\r]*")
_KINDS = {"{": "a JSON object", '"': "a JSON string", "t": "a JSON boolean", "f": "a JSON boolean", "n": "JSON null"}


def _space(text: str, at: int) -> int:
    found = _SPACE.match(text, at)
    return found.end() if found else at


def _not_json(at: int, why: str) -> BadItems:
    return BadItems(f"the object is not JSON ({why} at character {at})")


def _list_start(text: str) -> int:
    """Where the list's first element (or its ``]``) begins; BadItems when the object holds something else."""
    at = _space(text, 0)
    if text.startswith("[", at):
        return _space(text, at + 1)
    first = text[at : at + 1]
    kind = _KINDS.get(first, "a JSON number" if first and first in "-0123456789" else None)
    raise BadItems(f"the object holds {kind}, not a list") if kind else _not_json(at, "no list")


def _json_items(text: str) -> Iterator[Any]:
    """The elements of a JSON list, one at a time (``raw_decode`` from each element's start)."""
    decoder = json.JSONDecoder()
    at = _list_start(text)
    ended = text.startswith("]", at)
    while not ended:
        try:
            item, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as error:
            raise _not_json(error.pos, error.msg) from None
        except RecursionError:
            raise _not_json(at, "nested too deeply") from None
        yield item
        at = _space(text, at)
        ended = text.startswith("]", at)
        if not ended and not text.startswith(",", at):
            raise _not_json(at, "expected , or ]")
        at = _space(text, at + 1) if not ended else at
    at = _space(text, at + 1)
    if at != len(text):
        raise _not_json(at, "text after the list")


def _lines(text: str) -> Iterator[str]:
    """The text's lines with their endings, one at a time (io.StringIO would copy all of it at 4 bytes a character)."""
    at = 0
    while at < len(text):
        end = text.find("\n", at)
        end = len(text) if end < 0 else end + 1
        yield text[at:end]
        at = end


def _csv_items(text: str) -> Iterator[dict[str, str]]:
    """Rows as Step Functions gives them with CSVHeaderLocation FIRST_ROW: one object per row, by header."""
    rows = csv.reader(_lines(text))
    try:
        header = next(rows, None)
        if not header or not any(header):
            raise BadItems("the CSV object has no header row (its first row names the columns)")
        if len(set(header)) < len(header):
            raise BadItems("the CSV header names a column twice")
        for number, row in enumerate(rows, start=2):
            if not row:  # Step Functions would make an item of it: refused rather than guessed at
                raise BadItems(f"CSV row {number} is empty")
            if len(row) > len(header):
                raise BadItems(f"CSV row {number} has {len(row)} fields; the header names {len(header)}")
            yield {name: row[index] if index < len(row) else "" for index, name in enumerate(header)}
    except csv.Error as error:
        raise BadItems(f"the object is not CSV ({error})") from None
