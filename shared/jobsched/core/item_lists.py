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

from jobsched.core.bounds import MAX_JSON_DEPTH, UnreadableJson, parse_bounded_json
from jobsched.core.templates import S3_URI, is_bucket_name

ItemFormat = Literal["json", "csv"]
MAX_DISTRIBUTED_ITEMS = 10_000  # items of one distributed map (the team's object)
MAX_ITEMS_OBJECT_BYTES = 8 * 1024 * 1024  # the object a distributed map reads
MAX_ITEM_BYTES = 16 * 1024  # one item, as JSON: it travels in its task's message
MAX_ITEM_TEXT_BYTES = 4 * MAX_ITEM_BYTES  # one item as the object writes it (spaces and indents included)
MAX_CSV_ROW_BYTES = MAX_ITEM_BYTES  # one CSV row's text (the header too): its item is larger as JSON
MAX_CSV_COLUMNS = 1_000


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


# Strings (unrolled and possessive: no state kept per character) and the marks that end or nest an element.
_TOKENS = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[\[\]{},]', re.S)


def _item_end(text: str, at: int, number: int) -> int:
    """Where the element starting at ``at`` ends, found by scanning its text (strings and brackets) without
    decoding it: an element whose text is over MAX_ITEM_TEXT_BYTES, or nests deeper than MAX_JSON_DEPTH, is refused
    before a decoder builds it (a 7.6 MB first element would otherwise take ~90 MB to decode, then be refused)."""
    depth = 0
    for token in _TOKENS.finditer(text, at):
        if token.end() - at > MAX_ITEM_TEXT_BYTES:
            break
        mark = token.group()
        if depth == 0 and mark in ",]":
            return token.start()
        if mark in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise BadItems(f"item {number} nests deeper than {MAX_JSON_DEPTH} levels")
        elif mark in "]}":
            depth -= 1
    if len(text) - at <= MAX_ITEM_TEXT_BYTES:
        return len(text)  # no end: the decoder says what is missing
    raise BadItems(
        f"item {number} is over {MAX_ITEM_TEXT_BYTES // 1024} KB as text; at most {MAX_ITEM_BYTES // 1024} KB"
    )


def _json_items(text: str) -> Iterator[Any]:
    """The elements of a JSON list, one at a time: each one's extent is measured first, then only that slice is
    decoded by the bounded parser (no NaN, no ``1e400``, no 4,000-digit integer)."""
    at = _list_start(text)
    ended = text.startswith("]", at)
    number = 0
    while not ended:
        end = _item_end(text, at, number)
        try:
            item = parse_bounded_json(text[at:end])
        except UnreadableJson as unreadable:
            raise BadItems(f"item {number} cannot be read: {unreadable}") from None
        except json.JSONDecodeError as error:
            why = "expected , or ]" if error.msg == "Extra data" else error.msg  # "[1 2]": two values in one slot
            raise _not_json(at + error.pos, why) from None
        yield item
        number += 1
        at = end
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


class _RowText:
    """The lines a CSV reader pulls, measured: one row's text (a quoted field may span lines) is bounded before the
    reader builds its fields (a header of a million columns would otherwise take ~140 MB, then pass as empty)."""

    def __init__(self, text: str) -> None:
        self.lines, self.row_chars, self.row = _lines(text), 0, 1

    def __iter__(self) -> Iterator[str]:
        for line in self.lines:
            self.row_chars += len(line)
            if self.row_chars > MAX_CSV_ROW_BYTES:
                what = "the CSV header" if self.row == 1 else f"CSV row {self.row}"
                raise BadItems(f"{what} is over {MAX_CSV_ROW_BYTES // 1024} KB")
            yield line

    def next_row(self) -> None:
        self.row_chars, self.row = 0, self.row + 1


def _csv_items(text: str) -> Iterator[dict[str, str]]:
    """Rows as Step Functions gives them with CSVHeaderLocation FIRST_ROW: one object per row, by header."""
    measured = _RowText(text)
    rows = csv.reader(iter(measured))
    try:
        header = next(rows, None)
        measured.next_row()
        if not header or not any(header):
            raise BadItems("the CSV object has no header row (its first row names the columns)")
        if len(header) > MAX_CSV_COLUMNS:
            raise BadItems(f"the CSV header names {len(header)} columns; at most {MAX_CSV_COLUMNS}")
        if len(set(header)) < len(header):
            raise BadItems("the CSV header names a column twice")
        for number, row in enumerate(rows, start=2):
            measured.next_row()
            if not row:  # Step Functions would make an item of it: refused rather than guessed at
                raise BadItems(f"CSV row {number} is empty")
            if len(row) > len(header):
                raise BadItems(f"CSV row {number} has {len(row)} fields; the header names {len(header)}")
            yield {name: row[index] if index < len(row) else "" for index, name in enumerate(header)}
    except csv.Error as error:
        raise BadItems(f"the object is not CSV ({error})") from None
