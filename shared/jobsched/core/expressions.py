"""Schedule expressions: parsed once, into what croniter needs plus what it lacks.

Accepted forms:
- standard 5-field cron (Vixie semantics: day-of-month OR day-of-week when both are restricted;
  0 and 7 are Sunday);
- AWS ``cron(min hour dom month dow year)`` with ``?``, ``L``, ``W``, ``LW``, ``#``, ``nL``, a year
  field and AWS day-of-week numbering (1 = SUN ... 7 = SAT);
- ``rate(N minute|minutes|hour|hours|day|days)``: fixed absolute intervals;
- ``at(YYYY-MM-DDThh:mm:ss)``: one time, wall clock in the schedule's zone;
- ``@hourly @daily @midnight @weekly @monthly @yearly @annually``;
- ``H`` in the minute or hour field (``H``, ``H(0-29)``, ``H/15``, ``H(0-29)/15``): a value fixed per job
  from a hash of ``team/name``, to spread top-of-hour load.

Cron parsing and iteration are croniter's; this module only rewrites AWS syntax into croniter syntax,
expands ``H`` with our own stable hash, and classifies entries as fixed-time or wildcard for DST.
"""

from __future__ import annotations

import calendar
import hashlib
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import lru_cache

from croniter import croniter
from croniter.croniter import CroniterBadDateError, CroniterError

__all__ = [
    "AtExpression",
    "CronExpression",
    "ExpressionError",
    "RateExpression",
    "ScheduleExpression",
    "hash_value",
    "parse_expression",
]


class ExpressionError(ValueError):
    """A schedule expression that cannot be used; the message says what is allowed."""


MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week", "year")
_H_RANGES = {"minute": (0, 59), "hour": (0, 23)}
_H_TOKEN = re.compile(r"^H(?:\((\d+)-(\d+)\))?(?:/(\d+))?$")
_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$", re.IGNORECASE)
_AT = re.compile(r"^at\(\s*(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\s*\)$", re.IGNORECASE)
_AWS_CRON = re.compile(r"^cron\((.*)\)$", re.IGNORECASE | re.DOTALL)
_DOW_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_YEAR_MIN, _YEAR_MAX = 1970, 2199

EXPRESSION_HELP = (
    "a 5-field cron ('30 1 * * *'), AWS cron(min hour dom month dow year), "
    "rate(N minutes|hours|days), at(YYYY-MM-DDThh:mm:ss) or @hourly/@daily/@weekly/@monthly/@yearly"
)


def hash_value(hash_key: str, salt: str, modulo: int) -> int:
    """A number in [0, modulo) fixed forever for (hash_key, salt): sha256, not Python's hash()."""
    digest = hashlib.sha256(f"{hash_key}\x00{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % modulo


@dataclass(frozen=True)
class RateExpression:
    interval: timedelta
    text: str


@dataclass(frozen=True)
class AtExpression:
    wall: datetime  # naive wall-clock time in the schedule's zone
    text: str


@dataclass(frozen=True)
class CronExpression:
    """A cron entry ready for croniter once ``H`` is expanded with the job's hash key."""

    text: str
    minute: str
    hour: str
    day_of_month: str
    month: str
    day_of_week: str  # croniter numbering: 0 = Sunday
    years: tuple[int, int] | None = None  # inclusive range from an AWS year field
    year_values: frozenset[int] | None = None  # set when the year field is a list or has a step
    day_or: bool = True
    last_weekday_of_month: bool = False  # AWS 'LW', filtered here because croniter lacks it
    uses_hash: bool = False
    # ISC cron: an entry whose minute or hour field starts with '*' runs at every wall time that exists
    wildcard: bool = field(default=False)

    def croniter_text(self, hash_key: str) -> str:
        minute = _expand_hash(self.minute, "minute", hash_key)
        hour = _expand_hash(self.hour, "hour", hash_key)
        return f"{minute} {hour} {self.day_of_month} {self.month} {self.day_of_week}"

    def day_allowed(self, day: date) -> bool:
        """Checks croniter cannot express: the AWS year field and 'LW'."""
        if self.years is not None and not self.years[0] <= day.year <= self.years[1]:
            return False
        if self.year_values is not None and day.year not in self.year_values:
            return False
        return not self.last_weekday_of_month or day == _last_weekday(day.year, day.month)


ScheduleExpression = CronExpression | RateExpression | AtExpression


@lru_cache(maxsize=8192)
def parse_expression(text: str) -> ScheduleExpression:
    """Parse any accepted expression; ExpressionError says what is wrong and what is allowed.

    Cached: validation, compilation and every dispatcher tick parse the same few texts.
    """
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"empty expression; expected {EXPRESSION_HELP}")
    stripped = " ".join(text.split())
    if match := _RATE.fullmatch(stripped):
        return _parse_rate(match, stripped)
    if match := _AT.fullmatch(stripped):
        try:
            wall = datetime.fromisoformat(match.group(1))
        except ValueError as error:
            raise ExpressionError(f"{stripped}: not a valid date and time ({error})") from None
        return AtExpression(wall=wall, text=stripped)
    if stripped.lower().startswith("at("):
        raise ExpressionError(
            f"{stripped}: expected at(YYYY-MM-DDThh:mm:ss), a wall-clock time in the schedule's "
            "timezone (no offset; set schedule.timezone instead)"
        )
    if stripped.lower().startswith("rate("):
        raise ExpressionError(
            f"{stripped}: expected rate(N minute|minutes|hour|hours|day|days) with N a whole number >= 1"
        )
    if match := _AWS_CRON.fullmatch(stripped):
        expression = _parse_aws_cron(match.group(1).strip(), stripped)
    elif stripped.startswith("@"):
        macro = MACROS.get(stripped.lower())
        if macro is None:
            raise ExpressionError(f"unknown macro {stripped}; allowed: {', '.join(MACROS)}")
        expression = _parse_standard_cron(macro, stripped)
    else:
        expression = _parse_standard_cron(stripped, stripped)
    _check_matches_ever(expression)
    return expression


