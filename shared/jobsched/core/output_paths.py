"""Paths into a target's output and assertions over them (``output.rows > 0``, ``len(output.files) >= 1``), as
checks and references to upstream outputs write them. Pure, and bounded whatever a team writes: a path, an
operator and a JSON literal parsed here (never ``eval``), at most MAX_PATH_STEPS steps."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_EXPECT_CHARS = 256
MAX_PATH_STEPS = 16

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}
ORDERING = frozenset({">", ">=", "<", "<="})
# One step of a path: .name, ["any name"] or [index].
STEP = re.compile(r'\.(?P<name>[A-Za-z_][A-Za-z0-9_\-]{0,127})|\["(?P<quoted>[^"\\]{0,128})"\]|\[(?P<index>\d{1,6})\]')
STEP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,127}")
ASSERTION = re.compile(
    r"^\s*(?:(?P<len>len)\(\s*(?P<lpath>output(?:[^()\s\[]|\[(?:\"[^\"\]]*\"|[^\]\"]*)\])*)\s*\)"
    r"|(?P<path>output(?:[^()\s=!<>\[]|\[(?:\"[^\"\]]*\"|[^\]\"]*)\])*))"
    r"\s*(?P<op>==|!=|>=|<=|>|<)\s*(?P<literal>.+?)\s*$"
)


class CheckDefinitionError(ValueError):
    """A check that cannot be evaluated as written: the message says what is allowed."""


# ------------------------------------------------------------------------------- assertions


PathStep = str | int


@dataclass(frozen=True)
class Assertion:
    text: str
    path: tuple[PathStep, ...]
    length: bool  # len(path) rather than the value at path
    operator: str
    literal: Any

    def describe_path(self) -> str:
        shown = describe_path(self.path)
        return f"len({shown})" if self.length else shown


def describe_path(path: Sequence[PathStep]) -> str:
    """output.files[0], output["a name"]: a path as users write it."""
    shown = "output"
    for step in path:
        if isinstance(step, int):
            shown += f"[{step}]"
        elif STEP_NAME.fullmatch(step):
            shown += f".{step}"
        else:
            shown += f'["{step}"]'
    return shown


def parse_assertion(text: str) -> Assertion:
    """``output.rows > 0`` -> Assertion; CheckDefinitionError naming the form otherwise."""
    if len(text) > MAX_EXPECT_CHARS:
        raise CheckDefinitionError(f"an assertion is at most {MAX_EXPECT_CHARS} characters")
    found = ASSERTION.match(text)
    if found is None:
        raise CheckDefinitionError(
            "an assertion is PATH OP VALUE: PATH is output, output.name, output[0] or len(output.list); OP one of "
            + " ".join(OPERATORS)
            + '; VALUE a JSON number, "string", true, false or null (e.g. output.rows > 0)'
        )
    whole = found["lpath"] or found["path"]
    path = parse_steps(whole.removeprefix("output"), whole)
    try:
        literal = json.loads(found["literal"])
    except ValueError:
        raise CheckDefinitionError(
            f"'{found['literal']}' is not a JSON value: write numbers as 10, strings in double quotes, "
            "true, false or null"
        ) from None
    if isinstance(literal, dict | list):
        raise CheckDefinitionError("compare with a number, a string, true, false or null (not a list or an object)")
    operator = found["op"]
    length = found["len"] is not None
    if operator in ORDERING and not (_is_number(literal) or isinstance(literal, str)):
        raise CheckDefinitionError(f"{operator} compares numbers or strings (got {found['literal']})")
    if length and not _is_number(literal):
        raise CheckDefinitionError("len(...) is a number: compare it with a number")
    return Assertion(text.strip(), path, length, operator, literal)


def parse_steps(rest: str, text: str) -> tuple[PathStep, ...]:
    """The steps after ``output`` (``.name``, ``["name"]``, ``[index]``); ``text`` is the whole, for messages."""
    steps: list[PathStep] = []
    while rest:
        found = STEP.match(rest)
        if found is None:
            raise CheckDefinitionError(
                f"'{text}': a path is output followed by .name, [\"name\"] or [index] steps (e.g. output.files[0])"
            )
        if found["index"] is not None:
            steps.append(int(found["index"]))
        else:
            steps.append(found["name"] if found["name"] is not None else found["quoted"])
        rest = rest[found.end() :]
    if len(steps) > MAX_PATH_STEPS:
        raise CheckDefinitionError(f"a path has at most {MAX_PATH_STEPS} steps")
    return tuple(steps)


MISSING = object()  # what value_at returns for a path not in the document


def value_at(document: Any, path: Sequence[PathStep]) -> Any:
    """The value at ``path`` in ``document``; MISSING when a step does not exist."""
    current = document
    for step in path:
        in_list = isinstance(step, int) and isinstance(current, list) and step < len(current)
        if not (in_list or (isinstance(step, str) and isinstance(current, dict) and step in current)):
            return MISSING
        current = current[step]
    return current


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if _is_number(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def holds(assertion: Assertion, output: Any) -> str | None:
    """None when the assertion holds for ``output``; otherwise why not, as users read it."""
    where = assertion.describe_path()
    value = value_at(output, assertion.path)
    if value is MISSING:
        return f"{where.removeprefix('len(').removesuffix(')')} is missing"
    if assertion.length:
        if not isinstance(value, list | dict | str):
            return f"{where}: {_kind(value)} has no length"
        value = len(value)
    literal = assertion.literal
    if assertion.operator in ORDERING:
        numbers = _is_number(value) and _is_number(literal)
        if not (numbers or (isinstance(value, str) and isinstance(literal, str))):
            return f"{where} is {_kind(value)}; {assertion.operator} {shown(literal)} needs {_kind(literal)}"
    elif _kind(value) != _kind(literal):  # 1 == true is false here, as in JSON
        return None if assertion.operator == "!=" else f"{where} is {shown(value)}, expected == {shown(literal)}"
    if OPERATORS[assertion.operator](value, literal):
        return None
    return f"{where} is {shown(value)}, expected {assertion.operator} {shown(literal)}"
