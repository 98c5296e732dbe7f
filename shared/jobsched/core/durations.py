"""Durations as people write them in job files: ``30s``, ``10m``, ``1h30m``, ``2d`` or ISO-8601 ``PT10M``.

Stored and printed back in the short form, so a job read from the API looks like the file it came from.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_SHORT_FORM = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
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
            {"allowed": DURATION_HELP, "got": repr(value)},
        )
    if isinstance(value, int):
        # A bare number is ambiguous (seconds? minutes?): make the writer say which.
        raise PydanticCustomError(
            "duration",
            "a bare number is ambiguous; write a unit, e.g. {value}s or {value}m",
            {"value": value},
        )
    text = value.strip()
    match = _SHORT_FORM.match(text)
    if text and match and any(match.groups()):
        days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if text.upper().startswith("P"):
        try:
            return _ISO_ADAPTER.validate_python(text.upper())
        except ValidationError:
            pass
    raise PydanticCustomError(
        "duration", "expected {allowed}, got {got}", {"allowed": DURATION_HELP, "got": repr(value)}
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
