"""DAG jobs: the spec compiled to a Step Functions definition, and the rules that decide each task. Pure.

Compilation keeps the DAG's real parallelism with one state per task. The state machine is a single
Parallel state with one branch per task; each branch is that task's one ``sqs:sendMessage.waitForTaskToken``
state (with its Retry, TimeoutSeconds, HeartbeatSeconds and a Catch that reports the failure to us).
Every branch starts at once, and the worker holds a task's token ("parks" it) until all its dependencies
have finished, then runs or skips it. So a task starts the moment its own dependencies finish: no level
barrier, and a slow branch never holds up an unrelated one. Transitions per run: 1 (Parallel) + one per
task, +1 per retry, +1 per task that finally fails (its failure report).

Because a parked task's state is already running, its TimeoutSeconds must cover the wait for its
dependencies too: it is the longest path of its ancestors' worst-case time plus its own attempt timeout.
That is a backstop; each attempt's own timeout is enforced by the target (synchronous targets) or by the
callback's heartbeats (HeartbeatSeconds).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any, Literal

from jobsched.core.item_lists import MAX_DISTRIBUTED_ITEMS
from jobsched.core.messages import TASK_TERMINAL
from jobsched.core.runs import TaskStatus
from jobsched.core.spec import MAX_MAP_ITEMS, Dag, DagTask, JobSpec, RetryPolicy, WaitPolicy
from jobsched.core.waits import MAX_POLL

STATE_MARGIN = timedelta(minutes=1)
# Step Functions' quota on a state machine's definition. Not checked at PUT: the task limit (100) keeps every
# definition far below it (test_dag_compile measures the largest a spec can make).
MAX_DEFINITION_BYTES = 1024 * 1024
MAX_STATE_TIMEOUT = timedelta(days=365)  # Standard executions last at most a year
TASKS_STATE = "all tasks"  # a space: no task name has one, so no task's state can take it

# Errors the worker reports with SendTaskFailure; the state machine retries these and its own timeouts.
TASK_FAILED = "jobsched.TaskFailed"
TASK_LOST = "jobsched.TaskLost"  # the worker running the attempt died before reporting
RETRIED_ERRORS = (TASK_FAILED, TASK_LOST, "States.Timeout", "States.HeartbeatTimeout")
TIMEOUT_ERRORS = frozenset({"States.Timeout", "States.HeartbeatTimeout"})


# ------------------------------------------------------------------------------- the graph


@dataclass(frozen=True)
class TaskNode:
    depends_on: tuple[str, ...]
    trigger_rule: Literal["all_success", "all_done"]


Graph = dict[str, TaskNode]


def graph_of(dag: Dag) -> Graph:
    return {task.name: TaskNode(tuple(task.depends_on), task.trigger_rule) for task in dag.tasks}


def graph_to_values(graph: Graph) -> dict[str, Any]:
    """The graph as stored on the run (the run keeps the shape it started with across spec changes)."""
    return {
        name: {"depends_on": list(node.depends_on), "trigger_rule": node.trigger_rule} for name, node in graph.items()
    }


def graph_from_values(values: Mapping[str, Any]) -> Graph:
    return {
        name: TaskNode(tuple(node.get("depends_on") or ()), node.get("trigger_rule", "all_success"))
        for name, node in values.items()
    }


Decision = Literal["wait", "run", "skip"]


def decide(node: TaskNode, statuses: Mapping[str, TaskStatus]) -> Decision:
    """Whether a task can start: wait for unfinished dependencies, then run or skip by its trigger rule."""
    upstream = [statuses.get(name, TaskStatus.PENDING) for name in node.depends_on]
    if any(status not in TASK_TERMINAL for status in upstream):
        return "wait"
    if node.trigger_rule == "all_success" and any(status is not TaskStatus.SUCCEEDED for status in upstream):
        return "skip"
    return "run"


def run_result(graph: Graph, statuses: Mapping[str, TaskStatus]) -> TaskStatus | None:
    """The run's end once every task has finished: SUCCEEDED only if every task did; None while unfinished."""
    current = [statuses.get(name, TaskStatus.PENDING) for name in graph]
    if any(status not in TASK_TERMINAL for status in current):
        return None
    return TaskStatus.SUCCEEDED if all(status is TaskStatus.SUCCEEDED for status in current) else TaskStatus.FAILED


