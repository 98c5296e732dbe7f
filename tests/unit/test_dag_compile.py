"""DAG compilation and task decisions (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from jobsched.core.messages import DagTaskFailure, DagTaskMessage, parse_work_message
from jobsched.core.runs import RunMessage, TaskStatus
from jobsched.core.spec import MAX_DAG_TASKS, JobSpec
from jobsched.dag.definition import (
    MAX_DEFINITION_BYTES,
    TaskNode,
    compile_definition,
    decide,
    definition_text,
    run_budget,
    run_result,
)
from tests.helpers import largest_dag_tasks

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/jobsched-test-WorkNormal"


def spec(*tasks: dict[str, Any], **extra: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "etl", "team": "data", "dag": {"tasks": list(tasks)}, **extra})


def task(name: str, *depends_on: str, timeout: str = "10m", **extra: Any) -> dict[str, Any]:
    target = {"type": "lambda", "function": "f", "timeout": timeout}
    return {"name": name, "depends_on": list(depends_on), "target": target, **extra}


def states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        branch["StartAt"]: branch["States"][branch["StartAt"]]
        for branch in definition["States"]["all tasks"]["Branches"]
    }


def test_one_parallel_state_with_one_task_state_per_task_and_a_failure_report() -> None:
    definition = compile_definition(
        spec(task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c")), queue_url=QUEUE
    )
    assert definition["StartAt"] == "all tasks" and definition["States"]["all tasks"]["Type"] == "Parallel"
    branches = definition["States"]["all tasks"]["Branches"]
    assert [b["StartAt"] for b in branches] == ["a", "b", "c", "d"]
    for branch in branches:
        name = branch["StartAt"]
        assert set(branch["States"]) == {name, f"{name} failed"}
        state = branch["States"][name]
        assert state["Resource"] == "arn:aws:states:::sqs:sendMessage.waitForTaskToken"
        assert state["Parameters"]["QueueUrl"] == QUEUE
        assert state["Parameters"]["MessageBody"]["task"] == name
        assert state["Parameters"]["MessageBody"]["token.$"] == "$$.Task.Token"
        assert state["Catch"][0]["Next"] == f"{name} failed"
        report = branch["States"][f"{name} failed"]
        assert report["Resource"] == "arn:aws:states:::sqs:sendMessage" and report["End"] is True


def test_the_same_spec_always_gives_the_same_definition() -> None:
    first = spec(task("a"), task("b", "a"), retry={"max_attempts": 2})
    second = JobSpec.model_validate(json.loads(first.model_dump_json()))
    assert definition_text(compile_definition(first, queue_url=QUEUE)) == definition_text(
        compile_definition(second, queue_url=QUEUE)
    )


def test_retry_follows_the_task_policy_with_full_jitter() -> None:
    retry = {"max_attempts": 4, "backoff": {"initial": "30s", "multiplier": 3, "max": "5m", "jitter": "full"}}
    compiled = states(compile_definition(spec(task("a", retry=retry), task("b", "a")), queue_url=QUEUE))
    (policy,) = compiled["a"]["Retry"]
    assert policy["IntervalSeconds"] == 30 and policy["BackoffRate"] == 3 and policy["MaxAttempts"] == 3
    assert policy["MaxDelaySeconds"] == 300 and policy["JitterStrategy"] == "FULL"
    assert "jobsched.TaskFailed" in policy["ErrorEquals"] and "States.HeartbeatTimeout" in policy["ErrorEquals"]
    assert compiled["b"]["Retry"][0]["MaxAttempts"] == 2  # b has no policy: the job's (3 attempts)
    no_retry = states(compile_definition(spec(task("a"), retry={"max_attempts": 1}), queue_url=QUEUE))
    assert "Retry" not in no_retry["a"]


def test_job_retry_policy_is_the_default_for_tasks() -> None:
    compiled = states(compile_definition(spec(task("a")), queue_url=QUEUE))
    assert compiled["a"]["Retry"][0]["MaxAttempts"] == 2  # the default policy: 3 attempts


def test_timeouts_cover_the_wait_for_dependencies_and_heartbeats_come_from_the_task() -> None:
    document = spec(
        task("a", timeout="10m", retry={"max_attempts": 1}),
        task("b", "a", timeout="5m", retry={"max_attempts": 1}),
        {
            "name": "c",
            "depends_on": ["b"],
            "target": {"type": "callback", "timeout": "1h"},
            "heartbeat_timeout": "5m",
            "retry": {"max_attempts": 1},
        },
    )
    compiled = states(compile_definition(document, queue_url=QUEUE))
    assert compiled["a"]["TimeoutSeconds"] == 600 + 60
    assert compiled["b"]["TimeoutSeconds"] == 600 + 300 + 60  # parked while a runs, then its own 5 minutes
    assert compiled["c"]["TimeoutSeconds"] == 600 + 300 + 3600 + 60
    assert compiled["c"]["HeartbeatSeconds"] == 300 and "HeartbeatSeconds" not in compiled["a"]
    assert run_budget(document).total_seconds() == 600 + 300 + 3600 + 60


def test_heartbeat_timeouts_are_for_callback_tasks_and_long_enough_to_park() -> None:
    with pytest.raises(ValidationError) as lambda_error:
        spec(task("a", heartbeat_timeout="1m"))
    assert "heartbeat_needs_callback" in str(lambda_error.value)
    with pytest.raises(ValidationError) as short:
        spec(task("a"), {"name": "b", "depends_on": ["a"], "target": {"type": "callback"}, "heartbeat_timeout": "30s"})
    assert "heartbeat_too_short" in str(short.value) and "3m" in str(short.value)


@pytest.mark.parametrize(
    ("rule", "upstream", "expected"),
    [
        ("all_success", {"a": TaskStatus.SUCCEEDED, "b": TaskStatus.SUCCEEDED}, "run"),
        ("all_success", {"a": TaskStatus.SUCCEEDED, "b": TaskStatus.RUNNING}, "wait"),
        ("all_success", {"a": TaskStatus.SUCCEEDED}, "wait"),  # b not heard of yet
        ("all_success", {"a": TaskStatus.FAILED, "b": TaskStatus.SUCCEEDED}, "skip"),
        ("all_success", {"a": TaskStatus.SKIPPED, "b": TaskStatus.SUCCEEDED}, "skip"),
        ("all_done", {"a": TaskStatus.FAILED, "b": TaskStatus.TIMED_OUT}, "run"),
        ("all_done", {"a": TaskStatus.FAILED, "b": TaskStatus.RETRYING}, "wait"),
    ],
)
def test_trigger_rules(rule: Any, upstream: dict[str, TaskStatus], expected: str) -> None:
    assert decide(TaskNode(("a", "b"), rule), upstream) == expected


def test_the_run_succeeds_only_when_every_task_did() -> None:
    graph = {"a": TaskNode((), "all_success"), "b": TaskNode(("a",), "all_done")}
    assert run_result(graph, {"a": TaskStatus.SUCCEEDED}) is None
    assert run_result(graph, {"a": TaskStatus.SUCCEEDED, "b": TaskStatus.SUCCEEDED}) is TaskStatus.SUCCEEDED
    assert run_result(graph, {"a": TaskStatus.FAILED, "b": TaskStatus.SUCCEEDED}) is TaskStatus.FAILED


def test_work_messages_of_each_kind_parse() -> None:
    run = RunMessage(job="t/j", team="t", run_id="r", scheduled_at="x", fire_at="x", spec_version=1)
    assert isinstance(parse_work_message(run.model_dump_json()), RunMessage)
    task_body = {
        "kind": "dag_task",
        "job": "t/j",
        "team": "t",
        "run_id": "r",
        "scheduled_at": "x",
        "task": "a",
        "retry_count": 2,
        "token": "tok",
    }
    parsed = parse_work_message(json.dumps(task_body))
    assert isinstance(parsed, DagTaskMessage) and parsed.attempt == 3
    failure = {
        "kind": "dag_task_failed",
        "job": "t/j",
        "team": "t",
        "run_id": "r",
        "task": "a",
        "error": "States.Timeout",
        "cause": None,
    }
    notice = parse_work_message(json.dumps(failure))
    assert isinstance(notice, DagTaskFailure) and notice.task == "a"


def test_the_largest_dag_a_spec_can_make_compiles_far_below_step_functions_definition_quota() -> None:
    """The 100-task limit keeps every definition under the 1 MB quota: measured with the longest task names, each
    task depending on as many others as it can, retries, heartbeats and a queue URL longer than any real one."""
    tasks = largest_dag_tasks(MAX_DAG_TASKS)
    spec = JobSpec.model_validate({"name": "big", "team": "t", "dag": {"tasks": tasks}})
    size = len(definition_text(compile_definition(spec, queue_url="https://" + "q" * 248)).encode())
    assert size < MAX_DEFINITION_BYTES / 4, size
    with pytest.raises(ValidationError, match="101 tasks; at most 100"):
        JobSpec.model_validate({"name": "big", "team": "t", "dag": {"tasks": [*tasks, {**tasks[0], "name": "extra"}]}})


def test_a_distributed_map_reads_the_checked_object_with_its_counted_items_and_skips_an_empty_list() -> None:
    each = {
        **task("each", "list"),
        "map": {"mode": "distributed", "over": "{{ tasks.list.output.manifest }}", "max_concurrency": 100},
    }
    branch = next(
        b for b in compile_definition(spec(task("list"), each), queue_url=QUEUE)["States"]["all tasks"]["Branches"]
        if b["StartAt"] == "each"
    )  # fmt: skip
    fan_out = branch["States"]["each items"]
    assert "ItemsPath" not in fan_out and fan_out["MaxConcurrency"] == 100
    assert fan_out["ItemReader"] == {
        "Resource": "arn:aws:states:::s3:getObject",
        "ReaderConfig": {"InputType": "JSON", "MaxItemsPath": "$.map.count"},
        "Parameters": {"Bucket.$": "$.map.bucket", "Key.$": "$.map.key"},
    }
    assert fan_out["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    [item] = [state for name, state in fan_out["ItemProcessor"]["States"].items() if name.endswith(" item")]
    assert item["OutputPath"] is None and item["Catch"][0]["Next"].endswith(" item failed")
    assert branch["States"]["each"]["Next"] == "each any"
    assert branch["States"]["each any"]["Choices"] == [
        {"Variable": "$.map.count", "NumericEquals": 0, "Next": "each none"}
    ]
    assert branch["States"]["each none"] == {
        "Type": "Pass",
        "Result": [],
        "ResultPath": "$.results",
        "Next": "each done",
    }
    csv = {**each, "map": {**each["map"], "format": "csv"}}
    branches = compile_definition(spec(task("list"), csv), queue_url=QUEUE)["States"]["all tasks"]["Branches"]
    reader = next(b for b in branches if b["StartAt"] == "each")["States"]["each items"]["ItemReader"]
    assert reader["ReaderConfig"] == {
        "InputType": "CSV",
        "CSVHeaderLocation": "FIRST_ROW",
        "MaxItemsPath": "$.map.count",
    }
    inline = {**task("each", "list"), "map": {"over": "{{ tasks.list.output.parts }}"}}
    branches = compile_definition(spec(task("list"), inline), queue_url=QUEUE)["States"]["all tasks"]["Branches"]
    fan_out = next(b for b in branches if b["StartAt"] == "each")["States"]["each items"]
    assert fan_out["ItemsPath"] == "$.map.items" and "ItemReader" not in fan_out


def test_a_dag_of_100_map_tasks_compiles_within_the_definition_quota() -> None:
    """Map tasks compile to the most states a task can (0.55 MB for 99 distributed CSV maps with the longest
    names): still within the 1 MB quota with room to spare."""
    names = [f"m{index:03d}-" + "x" * 58 for index in range(MAX_DAG_TASKS)]
    tasks = [{"name": names[0], "target": {"type": "lambda", "function": "f"}}] + [
        {
            "name": name,
            "depends_on": [names[index - 1]],
            "target": {"type": "lambda", "function": "f", "payload": {"item": "{{ item }}"}},
            "retry": {"max_attempts": 20},
            "map": {
                "mode": "distributed",
                "format": "csv",
                "over": "{{ tasks." + names[index - 1] + ".output.parts }}",
            },
        }
        for index, name in enumerate(names)
        if index
    ]
    big = JobSpec.model_validate({"name": "big", "team": "t", "dag": {"tasks": tasks}})
    size = len(definition_text(compile_definition(big, queue_url="https://" + "q" * 248)).encode())
    assert size < MAX_DEFINITION_BYTES * 0.6, size
