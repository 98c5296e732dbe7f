"""References to upstream outputs in a DAG task's payload (core.references): checked at PUT, rendered at run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from jobsched.core.bounds import STORED
from jobsched.core.references import MAX_REFERENCES, MissingValue, parse_output, render
from jobsched.core.spec import JobSpec


def task(name: str, *depends_on: str, payload: Any = None, kind: str = "lambda") -> dict[str, Any]:
    target: dict[str, Any] = (
        {"type": "lambda", "function": "f"}
        if kind == "lambda"
        else {"type": "sqs", "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q"}
    )
    if payload is not None:
        target["payload"] = payload
    return {"name": name, "depends_on": list(depends_on), "target": target}


def dag(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"name": "etl", "team": "data", "dag": {"tasks": list(tasks)}}


def errors(document: dict[str, Any]) -> list[tuple[str, tuple[Any, ...], str]]:
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate(document)
    return [(e["type"], e["loc"], e["msg"]) for e in refused.value.errors()]


def test_references_to_upstream_outputs_are_accepted_and_only_read_outputs_are_kept() -> None:
    spec = JobSpec.model_validate(
        dag(
            task("extract"),
            task("transform", "extract"),
            task("load", "transform", payload={"files": "{{ tasks.extract.output.files }}", "x": "{{ other }}"}),
        )
    )
    assert spec.dag_outputs() == {"extract"}  # transitive: extract is upstream of load through transform


def test_every_reference_that_cannot_resolve_is_reported_at_its_task_with_where_and_why() -> None:
    payload = {
        "a": "{{ tasks.nope.output }}",
        "b": ["{{ tasks.side.output }}"],
        "c": "{{ tasks.queue.output }}",
        "d": "{{ tasks.extract.output..x }}",
        "e": "{{ tasks.load.output }}",
    }
    found = errors(
        dag(task("extract"), task("queue", kind="sqs"), task("side"), task("load", "extract", "queue", payload=payload))
    )
    where = ("dag", "tasks", 3, "target", "payload")
    assert [(code, loc) for code, loc, _ in found] == [
        ("invalid_reference", where),
        ("unknown_task_reference", where),
        ("not_upstream", where),
        ("no_output", where),
        ("not_upstream", where),  # itself
    ]
    messages = [message for _, _, message in found]
    assert messages[1] == "a: unknown task 'nope'; tasks in this DAG: extract, load, queue, side"
    assert messages[2] == "b[0]: task 'side' is not upstream of 'load': add it to depends_on"
    assert messages[3] == "c: task 'queue' (sqs) returns no output; lambda, http, callback, approval do"


def test_references_are_bounded_and_refused_outside_a_dag() -> None:
    many = {f"k{i}": "{{ tasks.extract.output }}" for i in range(MAX_REFERENCES + 1)}
    [(code, _, message)] = errors(dag(task("extract"), task("load", "extract", payload=many)))
    assert code == "invalid_reference" and f"at most {MAX_REFERENCES} references" in message
    single = {"name": "j", "team": "t", "target": {"type": "lambda", "function": "f", "payload": "{{tasks.a.output}}"}}
    assert [code for code, _, _ in errors(single)] == ["reference_outside_dag"]


def test_rendering_keeps_a_whole_reference_typed_and_interpolates_embedded_ones() -> None:
    outputs = {"extract": {"files": ["a.csv", "b.csv"], "rows": 3, "name": "day"}, "plain": parse_output("not json")}
    payload = {
        "files": "{{ tasks.extract.output.files }}",
        "rows": " {{tasks.extract.output.rows}} ",
        "text": "{{ tasks.extract.output.name }}: {{ tasks.extract.output.files }} ({{ tasks.plain.output }})",
        "nested": [{"first": "{{ tasks.extract.output.files[0] }}"}],
        "kept": "{{ not.ours }} and {{ tasks }}",
        "number": 7,
    }
    assert render(payload, outputs) == {
        "files": ["a.csv", "b.csv"],
        "rows": 3,
        "text": 'day: ["a.csv","b.csv"] (not json)',
        "nested": [{"first": "a.csv"}],
        "kept": "{{ not.ours }} and {{ tasks }}",
        "number": 7,
    }
    with pytest.raises(MissingValue, match=r"tasks.extract.output.files\[5\] is missing from extract's output"):
        render("{{ tasks.extract.output.files[5] }}", outputs)
    with pytest.raises(MissingValue, match="task load has no output"):
        render("{{ tasks.load.output }}", outputs)


def test_a_map_runs_over_one_upstream_reference_with_a_synchronous_target_and_only_it_reads_item() -> None:
    over = {"over": "{{ tasks.extract.output.parts }}", "max_concurrency": 5}
    ok = dag(task("extract"), {**task("each", "extract", payload={"part": "{{ item.key }}"}), "map": over})
    assert JobSpec.model_validate(ok).dag_outputs() == {"extract"}
    callback = {"name": "each", "depends_on": ["extract"], "target": {"type": "callback"}, "map": over}
    assert [(code, loc) for code, loc, _ in errors(dag(task("extract"), callback))] == [
        ("map_target", ("dag", "tasks", 1, "map"))
    ]
    literal = {**task("each", "extract"), "map": {"over": "[1, 2, 3]"}}
    assert [code for code, _, _ in errors(dag(task("extract"), literal))] == ["invalid_map"]
    sideways = {**task("each"), "map": over}
    assert [(code, loc) for code, loc, _ in errors(dag(task("extract"), sideways))] == [
        ("not_upstream", ("dag", "tasks", 1, "map", "over"))
    ]
    stray = task("load", "extract", payload={"part": "{{ item }}"})
    assert [code for code, _, _ in errors(dag(task("extract"), stray))] == ["item_outside_map"]
    too_wide = {**task("each", "extract"), "map": {**over, "max_concurrency": 41}}
    assert [(code, loc[-1]) for code, loc, _ in errors(dag(task("extract"), too_wide))] == [
        ("map_concurrency", "max_concurrency")
    ]


def test_a_distributed_map_runs_over_an_upstreams_s3_uri_or_an_object_the_spec_names() -> None:
    def each(**spec: Any) -> dict[str, Any]:
        return {**task("each", "extract", payload={"n": "{{ item.n }}"}), "map": {"mode": "distributed", **spec}}

    upstream = JobSpec.model_validate(dag(task("extract"), each(over="{{ tasks.extract.output.manifest }}")))
    assert upstream.dag_outputs() == {"extract"}
    named = each(over="s3://data-lists/{logical_date:%Y-%m-%d}.csv", format="csv", max_concurrency=100)
    assert JobSpec.model_validate(dag(task("extract"), named)).dag is not None
    cases = [
        (each(over="https://lists.example/x.json"), "invalid_map", "over"),
        (each(over="s3://data-lists/{oops}.json"), "invalid_map", "over"),
        (each(over="s3://Data_Lists/x.json"), "invalid_bucket", "over"),
        (each(over="{{ tasks.extract.output.manifest }}", max_concurrency=101), "less_than_equal", "max_concurrency"),
        (each(over="{{ tasks.extract.output.manifest }}", format="parquet"), "literal_error", "format"),
        (
            {**task("each", "extract"), "map": {"over": "{{ tasks.extract.output.parts }}", "format": "csv"}},
            "map_format",
            "format",
        ),
        ({**task("each", "extract"), "map": {"over": "s3://data-lists/x.json"}}, "invalid_map", "over"),
    ]
    for document, code, field in cases:
        assert [(found, loc[-1]) for found, loc, _ in errors(dag(task("extract"), document))] == [(code, field)]


def test_a_job_stored_before_references_existed_still_reads_back_with_its_text() -> None:
    """Stricter checks apply to what teams send, not to what is stored: a payload that held {{ ... }} text before
    #32 reads back (its task then fails with the reference named, instead of the job becoming unreadable)."""
    stored = dag(task("extract"), task("load", payload={"note": "{{ tasks.nope.output }} {{ item }} {{ tasks.x..y }}"}))
    single = {"name": "j", "team": "t", "target": {"type": "lambda", "function": "f", "payload": "{{ item }}"}}
    for document in (stored, single):
        with pytest.raises(ValidationError):
            JobSpec.model_validate(document)
        JobSpec.model_validate_json(json.dumps(document), context=STORED)
    spec = JobSpec.model_validate_json(json.dumps(stored), context=STORED)
    assert spec.dag_outputs() == {"nope"}  # the parsable one; the malformed one reads nothing
    with pytest.raises(MissingValue):
        render(spec.dag.tasks[1].target.payload, {})  # type: ignore[union-attr]


def test_run_payload_references_read_the_trigger_payload_and_name_no_task() -> None:
    from jobsched.core.references import RUN_PAYLOAD, reads_run_payload, referenced_tasks, render

    payload = {"day": "{{ run.payload.day }}", "note": "for {{ run.payload.who }}", "rows": "{{ tasks.a.output }}"}
    assert reads_run_payload(payload) and referenced_tasks(payload) == {"a"}
    rendered = render(payload, {"a": 3, RUN_PAYLOAD: {"day": "2027-01-03", "who": "ops"}})
    assert rendered == {"day": "2027-01-03", "note": "for ops", "rows": 3}
    with pytest.raises(MissingValue, match="started with no payload"):
        render({"d": "{{ run.payload.day }}"}, {RUN_PAYLOAD: None})
    with pytest.raises(MissingValue, match=r"run\.payload\.day is missing from the run's payload"):
        render({"d": "{{ run.payload.day }}"}, {RUN_PAYLOAD: {"other": 1}})
    assert not reads_run_payload({"x": "{{ runs.payload }}"})
