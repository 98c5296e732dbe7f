"""EventBridge event patterns, checked before EventBridge sees them. Pure.

EventBridge matches the events (each trigger becomes a rule); this module only says, with the path into the
pattern, what EventBridge would refuse and what jobsched bounds on top: the size and the number of values a
pattern holds, and, on a bus every team shares, which sources it may listen to. The grammar is EventBridge's
content filtering: exact values, prefix, suffix, equals-ignore-case, wildcard, anything-but, numeric, exists,
cidr and ``$or`` (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from typing import Any

MAX_PATTERN_CHARS = 2048  # EventBridge allows 4096; a job's trigger needs far less
MAX_PATTERN_VALUES = 100  # values and filters over the whole pattern: each is work for EventBridge's matcher
MAX_PATTERN_DEPTH = 10
MAX_WILDCARDS = 5
NUMERIC_OPERATORS = ("<", "<=", "=", ">=", ">")
STRING_FILTERS = ("prefix", "suffix", "equals-ignore-case", "wildcard")
FILTERS = (*STRING_FILTERS, "anything-but", "numeric", "exists", "cidr")
# Sources no trigger on a shared bus may listen to: AWS services' events name other teams' resources (use an
# s3 trigger, whose bucket is checked), and jobsched's own events are other teams' runs.
RESERVED_SOURCE_PREFIXES = ("aws.", "jobsched")

Location = tuple[str | int, ...]
Problem = tuple[Location, str]


def pattern_problems(pattern: Any, *, shared_bus: bool) -> list[Problem]:
    """Every problem of a pattern as (location inside it, message); empty when EventBridge would take it.
    ``shared_bus``: the bus is not the team's own, so ``source`` must be pinned to exact, non-reserved values."""
    if not isinstance(pattern, dict):
        return [((), 'an event pattern is a JSON object such as {"source": ["com.acme.orders"]}')]
    if not pattern:
        return [((), "an empty pattern matches every event on the bus; name at least a source")]
    if _deeper_than(pattern, MAX_PATTERN_DEPTH + 2):  # walked without recursion: a hostile pattern is cheap
        return [((), f"the pattern nests deeper than {MAX_PATTERN_DEPTH} levels")]
    size = len(json.dumps(pattern, separators=(",", ":")))
    if size > MAX_PATTERN_CHARS:
        return [((), f"the pattern is {size} characters; at most {MAX_PATTERN_CHARS} are allowed")]
    problems = list(_object_problems(pattern, (), depth=1))
    values = sum(1 for _ in _leaves(pattern))
    if values > MAX_PATTERN_VALUES:
        problems.append(((), f"the pattern holds {values} values; at most {MAX_PATTERN_VALUES} are allowed"))
    if shared_bus:
        problems.extend(_source_problems(pattern))
    return problems


def _object_problems(node: dict[str, Any], at: Location, *, depth: int) -> Iterator[Problem]:
    if depth > MAX_PATTERN_DEPTH:
        yield at, f"the pattern nests deeper than {MAX_PATTERN_DEPTH} levels"
        return
    for key, value in node.items():
        here = (*at, key)
        if key == "$or":
            yield from _or_problems(value, here, depth=depth)
        elif isinstance(value, dict):
            if not value:
                yield here, "an empty object matches nothing; give the fields to match"
            else:
                yield from _object_problems(value, here, depth=depth + 1)
        elif isinstance(value, list):
            if not value:
                yield here, "an empty list matches nothing; give the values to match"
            for index, item in enumerate(value):
                yield from _value_problems(item, (*here, index))
        else:
            yield here, "a value to match goes in a list: write [" + json.dumps(value) + "]"


def _or_problems(value: Any, at: Location, *, depth: int) -> Iterator[Problem]:
    if not isinstance(value, list) or len(value) < 2 or not all(isinstance(item, dict) for item in value):
        yield at, "$or takes a list of at least two patterns (objects)"
        return
    for index, item in enumerate(value):
        if not item:
            yield (*at, index), "an empty pattern in $or matches every event"
        else:
            yield from _object_problems(item, (*at, index), depth=depth + 1)


def _value_problems(item: Any, at: Location) -> Iterator[Problem]:
    if item is None or isinstance(item, str | bool | int | float):
        return
    if not isinstance(item, dict) or len(item) != 1:
        yield at, 'a value is a string, number, boolean, null or one filter such as {"prefix": "x"}'
        return
    ((name, argument),) = item.items()
    here = (*at, name)
    if name in STRING_FILTERS:
        yield from _string_filter_problems(name, argument, here)
    elif name == "anything-but":
        yield from _anything_but_problems(argument, here)
    elif name == "numeric":
        yield from _numeric_problems(argument, here)
    elif name == "exists":
        if not isinstance(argument, bool):
            yield here, "exists takes true or false"
    elif name == "cidr":
        try:
            ipaddress.ip_network(argument if isinstance(argument, str) else "", strict=False)
        except ValueError:
            yield here, 'cidr takes a network such as "10.0.0.0/24"'
    else:
        yield at, f"unknown filter '{name}'; allowed: {', '.join(FILTERS)}"


