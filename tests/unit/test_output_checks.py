"""Checks on a target's output (core.checks): the assertion grammar, the schema subset, and their bounds."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pydantic import ValidationError

from jobsched.core.checks import MAX_CHECKED_OUTPUT, MAX_SCHEMA_DEPTH, check_schema, evaluate
from jobsched.core.output_paths import MAX_EXPECT_CHARS, CheckDefinitionError, holds, parse_assertion
from jobsched.core.run_records import TargetResult
from jobsched.core.spec import JobSpec, OutputCheck
from jobsched.pipeline.attempts import judge
from tests.helpers import AtOnce, on_threads


def check(**fields: object) -> OutputCheck:
    return OutputCheck.model_validate(fields)


@pytest.mark.parametrize(
    ("assertion", "output", "problem"),
    [
        ("output.rows > 0", {"rows": 3}, None),
        ("output.rows > 0", {"rows": 0}, "output.rows is 0, expected > 0"),
        ("output.rows > 0", {}, "output.rows is missing"),
        ("output.rows > 0", {"rows": "3"}, "output.rows is a string; > 0 needs a number"),
        ("output.rows >= 1", {"rows": True}, "output.rows is a boolean; >= 1 needs a number"),
        ("output.ok == true", {"ok": 1}, "output.ok is 1, expected == true"),  # JSON: 1 is not true
        ("output.ok != true", {"ok": 1}, None),
        ('output.status == "done"', {"status": "done"}, None),
        ("output.status != null", {"status": None}, "output.status is null, expected != null"),
        ("len(output.files) >= 2", {"files": ["a"]}, "len(output.files) is 1, expected >= 2"),
        ("len(output.files) >= 1", {"files": 4}, "len(output.files): a number has no length"),
        ("len(output.files) >= 1", {}, "output.files is missing"),
        ('output["row count"] < 10', {"row count": 9}, None),
        ("output.parts[1].size <= 5", {"parts": [{"size": 9}, {"size": 5}]}, None),
        ("output.parts[2].size <= 5", {"parts": [{"size": 9}]}, "output.parts[2].size is missing"),
        ("output == 3", 3, None),
        ('output.day >= "2027-01-04"', {"day": "2027-01-05"}, None),
    ],
)
def test_assertions_hold_or_say_why_not(assertion: str, output: object, problem: str | None) -> None:
    assert holds(parse_assertion(assertion), output) == problem


@pytest.mark.parametrize(
    ("assertion", "said"),
    [
        ("rows > 0", "an assertion is PATH OP VALUE"),
        ("output.rows", "an assertion is PATH OP VALUE"),
        ("output.rows > zero", "is not a JSON value"),
        ("output.rows > [1]", "compare with a number, a string"),
        ("output.rows > true", "> compares numbers or strings"),
        ('len(output.files) > "a"', "len(...) is a number"),
        ("output.rows.* == 1", "a path is output followed by"),
        ("output.__class__ == 1", None),  # a key like any other: paths read JSON, never attributes
        ("output..rows == 1", "a path is output followed by"),
        ("__import__('os') == 1", "an assertion is PATH OP VALUE"),
        ("output" + ".a" * 17 + " == 1", "at most 16 steps"),
        ("output.a == " + "1" * MAX_EXPECT_CHARS, f"at most {MAX_EXPECT_CHARS} characters"),
    ],
)
def test_assertions_that_cannot_be_evaluated_are_refused_naming_the_form(assertion: str, said: str | None) -> None:
    if said is None:
        assert holds(parse_assertion(assertion), {"__class__": 1}) is None
        return
    with pytest.raises(CheckDefinitionError) as refused:
        parse_assertion(assertion)
    assert said in str(refused.value)


def test_schemas_take_only_linear_cost_keywords_and_are_bounded() -> None:
    check_schema({"type": "object", "required": ["files"], "properties": {"files": {"type": "array", "minItems": 1}}})
    for hostile, said in (
        ({"type": "string", "pattern": "^(a+)+$"}, "uses pattern"),  # catastrophic backtracking
        ({"properties": {"a": {"patternProperties": {"(a+)+": {}}}}}, "properties.a. uses patternProperties"),
        ({"$ref": "https://example.com/schema.json"}, "uses $ref"),  # no fetching, no recursion
        ({"type": "array", "uniqueItems": True}, "uses uniqueItems"),  # quadratic in the output
        ({"type": "object", "description": "x" * 9000}, "at most 8192 bytes"),
        ({"type": "wrong"}, "not a valid JSON Schema"),
    ):
        with pytest.raises(CheckDefinitionError, match=said.replace("$", r"\$").replace("(", r"\(")):
            check_schema(hostile)
    nested: dict[str, object] = {"type": "object"}
    for _ in range(MAX_SCHEMA_DEPTH + 1):
        nested = {"type": "object", "properties": {"a": nested}}
    with pytest.raises(CheckDefinitionError, match="nest at most"):
        check_schema(nested)


def test_every_check_is_evaluated_and_an_unreadable_output_fails_each_clearly() -> None:
    checks = [
        check(name="rows", expect="output.rows > 0"),
        check(name="shape", json_schema={"type": "object", "required": ["files"]}, severity="warn"),
    ]
    results = evaluate(checks, json.dumps({"rows": 0}))
    assert [(r.name, r.passed, r.message) for r in results] == [
        ("rows", False, "output.rows is 0, expected > 0"),
        ("shape", False, "output: 'files' is a required property"),
    ]
    for text, said in (
        ("not json", "the output is not JSON"),
        ("", "the target returned no output"),
        (None, "the target returned no output"),
        ("[" * 10 + "]" * 10 + " " * MAX_CHECKED_OUTPUT, "the output is larger than 1024 KB, too large to check"),
    ):
        assert {r.message for r in evaluate(checks, text)} == {said}


def test_a_failed_error_check_fails_the_result_unretried_and_warnings_leave_it_succeeded() -> None:
    blocking = [check(name="rows", expect="output.rows > 0"), check(expect="output.rows > 5", severity="warn")]
    failed = judge(TargetResult("succeeded", output='{"rows": 0}'), blocking)
    assert (failed.outcome, failed.retryable, failed.error) == (
        "failed",
        False,
        "check rows failed: output.rows is 0, expected > 0",
    )
    warned = judge(TargetResult("succeeded", output='{"rows": 3}'), blocking)
    assert warned.outcome == "succeeded" and [r.passed for r in warned.checks] == [True, False]
    http = judge(TargetResult("succeeded", output='HTTP 200: {"rows": 9}', body='{"rows": 9}'), blocking)
    assert http.outcome == "succeeded" and all(r.passed for r in http.checks)  # the body, not the status line
    untouched = TargetResult("failed", error="boom")
    assert judge(untouched, blocking) is untouched  # a failed target is not checked


def test_checking_a_large_output_against_a_deep_schema_is_quick() -> None:
    """Bounded work: the largest output checked against a nested schema takes well under a second."""
    schema = {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}}
    output = json.dumps([{"n": index} for index in range(60_000)])
    assert len(output) < MAX_CHECKED_OUTPUT
    began = time.perf_counter()
    (result,) = evaluate([check(json_schema=schema)], output)
    assert result.passed and time.perf_counter() - began < 5


def test_the_spec_refuses_checks_on_targets_without_output_and_on_a_dag_itself() -> None:
    sqs = {"type": "sqs", "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q"}
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate({"name": "a", "team": "t", "target": sqs, "checks": [{"expect": "output > 1"}]})
    [error] = refused.value.errors()
    assert error["type"] == "checks_need_output" and error["loc"] == ("checks",)
    task = {"name": "x", "target": {"type": "lambda", "function": "f"}}
    with pytest.raises(ValidationError) as on_dag:
        JobSpec.model_validate(
            {"name": "a", "team": "t", "dag": {"tasks": [task]}, "checks": [{"expect": "output > 1"}]}
        )
    assert [(e["type"], e["loc"]) for e in on_dag.value.errors()] == [("checks_on_dag", ("checks",))]
    with pytest.raises(ValidationError) as both:
        check(expect="output > 1", json_schema={"type": "object"})
    assert both.value.errors()[0]["type"] == "check_form"


def test_assertions_built_to_make_the_parser_backtrack_are_refused_at_once() -> None:
    for hostile in ("output" + '["a"]' * 50, "len(output" + '["a"]' * 49 + " >", "output" + "[" * 250, "output." * 36):
        began = time.perf_counter()
        with pytest.raises(CheckDefinitionError):
            parse_assertion(hostile[:MAX_EXPECT_CHARS])
        assert time.perf_counter() - began < 0.5


def test_a_worker_checks_at_most_two_outputs_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its batch runs on threads, and a checked output of 1 MB can take 24 MB to parse."""
    from jobsched.pipeline import attempts

    gauge = AtOnce()

    def slow_evaluate(checks: Any, text: str | None) -> tuple[Any, ...]:
        with gauge:
            return ()

    monkeypatch.setattr(attempts, "evaluate", slow_evaluate)
    check = OutputCheck.model_validate({"expect": "output.rows > 0"})
    on_threads(lambda: attempts.judge(TargetResult("succeeded", output='{"rows": 1}'), [check]), 6)
    assert gauge.most == 2
