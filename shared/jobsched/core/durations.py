"""Durations as people write them in job files: ``30s``, ``10m``, ``1h30m``, ``2d`` or ISO-8601 ``PT10M``.

Stored and printed back in the short form, so a job read from the API looks like the file it came from.
"""

from __future__ import annotations

import contextlib
import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

from jobsched.core.bounds import quoted

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
# ASCII digits, nine at most per unit: Unicode digits and 5,000-digit numbers never reach int() or timedelta().
_SHORT_FORM = re.compile(r"^(?:([0-9]{1,9})d)?(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,9})s)?$")
# Longer than any field allows (each has its own bound): refused here so no arithmetic on it can overflow.
MAX_DURATION = timedelta(days=36_500)
_ISO_ADAPTER: TypeAdapter[timedelta] = TypeAdapter(timedelta)

DURATION_HELP = "a duration such as 30s, 10m, 6h, 2d, 1h30m or ISO-8601 PT10M"


def parse_duration(value: Any) -> timedelta:
    """Parse a job-file duration; raises PydanticCustomError('duration') naming the allowed forms."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise PydanticCustomError(
            "duration",
            "expected {allowed}, got {got}",
            {"allowed": DURATION_HELP, "got": quoted(value)},
        )
    if isinstance(value, int):
        # A bare number is ambiguous (seconds? minutes?): make the writer say which.
        raise PydanticCustomError(
            "duration",
            "a bare number is ambiguous; write a unit, e.g. {value}s or {value}m",
            {"value": value},
        )
    text = value.strip()
    match = _SHORT_FORM.fullmatch(text)
    parsed: timedelta | None = None
    if text and match and any(match.groups()):
        days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
        parsed = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    elif text.upper().startswith("P") and len(text) <= 64:
        with contextlib.suppress(ValidationError, OverflowError):
            parsed = _ISO_ADAPTER.validate_python(text.upper())
    if parsed is not None and abs(parsed) <= MAX_DURATION:
        return parsed
    if parsed is not None:
        raise PydanticCustomError(
            "duration",
            "{got} is longer than any duration a job may name ({limit})",
            {"got": quoted(text), "limit": "36500d"},
        )
    raise PydanticCustomError(
        "duration", "expected {allowed}, got {got}", {"allowed": DURATION_HELP, "got": quoted(value)}
    )


def format_duration(value: timedelta) -> str:
    """The short form: 90 minutes -> '1h30m', zero -> '0s'."""
    remaining = int(value.total_seconds())
    if remaining == 0:
        return "0s"
    sign = "-" if remaining < 0 else ""
    remaining = abs(remaining)
    parts = []
    for unit, seconds in _UNIT_SECONDS.items():
        count, remaining = divmod(remaining, seconds)
        if count:
            parts.append(f"{count}{unit}")
    return sign + "".join(parts)


Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
"""A timedelta field that accepts the job-file forms and serializes back to the short form."""
