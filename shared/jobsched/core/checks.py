"""Quality gates on what a target returned: ``checks:`` on a job or a DAG task. Pure.

A target can succeed and still hand back nothing useful (the domain reference's "misleading success metric": an
extract that "succeeded" with zero rows). A check is either an assertion, ``output.rows > 0`` or
``len(output.files) >= 1``, or a JSON Schema the output must match. ``severity: error`` fails the attempt (not
retried: the target answered, its data did not pass); ``warn`` records the failure, counts it and pages at
warning severity, and the run still succeeds.

Every check is bounded work whatever a team writes: an assertion is a path, an operator and a JSON literal
parsed here (never ``eval``); a schema is limited to keywords whose cost is linear in the output (no
``pattern``, whose regular expressions can backtrack for minutes, no ``$ref``, no ``uniqueItems``); the output
is checked only up to MAX_CHECKED_OUTPUT bytes, read by the bounded parser (``core.bounds``: no nesting deeper
than 64, no NaN, no ``1e400``, no 4,000-digit integer). ``enum`` and ``const`` are tested by canonical JSON in a set
(an ``enum`` of thousands of values against a list of thousands of items would otherwise cost their product), at
most MAX_ENUM_VALUES values; a schema stops at its first error; and each check has a CPU budget
(CHECK_CPU_SECONDS, and CHECKS_CPU_SECONDS for all of one output's): a check that exceeds it, or raises anything
at all, fails with the reason, never the worker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from jobsched.core.bounds import UnreadableJson, parse_bounded_json
from jobsched.core.output_paths import CheckDefinitionError, holds, parse_assertion, shown

MAX_CHECKS = 10  # per job or task
MAX_SCHEMA_BYTES = 8 * 1024
MAX_SCHEMA_DEPTH = 8
MAX_CHECKED_OUTPUT = 1024 * 1024  # bytes of output parsed for checks; larger outputs fail their checks
MAX_CHECK_MESSAGE = 300
MAX_ENUM_VALUES = 100  # values of one enum (const is one)
CHECK_CPU_SECONDS = 2.0  # of the worker's CPU, per check: past it the check fails (1 MB checked: about 1 s)
CHECKS_CPU_SECONDS = 5.0  # for all the checks of one output: those after it fail unevaluated

Severity = Literal["error", "warn"]
# JSON Schema keywords whose checking work grows linearly with the output.
SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "enum",
        "const",
        "title",
        "description",
    }
)
SCHEMA_SUBSCHEMAS = ("properties",)  # keywords whose values map names to subschemas
SCHEMA_SUBSCHEMA = ("items", "additionalProperties")  # keywords whose value is a subschema (or a boolean)


# ------------------------------------------------------------------------------------ schemas


def check_schema(schema: Mapping[str, Any]) -> None:
    """A schema is valid JSON Schema and uses only linear-cost keywords; CheckDefinitionError otherwise."""
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise CheckDefinitionError(f"a schema is at most {MAX_SCHEMA_BYTES} bytes as JSON")
    _check_keywords(schema, "", 0)
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError as error:
        raise CheckDefinitionError(f"not a valid JSON Schema: {error.message}"[:MAX_CHECK_MESSAGE]) from None


def _check_keywords(schema: Any, where: str, depth: int) -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise CheckDefinitionError(f"{where or 'the schema'} must be an object (a schema) or a boolean")
    if depth > MAX_SCHEMA_DEPTH:
        raise CheckDefinitionError(f"schemas nest at most {MAX_SCHEMA_DEPTH} levels")
    _check_enum(schema, where)
    unknown = sorted(set(schema) - SCHEMA_KEYWORDS)
    if unknown:
        raise CheckDefinitionError(
            f"{where or 'the schema'} uses {', '.join(unknown)}; allowed keywords: {', '.join(sorted(SCHEMA_KEYWORDS))}"
        )
    for keyword in SCHEMA_SUBSCHEMAS:
        children = schema.get(keyword)
        if isinstance(children, Mapping):
            for name, child in children.items():
                _check_keywords(child, f"{where}{keyword}.{name}.", depth + 1)
    for keyword in SCHEMA_SUBSCHEMA:
        if keyword in schema:
            _check_keywords(schema[keyword], f"{where}{keyword}.", depth + 1)


class CheckBudgetExceeded(Exception):
    """A check used its CPU budget: it fails, and the worker goes on with the next."""


def canonical(value: Any) -> str:
    """JSON text equal for values JSON Schema calls equal (1 and 1.0, objects in any key order; never true and
    1): membership in ``enum`` becomes a set lookup."""

    def normal(item: Any) -> Any:
        if isinstance(item, float) and item.is_integer():
            return int(item)
        if isinstance(item, dict):
            return {key: normal(child) for key, child in item.items()}
        if isinstance(item, list):
            return [normal(child) for child in item]
        return item

    return json.dumps(normal(value), sort_keys=True, separators=(",", ":"))


def _validator_class(deadline: float) -> Any:
    """Draft 2020-12 with ``enum``/``const`` by canonical JSON in a set, and every keyword checking the budget."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    members: dict[int, frozenset[str]] = {}  # id(the enum list) -> its values, canonical: built once a check

    def enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
        allowed = members.get(id(enums))
        if allowed is None:
            allowed = members[id(enums)] = frozenset(canonical(value) for value in enums)
        if canonical(instance) not in allowed:
            yield ValidationError(f"{shown(instance)} is not one of the {len(enums)} allowed values")

    def const(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if canonical(instance) != canonical(value):
            yield ValidationError(f"{shown(value)} was expected")

    def budgeted(keyword: Callable[..., Any]) -> Callable[..., Iterator[Any]]:
        def check(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            if time.thread_time() > deadline:
                raise CheckBudgetExceeded
            found = keyword(validator, value, instance, schema)
            if found is not None:
                yield from found

        return check

    keywords = dict(Draft202012Validator.VALIDATORS) | {"enum": enum, "const": const}
    return validators.extend(Draft202012Validator, {name: budgeted(fn) for name, fn in keywords.items()})


def _check_enum(schema: Mapping[str, Any], where: str) -> None:
    enum = schema.get("enum")
    if isinstance(enum, list) and len(enum) > MAX_ENUM_VALUES:
        raise CheckDefinitionError(f"{where}enum lists {len(enum)} values; at most {MAX_ENUM_VALUES}")


def schema_problem(schema: Mapping[str, Any], output: Any, *, cpu_seconds: float = CHECK_CPU_SECONDS) -> str | None:
    """The output's first error against the schema (None: it matches), within ``cpu_seconds`` of this thread's
    CPU; CheckBudgetExceeded past it."""
    checker = _validator_class(time.thread_time() + cpu_seconds)(dict(schema))
    error = next(iter(checker.iter_errors(output)), None)
    if error is None:
        return None
    where = "output" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{where}: {error.message}"


# ---------------------------------------------------------------------------------- evaluation


class CheckLike(Protocol):
    """A check as the spec gives it (core.spec.OutputCheck)."""

    @property
    def label(self) -> str: ...
    @property
    def expect(self) -> str | None: ...
    @property
    def json_schema(self) -> dict[str, Any] | None: ...
    @property
    def severity(self) -> Severity: ...


@dataclass(frozen=True)
class CheckResult:
    name: str
    severity: Severity
    passed: bool
    message: str = ""

    def as_values(self) -> dict[str, Any]:
        values: dict[str, Any] = {"name": self.name, "severity": self.severity, "passed": self.passed}
        if self.message:
            values["message"] = self.message
        return values


def parse_output(text: str | None) -> tuple[Any, str | None]:
    """(the output as JSON, None) or (None, why it cannot be checked)."""
    if text is None or not text.strip():
        return None, "the target returned no output"
    if len(text.encode()) > MAX_CHECKED_OUTPUT:
        return None, f"the output is larger than {MAX_CHECKED_OUTPUT // 1024} KB, too large to check"
    try:
        return parse_bounded_json(text), None
    except UnreadableJson as error:
        return None, f"the output cannot be checked: {error}"
    except ValueError:
        return None, "the output is not JSON"


def evaluate(
    checks: Sequence[CheckLike], text: str | None, *, cpu_seconds: float = CHECK_CPU_SECONDS
) -> tuple[CheckResult, ...]:
    """Every check against the output text: all are evaluated, not only up to the first failure. Whatever the
    output holds, each check ends as passed or failed: past its CPU budget, or raising, it fails with why."""
    if not checks:
        return ()
    output, unreadable = parse_output(text)
    results = []
    spent_by = time.thread_time() + CHECKS_CPU_SECONDS
    for check in checks:
        left = min(cpu_seconds, spent_by - time.thread_time())
        if unreadable is not None:
            problem: str | None = unreadable
        elif left <= 0:
            problem = f"not evaluated: this output's checks used their {CHECKS_CPU_SECONDS:g} s of CPU"
        else:
            problem = _problem(check, output, left)
        results.append(CheckResult(check.label, check.severity, problem is None, (problem or "")[:MAX_CHECK_MESSAGE]))
    return tuple(results)


def _problem(check: CheckLike, output: Any, cpu_seconds: float) -> str | None:
    try:
        if check.expect is not None:
            return holds(parse_assertion(check.expect), output)
        return schema_problem(check.json_schema or {}, output, cpu_seconds=cpu_seconds)
    except CheckBudgetExceeded:
        return f"the check took more than {cpu_seconds:.3g} s of CPU on this output and was stopped"
    except Exception as error:  # one check's fault fails that check, never the run's worker
        return f"the check could not be evaluated on this output ({type(error).__name__})"


def warned(results: Sequence[CheckResult]) -> list[CheckResult]:
    return [r for r in results if not r.passed and r.severity == "warn"]