def _parse_rate(match: re.Match[str], text: str) -> RateExpression:
    count = int(match.group(1))
    unit = match.group(2).lower().rstrip("s")
    if count < 1:
        raise ExpressionError(f"{text}: the interval must be at least 1 {unit}")
    if (count == 1) != (not match.group(2).lower().endswith("s")):
        # AWS requires 'rate(1 minute)' but 'rate(5 minutes)'; be as strict so files port both ways.
        expected = f"rate({count} {unit}{'' if count == 1 else 's'})"
        raise ExpressionError(f"{text}: write {expected} (singular unit for 1, plural otherwise)")
    seconds = {"minute": 60, "hour": 3600, "day": 86400}[unit] * count
    if seconds > 366 * 86400:
        raise ExpressionError(f"{text}: the interval may be at most 366 days")
    return RateExpression(interval=timedelta(seconds=seconds), text=text)


def _parse_standard_cron(fields_text: str, original: str) -> CronExpression:
    fields = fields_text.split()
    if len(fields) != 5:
        hint = ""
        if len(fields) == 6:
            hint = " (for AWS 6-field syntax write cron(min hour dom month dow year))"
        raise ExpressionError(
            f"{original}: a cron entry has 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)}{hint}"
        )
    minute, hour, dom, month, dow = fields
    _check_hash_fields(fields, original)
    # Vixie cron: a day field whose text starts with '*' (even '*/2') does not restrict, so the
    # days are ANDed; only when both are restricted is it day-of-month OR day-of-week.
    day_or = not (dom.startswith("*") or dow.startswith("*"))
    expression = CronExpression(
        text=original,
        minute=minute,
        hour=hour,
        day_of_month=dom,
        month=month,
        day_of_week=dow,
        day_or=day_or,
        uses_hash="H" in minute + hour,
        wildcard=minute.startswith("*") or hour.startswith("*"),
    )
    _check_with_croniter(expression, original)
    return expression


def _parse_aws_cron(inner: str, original: str) -> CronExpression:
    fields = inner.upper().split()
    if len(fields) != 6:
        raise ExpressionError(
            f"{original}: AWS cron has 6 fields (minutes hours day-of-month month day-of-week year), got {len(fields)}"
        )
    minute, hour, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise ExpressionError(
            f"{original}: AWS cron needs '?' in exactly one of day-of-month and day-of-week "
            "(e.g. cron(30 1 * * ? *) or cron(0 9 ? * MON-FRI *))"
        )
    _check_hash_fields(fields, original)
    last_weekday = dom == "LW"
    if last_weekday:
        dom = "26-31"  # the last weekday of any month falls on one of these days; filtered exactly later
    elif dom.startswith("L-"):
        raise ExpressionError(f"{original}: 'L-n' is not supported; use L, LW, nW or day numbers")
    years, year_values = _parse_year(year, original)
    expression = CronExpression(
        text=original,
        minute=minute,
        hour=hour,
        day_of_month="*" if dom == "?" else dom,
        month=month,
        day_of_week="*" if dow == "?" else _aws_dow_to_croniter(dow, original),
        years=years,
        year_values=year_values,
        day_or=False,  # AWS never ORs: the other day field is always '?'
        last_weekday_of_month=last_weekday,
        uses_hash="H" in minute + hour,
        wildcard=minute.startswith("*") or hour.startswith("*"),
    )
    _check_with_croniter(expression, original)
    return expression