# ----------------------------------------------------------------------------- time budgets


def task_retry(spec: JobSpec, task: DagTask) -> RetryPolicy:
    if task.target.type == "approval":
        return RetryPolicy(max_attempts=1)  # a person's answer is not retried; a rejection stands
    return task.retry or spec.retry


def attempt_timeout(task: DagTask) -> timedelta:
    timeout: timedelta = task.timeout or task.target.timeout
    return timeout


def data_wait(task: DagTask) -> timedelta:
    """The longest a task waits for its data (wait_for) once its dependencies are done, before its first attempt."""
    if not task.wait_for:
        return timedelta(0)
    return (task.wait or WaitPolicy()).timeout + MAX_POLL


def attempts_budget(spec: JobSpec, task: DagTask) -> timedelta:
    """Every attempt of the task (or of one map item) at its timeout, with the longest backoff between them."""
    policy = task_retry(spec, task)
    waits = sum(
        (
            min(policy.backoff.max, policy.backoff.initial * policy.backoff.multiplier ** (attempt - 1))
            for attempt in range(1, policy.max_attempts)
        ),
        timedelta(0),
    )
    return attempt_timeout(task) * policy.max_attempts + waits


def map_rounds(task: DagTask) -> int:
    """How many items one after another a map task may run at most: its largest list, max_concurrency at once."""
    assert task.map is not None
    most = MAX_MAP_ITEMS if task.map.mode == "inline" else MAX_DISTRIBUTED_ITEMS
    return math.ceil(most / task.map.max_concurrency)


def task_budget(spec: JobSpec, task: DagTask) -> timedelta:
    """The longest a task can take: its wait for data, then every attempt at its timeout, with the longest
    backoff between them (a map task: that for each round of its largest list)."""
    rounds = map_rounds(task) if task.map is not None else 1
    return data_wait(task) + attempts_budget(spec, task) * rounds


def ancestors_budget(spec: JobSpec) -> dict[str, timedelta]:
    """For each task, the longest its dependencies can keep it waiting (the longest path above it)."""
    assert spec.dag is not None
    tasks = {task.name: task for task in spec.dag.tasks}

    @cache
    def finish(name: str) -> timedelta:
        return wait(name) + task_budget(spec, tasks[name])

    @cache
    def wait(name: str) -> timedelta:
        return max((finish(dependency) for dependency in tasks[name].depends_on), default=timedelta(0))

    return {name: wait(name) for name in spec.dag.order()}


def run_budget(spec: JobSpec) -> timedelta:
    """The longest a whole DAG run can take (its lease, and the execution's TimeoutSeconds)."""
    assert spec.dag is not None
    waits = ancestors_budget(spec)
    return max(waits[task.name] + task_budget(spec, task) for task in spec.dag.tasks) + STATE_MARGIN


# ------------------------------------------------------------------------------- compilation


def compile_definition(spec: JobSpec, *, queue_url: str) -> dict[str, Any]:
    """The Amazon States Language definition for a DAG job. Same spec, same definition."""
    if spec.dag is None:
        raise ValueError(f"{spec.key} is not a DAG job")
    waits = ancestors_budget(spec)
    branches = [_branch(spec, task, index, queue_url, waits[task.name]) for index, task in enumerate(spec.dag.tasks)]
    return {
        "Comment": f"jobsched {spec.key}: compiled from the job spec; changes are overwritten on apply",
        "StartAt": TASKS_STATE,
        "TimeoutSeconds": _seconds(run_budget(spec)),
        "States": {TASKS_STATE: {"Type": "Parallel", "Branches": branches, "ResultPath": None, "End": True}},
    }


