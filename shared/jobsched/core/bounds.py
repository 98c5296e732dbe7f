"""Bounded parsers for the values teams send that are not durations (``core.durations``): instants within the
years a schedule can reach, version-like integers, and JSON whose nesting a parser can survive.

Each refuses what it cannot represent with a located error instead of letting Python's arithmetic or recursion
limit raise later, where it would escape as a 5xx or a crashed handler.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, Field, ValidationInfo
from pydantic_core import PydanticCustomError

# Instants a job may name: wide enough for any real schedule and backfill, narrow enough that adding a year of
# fire times, a time-zone offset or a retention period never leaves datetime's range (years 1..9999).
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2199, 12, 31, 23, 59, 59, tzinfo=UTC)
INSTANT_RANGE = "an instant in the years 1970 to 2199"

# Deeper than any job spec or payload a person writes; shallow enough that json.loads and pydantic recurse safely.
MAX_JSON_DEPTH = 64

_ASCII_DIGITS = re.compile(r"[0-9]+", re.ASCII)
# A JSON string, unrolled and possessive: "(?:[^"\\]|\\.)*" keeps backtracking state for every character (~100
# bytes each: a 1 MB string took ~100 MB to skip).
_STRINGS = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


# The validation context of a spec read back from the tables: checks added after it was stored (header values, the
# instant range) apply to what teams send, not to what is already stored, so a stricter release never makes a
# stored job unreadable (and the dispatcher's read of a batch of due jobs fail with it). The worker's adapters
# turn what such a job can no longer do into a failed run.
STORED = {"stored": True}


def is_stored(info: ValidationInfo) -> bool:
    return isinstance(info.context, dict) and bool(info.context.get("stored"))


def within_instant_range(value: datetime, info: ValidationInfo) -> datetime:
    """An aware instant written in the years 1970 to 2199, in UTC; raises PydanticCustomError('instant_range').
    The year as written, so that the schema's pattern can say it (its UTC form is then always representable)."""
    if is_stored(info):
        return value.astimezone(UTC)
    if not EARLIEST.year <= value.year <= LATEST.year:
        raise PydanticCustomError(
            "instant_range", "expected {allowed}, got {got}", {"allowed": INSTANT_RANGE, "got": value.isoformat()}
        )
    return value.astimezone(UTC)


Instant = Annotated[
    AwareDatetime,
    AfterValidator(within_instant_range),
    Field(json_schema_extra={"pattern": r"^(19[7-9][0-9]|2[01][0-9][0-9])-"}),  # the years, for the schema
]
"""An aware datetime field within the years a schedule can reach, stored in UTC."""


def quoted(value: object) -> str:
    """A value as an error message quotes it, cut short: a 5,000-character input is not echoed back whole."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _whole_number(value: Any) -> Any:
    """A JSON integer, as JSON Schema defines one: 5 or 5.0, never true or "5" (pydantic's lax int takes both)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("int_type", "expected a whole number, got {got}", {"got": quoted(value)})
    return value


WHOLE_NUMBER = BeforeValidator(_whole_number)
"""For an int field that takes only JSON numbers (integral floats included), not booleans or strings; after the
field's bounds in ``Annotated`` so that the schema keeps them (``Annotated[int, Field(ge=1), WHOLE_NUMBER]``)."""


def parse_bounded_int(text: str, *, max_digits: int) -> int | None:
    """ASCII digits only, at most ``max_digits`` of them: ``None`` otherwise (``'²'.isdigit()`` is true and
    ``int('²')`` raises; 5,000 digits exceed int()'s limit)."""
    if len(text) > max_digits or not _ASCII_DIGITS.fullmatch(text):
        return None
    return int(text)


def json_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text nests arrays and objects deeper than ``limit``, found in one pass without parsing, so a
    body nested 60,000 deep is refused before a recursive parser sees it. Brackets inside strings do not count."""
    if text.count("[") + text.count("{") <= limit:  # the usual body: too few brackets to nest that deep
        return False
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            return True
    return False


# Outputs, upstream outputs and list items that teams' work returns: JSON a check, a reference or a map reads.
MAX_OUTPUT_INT_DIGITS = 64  # enough for any id or count; a 4,000-digit integer makes arithmetic slow


class UnreadableJson(ValueError):
    """JSON that a bounded reader refuses (too deep, a non-finite number, an integer too long): the message says
    which, for the check, task or item that reads it."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UnreadableJson(f"the number {text[:20]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_OUTPUT_INT_DIGITS:
        raise UnreadableJson(f"an integer of {len(text.lstrip('-'))} digits; at most {MAX_OUTPUT_INT_DIGITS}")
    return int(text)


def _no_constant(name: str) -> Any:
    raise UnreadableJson(f"{name} is not JSON")


_BOUNDED_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_int=_bounded_int, parse_constant=_no_constant)


def parse_bounded_json(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON text as a value, or UnreadableJson: nesting deeper than ``max_depth`` is refused before parsing (no
    RecursionError), NaN and Infinity are refused, numbers out of a float's range (``1e400``) and integers longer
    than MAX_OUTPUT_INT_DIGITS digits are refused. Not JSON at all: ValueError (json's own)."""
    if json_depth_exceeds(text, max_depth):
        raise UnreadableJson(f"nested deeper than {max_depth} levels")
    try:
        return _BOUNDED_DECODER.decode(text)
    except RecursionError:  # unreachable after the depth check; kept so no input can raise past here
        raise UnreadableJson(f"nested deeper than {max_depth} levels") from None