def _aws_dow_to_croniter(dow: str, original: str) -> str:
    """AWS numbers days 1 = SUN ... 7 = SAT; croniter 0 = SUN ... 6 = SAT. Names are unchanged."""

    def day(token: str) -> str:
        if token in _DOW_NAMES:
            return token
        if not token.isdigit() or not 1 <= int(token) <= 7:
            raise ExpressionError(f"{original}: day-of-week '{token}' must be 1-7 (1 = SUN ... 7 = SAT) or SUN-SAT")
        return str(int(token) - 1)

    parts = []
    for item in dow.split(","):
        if item == "L":
            parts.append("6")  # Quartz/AWS: 'L' alone in day-of-week is the last day of the week
        elif item.endswith("L") and len(item) > 1:
            parts.append(f"L{day(item[:-1])}")  # 'nL': the last such weekday of the month
        elif "#" in item:
            weekday, _, nth = item.partition("#")
            if not nth.isdigit() or not 1 <= int(nth) <= 5:
                raise ExpressionError(f"{original}: '{item}': the number after '#' must be 1-5")
            parts.append(f"{day(weekday)}#{nth}")
        else:
            base, slash, step = item.partition("/")
            if base != "*":
                base = "-".join(day(bound) for bound in base.split("-"))
            parts.append(base + slash + step)
    return ",".join(parts)


def _parse_year(year: str, original: str) -> tuple[tuple[int, int] | None, frozenset[int] | None]:
    if year in ("*", "?"):
        return None, None
    values: set[int] = set()
    for item in year.split(","):
        base, _, step_text = item.partition("/")
        try:
            if base == "*":
                low, high = _YEAR_MIN, _YEAR_MAX
            elif "-" in base:
                low_text, high_text = base.split("-", 1)
                low, high = int(low_text), int(high_text)
            else:
                low = int(base)
                high = _YEAR_MAX if step_text else low
            step = int(step_text) if step_text else 1
        except ValueError:
            raise ExpressionError(
                f"{original}: year '{item}' must be *, a year {_YEAR_MIN}-{_YEAR_MAX}, a range or a list"
            ) from None
        if not (_YEAR_MIN <= low <= high <= _YEAR_MAX) or step < 1:
            raise ExpressionError(f"{original}: year '{item}' must lie within {_YEAR_MIN}-{_YEAR_MAX}, low before high")
        values.update(range(low, high + 1, step))
    span = (min(values), max(values))
    exact = None if values == set(range(span[0], span[1] + 1)) else frozenset(values)
    return span, exact


def _check_hash_fields(fields: list[str], original: str) -> None:
    for name, text in zip(_FIELD_NAMES, fields, strict=False):
        if "H" not in text:
            continue
        if name not in _H_RANGES:
            raise ExpressionError(f"{original}: 'H' is allowed in the minute and hour fields only")
        for token in text.split(","):
            if "H" in token and not _H_TOKEN.fullmatch(token):
                raise ExpressionError(f"{original}: {name} '{token}': write H, H(a-b), H/n or H(a-b)/n")


def _expand_hash(text: str, field_name: str, hash_key: str) -> str:
    if "H" not in text:
        return text
    low, high = _H_RANGES[field_name]
    tokens = []
    for token in text.split(","):
        match = _H_TOKEN.fullmatch(token)
        if not match:
            tokens.append(token)
            continue
        range_low = int(match.group(1)) if match.group(1) else low
        range_high = int(match.group(2)) if match.group(2) else high
        step = int(match.group(3)) if match.group(3) else None
        if step:
            start = range_low + hash_value(hash_key, field_name, min(step, range_high - range_low + 1))
            tokens.append(f"{start}-{range_high}/{step}")
        else:
            tokens.append(str(range_low + hash_value(hash_key, field_name, range_high - range_low + 1)))
    return ",".join(tokens)


def _check_with_croniter(expression: CronExpression, original: str) -> None:
    text = expression.croniter_text("syntax-check")
    try:
        croniter(text, datetime(2000, 1, 1), day_or=expression.day_or)  # noqa: DTZ001 - wall time
    except CroniterError as error:
        raise ExpressionError(f"{original}: {_croniter_message(error)}") from None
    if not croniter.is_valid(text):
        raise ExpressionError(f"{original}: not a valid cron entry; expected {EXPRESSION_HELP}")


def _check_matches_ever(expression: CronExpression) -> None:
    """Reject entries that can never fire, like '0 0 30 2 *' (February 30th).

    Only the day fields decide this, so days are enumerated, not minutes.
    """
    start_year = expression.years[0] if expression.years else 2000
    days = f"0 0 {expression.day_of_month} {expression.month} {expression.day_of_week}"
    cursor = croniter(days, datetime(start_year - 1, 12, 31), day_or=expression.day_or)  # noqa: DTZ001
    for _ in range(800):
        try:
            candidate: datetime = cursor.get_next(datetime)
        except CroniterBadDateError:
            break
        if expression.years and candidate.year > expression.years[1]:
            break
        if expression.day_allowed(candidate.date()):
            return
    raise ExpressionError(f"{expression.text}: never fires (no date matches every field)")


def _croniter_message(error: CroniterError) -> str:
    message = str(error)
    return message.replace("[", "'").replace("]", "'") if message else "not a valid cron entry"


def _last_weekday(year: int, month: int) -> date:
    last = date(year, month, calendar.monthrange(year, month)[1])
    while last.weekday() >= 5:
        last = last.replace(day=last.day - 1)
    return last