def definition_text(definition: dict[str, Any]) -> str:
    """Canonical JSON, so an unchanged spec compares equal to what is deployed."""
    return json.dumps(definition, sort_keys=True, separators=(",", ":"))


def _task_state(
    spec: JobSpec, task: DagTask, queue_url: str, body: dict[str, Any], timeout: timedelta
) -> dict[str, Any]:
    """A state that sends the worker a message with its token and waits for the answer."""
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {
            "QueueUrl": queue_url,
            "MessageGroupId": spec.team,  # the team's fair-queue group, like its runs
            "MessageBody": {
                "kind": "dag_task",
                "job.$": "$.job",
                "team.$": "$.team",
                "run_id.$": "$.run_id",
                "scheduled_at.$": "$.scheduled_at",
                "correlation_id.$": "$.correlation_id",
                "task": task.name,
                "retry_count.$": "$$.State.RetryCount",
                "token.$": "$$.Task.Token",
                **body,
            },
        },
        "TimeoutSeconds": _seconds(timeout),
        "ResultPath": None,
    }


def _retry(spec: JobSpec, task: DagTask) -> list[dict[str, Any]]:
    policy = task_retry(spec, task)
    if policy.max_attempts <= 1:
        return []
    backoff = policy.backoff
    return [
        {
            "ErrorEquals": list(RETRIED_ERRORS),
            "IntervalSeconds": _seconds(backoff.initial),
            "BackoffRate": backoff.multiplier,
            "MaxAttempts": policy.max_attempts - 1,
            "MaxDelaySeconds": _seconds(backoff.max),
            # Step Functions has FULL and NONE; "equal" jitter is the closest to FULL it offers.
            "JitterStrategy": "NONE" if backoff.jitter == "none" else "FULL",
        }
    ]