def _string_filter_problems(name: str, argument: Any, at: Location) -> Iterator[Problem]:
    if name in ("prefix", "suffix") and isinstance(argument, dict):
        if set(argument) != {"equals-ignore-case"} or not isinstance(argument["equals-ignore-case"], str):
            yield at, f'{name} takes a string or {{"equals-ignore-case": "..."}}'
        return
    if not isinstance(argument, str):
        yield at, f"{name} takes a string"
        return
    if name == "wildcard":
        unescaped = argument.replace("\\\\", "").replace("\\*", "")
        if "**" in unescaped:
            yield at, "a wildcard may not hold consecutive '*'"
        elif unescaped.count("*") > MAX_WILDCARDS:
            yield at, f"a wildcard holds at most {MAX_WILDCARDS} '*'"


def _anything_but_problems(argument: Any, at: Location) -> Iterator[Problem]:
    if isinstance(argument, str | int | float) and not isinstance(argument, bool):
        return
    if isinstance(argument, list):
        kinds = {str if isinstance(value, str) else float for value in argument if not isinstance(value, bool)}
        if not argument or len(kinds) != 1 or any(isinstance(value, bool) for value in argument):
            yield at, "anything-but takes a value, a non-empty list of strings or of numbers, or a filter"
        return
    if isinstance(argument, dict) and len(argument) == 1:
        ((name, inner),) = argument.items()
        if name in STRING_FILTERS:
            yield from _string_filter_problems(name, inner, (*at, name))
            return
    yield at, 'anything-but takes a value, a list, or {"prefix" | "suffix" | "equals-ignore-case" | "wildcard": ...}'


def _numeric_problems(argument: Any, at: Location) -> Iterator[Problem]:
    shape = 'numeric takes [operator, number] or a range such as [">", 0, "<=", 5]'
    if not isinstance(argument, list) or len(argument) not in (2, 4):
        yield at, shape
        return
    operators, numbers = argument[0::2], argument[1::2]
    if any(op not in NUMERIC_OPERATORS for op in operators) or any(
        isinstance(n, bool) or not isinstance(n, int | float) for n in numbers
    ):
        yield at, shape + f"; operators: {' '.join(NUMERIC_OPERATORS)}"
        return
    if len(argument) == 4 and (operators[0] not in (">", ">=") or operators[1] not in ("<", "<=")):
        yield at, "a numeric range starts with > or >= and ends with < or <="
    elif len(argument) == 4 and numbers[0] >= numbers[1]:
        yield at, "a numeric range's lower bound must be below its upper bound"


def _source_problems(pattern: dict[str, Any]) -> Iterator[Problem]:
    """On a shared bus a trigger names its sources exactly, and never AWS's or jobsched's own."""
    alternatives = pattern.get("$or") if "source" not in pattern else None
    branches = alternatives if isinstance(alternatives, list) and alternatives else [pattern]
    for index, branch in enumerate(branches):
        at: Location = ("$or", index) if branches is alternatives else ()
        sources = branch.get("source") if isinstance(branch, dict) else None
        if sources is None:
            yield (*at, "source"), 'on a bus every team shares, name the sources to listen to: source: ["com.acme.x"]'
            continue
        if not isinstance(sources, list):
            continue  # its own problem was reported
        for position, source in enumerate(sources):
            here = (*at, "source", position)
            if not isinstance(source, str):
                yield here, "on a bus every team shares, sources are exact names (no filters)"
            elif source.startswith(RESERVED_SOURCE_PREFIXES):
                yield (
                    here,
                    (
                        f"'{source}' is reserved on a shared bus: AWS services' and jobsched's events belong to other "
                        "teams too (for S3 objects use an s3 trigger; a team bus may carry anything)"
                    ),
                )


def named_sources(pattern: Any) -> list[tuple[Location, str]]:
    """The exact sources a pattern listens to (in each ``$or`` branch), with where each stands in it."""
    if not isinstance(pattern, dict):
        return []
    alternatives = pattern.get("$or") if "source" not in pattern else None
    branches = alternatives if isinstance(alternatives, list) and alternatives else [pattern]
    found: list[tuple[Location, str]] = []
    for index, branch in enumerate(branches):
        at: Location = ("$or", index) if branches is alternatives else ()
        sources = branch.get("source") if isinstance(branch, dict) else None
        if isinstance(sources, list):
            found += [((*at, "source", i), source) for i, source in enumerate(sources) if isinstance(source, str)]
    return found


def _deeper_than(node: Any, limit: int) -> bool:
    pending = [(node, 1)]
    while pending:
        current, depth = pending.pop()
        if depth > limit:
            return True
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else ()
        pending.extend((child, depth + 1) for child in children)
    return False


def _leaves(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _leaves(value)
    elif isinstance(node, list):
        for item in node:
            yield from _leaves(item)
    else:
        yield node
