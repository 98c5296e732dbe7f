"""Hostile outputs, thrown at every parser that reads what a team's work returned: the output checks (assertions and
JSON Schemas with every keyword allowed), the references a downstream task resolves, and the item lists a map runs
over. Whatever the output holds (nested thousands deep, numbers out of range, NaN, integers of thousands of digits,
lists thousands wide), each ends as a failed check, a failed task or a refused list, never an exception that would
answer 502 from the API or send a DAG task's message to the dead-letter queue."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobsched.core.bounds import UnreadableJson
from jobsched.core.checks import MAX_ENUM_VALUES, CheckResult, check_schema, evaluate, schema_problem
from jobsched.core.item_lists import BadItems, count_items
from jobsched.core.output_paths import CheckDefinitionError
from jobsched.core.references import MissingValue, parse_output, render
from jobsched.core.spec import OutputCheck

# Every check a team can write that reads numbers, strings, lists and objects, each keyword at least once.
CHECKS = [
    OutputCheck.model_validate(check)
    for check in (
        {"expect": "output.rows > 0"},
        {"expect": "len(output.files) >= 1", "severity": "warn"},
        {"expect": 'output["a b"][3] != null'},
        {"json_schema": {"type": "array", "items": {"enum": list(range(MAX_ENUM_VALUES))}}},
        {"json_schema": {"items": {"const": {"k": [1, 2.0, True]}}, "minItems": 1, "maxItems": 100_000}},
        {"json_schema": {"items": {"type": "number", "multipleOf": 0.01, "minimum": -1e9, "exclusiveMaximum": 1e300}}},
        {"json_schema": {"items": {"multipleOf": 7}}},
        {
            "json_schema": {
                "type": "object",
                "required": ["rows"],
                "properties": {"rows": {"type": "integer", "minimum": 0}, "name": {"maxLength": 10, "minLength": 1}},
                "additionalProperties": {"type": ["string", "number", "array", "object", "null", "boolean"]},
                "minProperties": 1,
                "maxProperties": 50,
            }
        },
    )
]


def deep(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


HOSTILE = [
    deep(5_000),
    deep(100_000),
    '{"a":' * 3_000 + "1" + "}" * 3_000,
    "1e400",
    "[1e400]",
    "-1e999",
    "NaN",
    "[NaN, Infinity, -Infinity]",
    '{"rows": Infinity}',
    "9" * 4_000,
    "[" + "9" * 4_000 + "]",
    '{"rows": ' + "1" * 5_000 + "}",
    json.dumps(list(range(100_000))),
    json.dumps([{"k": [1, 2.0, True]}] * 20_000),
    json.dumps([[[[{}]]]] * 20_000),
    '"' + "x" * 1_000_000 + '"',
    '"\\ud800"',  # a lone surrogate
    "",
    "   ",
    "not json",
    "[1, 2",
]


def assert_all_judged(results: tuple[CheckResult, ...]) -> None:
    assert len(results) == len(CHECKS)
    assert all(isinstance(result.passed, bool) and len(result.message) <= 300 for result in results)


@pytest.mark.parametrize("text", HOSTILE, ids=lambda text: text[:24])
def test_hostile_outputs_fail_checks_never_raise(text: str) -> None:
    assert_all_judged(evaluate(CHECKS, text))


@pytest.mark.parametrize("text", [t for t in HOSTILE if t.strip() and t != "not json" and t != "[1, 2"])
def test_a_hostile_upstream_output_fails_the_reading_task_with_its_reason(text: str) -> None:
    """A downstream task's references: a value, a missing value or an unreadable output (its task fails with
    the reason), never another exception."""
    try:
        value = parse_output(text)
    except UnreadableJson as unreadable:
        assert str(unreadable)
        return
    with contextlib.suppress(MissingValue):
        render({"rows": "{{ tasks.up.output.rows }}", "text": "n={{ tasks.up.output[0] }}"}, {"up": value})


@pytest.mark.parametrize("text", HOSTILE, ids=lambda text: text[:24])
@pytest.mark.parametrize("form", ["json", "csv"])
def test_hostile_objects_are_refused_as_lists_never_raise(text: str, form: Any) -> None:
    try:
        assert count_items(text.encode("utf-8", "surrogatepass"), form) >= 0
    except BadItems as refused:
        assert str(refused)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**80), max_value=10**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6),
    max_leaves=60,
)
HOSTILE_TEXTS = st.one_of(
    st.builds(lambda value: json.dumps(value), JSON_VALUES),
    st.builds(
        lambda value, depth, constant: deep(depth, json.dumps(value).replace("0", constant, 1)),
        JSON_VALUES,
        st.integers(min_value=0, max_value=3_000),
        st.sampled_from(["NaN", "Infinity", "1e400", "9" * 3_000, "0"]),
    ),
    st.text(max_size=200),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HOSTILE_TEXTS)
def test_any_output_text_ends_as_judged_checks_a_read_value_and_a_list_or_a_refusal(text: str) -> None:
    assert_all_judged(evaluate(CHECKS, text))
    with contextlib.suppress(UnreadableJson):
        parse_output(text)
    for form in ("json", "csv"):
        with contextlib.suppress(BadItems):
            count_items(text.encode("utf-8", "surrogatepass"), form)


def test_a_schema_past_its_cpu_budget_fails_its_check_not_the_worker() -> None:
    """Bounded by CPU, not by wall time: a budget of nothing stops the check at its first keyword."""
    [result] = evaluate([CHECKS[3]], json.dumps(list(range(1_000))), cpu_seconds=0.0)
    assert not result.passed and "s of CPU" in result.message


def test_enum_membership_is_a_set_lookup_with_json_equality() -> None:
    schema = {"items": {"enum": [1, "1", {"a": [1, 2]}, None, False]}}
    assert schema_problem(schema, [1.0, "1", {"a": [1.0, 2]}, None, False]) is None
    assert schema_problem(schema, [True]) is not None  # true is not 1 in JSON Schema
    assert schema_problem(schema, [0]) is not None  # nor is 0 false
    assert schema_problem({"const": {"b": 1, "a": 2}}, {"a": 2, "b": 1.0}) is None


def test_an_enum_is_capped_when_the_check_is_stored() -> None:
    """The review's bomb: 2,700 values against a list of items cost their product in the API."""
    with pytest.raises(CheckDefinitionError, match=f"at most {MAX_ENUM_VALUES}"):
        check_schema({"items": {"enum": [0] * 2_700}})  # 8,100 bytes: within the schema size limit
    with pytest.raises(CheckDefinitionError, match=f"at most {MAX_ENUM_VALUES}"):
        check_schema({"properties": {"a": {"items": {"enum": list(range(MAX_ENUM_VALUES + 1))}}}})
    check_schema({"items": {"enum": list(range(MAX_ENUM_VALUES))}})