def _map_states(spec: JobSpec, task: DagTask, index: int, queue_url: str, waiting: timedelta) -> dict[str, Any]:
    """A map task: the worker resolves its list (the first state's answer: the items, or for a distributed map the
    object holding them and their count), a Map state runs one task state per item (retried by the task's policy;
    an item that finally fails is caught, so the others go on), then the worker judges the items against the
    tolerated failure percentage."""
    assert task.map is not None
    items, done, failed = f"{task.name} items", f"{task.name} done", f"{task.name} failed"
    # State names are unique across the whole machine, inside maps too (AWS refuses a repeat; moto does not).
    one_item, item_failed = f"{task.name} item", f"{task.name} item failed"
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": failed}]
    base = f"$.bases[{index}]"
    resolve = _task_state(spec, task, queue_url, {"attempt_base.$": base}, waiting + data_wait(task) + STATE_MARGIN)
    resolve |= {"ResultPath": "$.map", "Catch": catch, "Next": items}
    item_body = {"attempt_base.$": "$.base", "item_index.$": "$.index", "item.$": "$.item"}
    item = _task_state(spec, task, queue_url, item_body, attempt_timeout(task) + STATE_MARGIN)
    # An item's result is {} (OutputPath null) or {"failed": true}: the Map state's results, which the judging
    # state carries in one message, stay within Step Functions' 256 KB payload at every list size we allow.
    item |= {
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": item_failed}],
        "OutputPath": None,
        "End": True,
    }
    if retry := _retry(spec, task):
        item["Retry"] = retry
    fan_out: dict[str, Any] = {
        "Type": "Map",
        "MaxConcurrency": task.map.max_concurrency,
        "ItemSelector": {
            "job.$": "$.job",
            "team.$": "$.team",
            "run_id.$": "$.run_id",
            "scheduled_at.$": "$.scheduled_at",
            "correlation_id.$": "$.correlation_id",
            "base.$": base,
            "index.$": "$$.Map.Item.Index",
            "item.$": "$$.Map.Item.Value",
        },
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": one_item,
            "States": {one_item: item, item_failed: {"Type": "Pass", "Result": {"failed": True}, "End": True}},
        },
        "ResultPath": "$.results",
        "Catch": catch,
        "Next": done,
    }
    judged = {"attempt_base.$": base, "map_done": True, "results.$": "$.results"}
    judge = _task_state(spec, task, queue_url, judged, STATE_MARGIN * 2)
    judge |= {"Catch": catch, "End": True}
    if task.map.mode == "inline":
        return {task.name: resolve, items: fan_out | {"ItemsPath": "$.map.items"}, done: judge}
    # Distributed: Step Functions reads the object the worker checked (its answer: bucket, key and the number of
    # items it counted, read as MaxItems), one child execution per item (Standard: items wait on task tokens).
    # MaxItems 0 would mean "every item", so an empty list skips the Map state.
    none = f"{task.name} none"
    reader: dict[str, Any] = {"InputType": "JSON", "MaxItemsPath": "$.map.count"}
    if task.map.items_format == "csv":
        reader = {"InputType": "CSV", "CSVHeaderLocation": "FIRST_ROW", "MaxItemsPath": "$.map.count"}
    fan_out["ItemReader"] = {
        "Resource": "arn:aws:states:::s3:getObject",
        "ReaderConfig": reader,
        "Parameters": {"Bucket.$": "$.map.bucket", "Key.$": "$.map.key"},
    }
    fan_out["ItemProcessor"]["ProcessorConfig"] = {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    resolve["Next"] = f"{task.name} any"
    any_items = {
        "Type": "Choice",
        "Choices": [{"Variable": "$.map.count", "NumericEquals": 0, "Next": none}],
        "Default": items,
    }
    empty = {"Type": "Pass", "Result": [], "ResultPath": "$.results", "Next": done}
    return {task.name: resolve, f"{task.name} any": any_items, none: empty, items: fan_out, done: judge}


def _branch(spec: JobSpec, task: DagTask, index: int, queue_url: str, waiting: timedelta) -> dict[str, Any]:
    failed = f"{task.name} failed"
    if task.map is not None:
        states = _map_states(spec, task, index, queue_url, waiting)
    else:
        body = {"attempt_base.$": f"$.bases[{index}]"}  # the task's attempts before this execution (re-execution)
        timeout = waiting + data_wait(task) + attempt_timeout(task) + STATE_MARGIN
        state = _task_state(spec, task, queue_url, body, timeout)
        state |= {"Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": failed}], "End": True}
        if task.heartbeat_timeout is not None:
            state["HeartbeatSeconds"] = _seconds(task.heartbeat_timeout)
        if retry := _retry(spec, task):
            state["Retry"] = retry
        states = {task.name: state}
    report = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage",
        "Parameters": {
            "QueueUrl": queue_url,
            "MessageGroupId": spec.team,
            "MessageBody": {
                "kind": "dag_task_failed",
                "job.$": "$.job",
                "team.$": "$.team",
                "run_id.$": "$.run_id",
                "task": task.name,
                "error.$": "$.error.Error",
                "cause.$": "$.error.Cause",
                "execution.$": "$$.Execution.Id",
            },
        },
        "ResultPath": None,
        "End": True,
    }
    return {"StartAt": task.name, "States": {**states, failed: report}}


def _seconds(duration: timedelta) -> int:
    return max(1, min(math.ceil(duration.total_seconds()), int(MAX_STATE_TIMEOUT.total_seconds())))


def execution_input(
    *, job: str, team: str, run_id: str, scheduled_at: str, correlation_id: str, bases: list[int]
) -> dict[str, Any]:
    """``bases``: each task's attempts before this execution, in the spec's task order (0s for a first run)."""
    return {
        "job": job,
        "team": team,
        "run_id": run_id,
        "scheduled_at": scheduled_at,
        "correlation_id": correlation_id,
        "bases": bases,
    }


def descendants(graph: Graph, names: set[str]) -> set[str]:
    """``names`` and every task that depends on one of them, directly or through others."""
    found = set(names)
    changed = True
    while changed:
        changed = False
        for name, node in graph.items():
            if name not in found and any(dependency in found for dependency in node.depends_on):
                found.add(name)
                changed = True
    return found
