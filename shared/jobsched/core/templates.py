"""Object keys named by a run's logical instant: ``s3://bucket/exports/{logical_date:%Y-%m-%d}/_SUCCESS``.

Only ``{logical_date}`` (ISO date) and ``{logical_date:FORMAT}`` with a small set of strftime directives are
allowed, so a template is bounded work to render and can reach nothing but the date (``str.format`` would
follow attributes: ``{logical_date.__class__}``). The date is the instant in the job's schedule timezone
(UTC for jobs without a schedule): a 00:30 Europe/Berlin run waits for that day's file, not the day before.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/(?P<key>.+)$")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")  # S3's rule for a bucket name, less ".."
PLACEHOLDER = re.compile(r"\{logical_date(?::(?P<format>[^{}]*))?\}")
DIRECTIVES = frozenset("YmdHMSjyGVu")  # year, month, day, hour, minute, second, day of year, ISO week parts
FORMAT_TEXT = re.compile(r"^(?:%[" + "".join(sorted(DIRECTIVES)) + r"]|[A-Za-z0-9_.=\-/])*$")
MAX_KEY_BYTES = 1024  # S3's limit on an object key
MAX_PLACEHOLDERS = 8


class TemplateError(ValueError):
    pass


def is_bucket_name(value: str) -> bool:
    return BUCKET.fullmatch(value) is not None and ".." not in value


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key template) of ``s3://bucket/key``; TemplateError naming what is wrong."""
    found = S3_URI.fullmatch(uri)
    if found is None:
        raise TemplateError(f"'{uri}' is not s3://bucket/key")
    key = found["key"]
    check_key_template(key)
    return found["bucket"], key


def check_key_template(key: str) -> None:
    placeholders = list(PLACEHOLDER.finditer(key))
    if len(placeholders) > MAX_PLACEHOLDERS:
        raise TemplateError(f"at most {MAX_PLACEHOLDERS} {{logical_date}} placeholders")
    for placeholder in placeholders:
        text = placeholder["format"]
        if text is not None and not FORMAT_TEXT.fullmatch(text):
            allowed = ", ".join(f"%{d}" for d in sorted(DIRECTIVES))
            raise TemplateError(f"'{placeholder[0]}': formats take {allowed} and letters, digits, _ . = - /")
    if "{" in PLACEHOLDER.sub("", key) or "}" in PLACEHOLDER.sub("", key):
        raise TemplateError("the only placeholder is {logical_date} or {logical_date:FORMAT}, e.g. %Y-%m-%d")
    if len(render_key(key, datetime(2000, 12, 31, 23, 59, 59, tzinfo=UTC), ZoneInfo("UTC")).encode()) > MAX_KEY_BYTES:
        raise TemplateError(f"the key is longer than S3's {MAX_KEY_BYTES} bytes once rendered")


def render_key(key: str, instant: datetime, timezone: ZoneInfo) -> str:
    local = instant.astimezone(timezone)

    def one(placeholder: re.Match[str]) -> str:
        text = placeholder["format"]
        return local.date().isoformat() if text is None else local.strftime(text)

    return PLACEHOLDER.sub(one, key)


def static_prefix(key: str) -> str:
    """The part of a key template before its first placeholder: what an event rule can match on."""
    found = PLACEHOLDER.search(key)
    return key if found is None else key[: found.start()]


def static_suffix(key: str) -> str:
    """The part of a key template after its last placeholder."""
    found = list(PLACEHOLDER.finditer(key))
    return key if not found else key[found[-1].end() :]
