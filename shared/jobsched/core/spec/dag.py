"""DAG jobs: tasks, maps, dependencies and their cross-field checks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from graphlib import CycleError, TopologicalSorter
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from jobsched.core.bounds import is_stored
from jobsched.core.durations import Duration, format_duration
from jobsched.core.item_lists import MAX_DISTRIBUTED_ITEMS, ItemFormat
from jobsched.core.references import ITEM as ITEM_REFERENCE
from jobsched.core.references import REFERENCE as REFERENCE_WHOLE
from jobsched.core.references import RUN_PAYLOAD as RUN_PAYLOAD_REFERENCE
from jobsched.core.references import referenced_tasks
from jobsched.core.references import scan as scan_references
from jobsched.core.spec.base import (
    MAX_ASYNC_TIMEOUT,
    MAX_DAG_TASKS,
    MIN_PARKED_HEARTBEAT,
    Name,
    StrictModel,
    _bounded,
    _fail,
    _validate_with,
)
from jobsched.core.spec.checks import OUTPUT_TARGETS, Checks, _check_checks_target
from jobsched.core.spec.policies import RetryPolicy
from jobsched.core.spec.targets import Target
from jobsched.core.spec.triggers import WaitCondition, WaitConditions, WaitPolicy, _check_bucket
from jobsched.core.templates import TemplateError, split_s3_uri

# --------------------------------------------------------------------------------------------- DAG

MAX_MAP_ITEMS = 1000  # items of one inline map (its list is an upstream output of <= 32 KB)
MAX_MAP_CONCURRENCY = 40  # items running at once in an inline Map state
MAX_DISTRIBUTED_CONCURRENCY = 100  # items running at once in a distributed map (child executions)
MAP_TARGETS = ("lambda", "http", "sqs", "stepfunctions", "eventbridge")  # called once per item, synchronously


class MapSpec(StrictModel):
    """Fan-out: the task's target runs once per item of a list: one an upstream task returned (inline), or the
    items of an object in the team's S3 bucket (distributed: Step Functions' Distributed Map reads it)."""

    mode: Literal["inline", "distributed"] = Field(
        default="inline",
        description=f"inline: at most {MAX_MAP_ITEMS} items; distributed: the object's items, at most "
        f"{MAX_DISTRIBUTED_ITEMS}",
    )
    over: str = Field(
        max_length=1100,
        description="inline: one reference to an upstream's list, e.g. {{ tasks.list.output.parts }}; distributed: "
        "one reference to an upstream's s3://bucket/key, or s3://bucket/key itself (the key may hold {logical_date})",
    )
    format: ItemFormat | None = Field(
        default=None, description="distributed: json (the object is a list) or csv (a header row, then one item a row)"
    )
    max_concurrency: int = Field(
        default=10, ge=1, le=MAX_DISTRIBUTED_CONCURRENCY, description=f"inline: at most {MAX_MAP_CONCURRENCY}"
    )
    tolerated_failure_percentage: float = Field(
        default=0, ge=0, le=100, description="the task still succeeds while at most this share of its items failed"
    )

    @field_validator("over")
    @classmethod
    def _over(cls, value: str, info: ValidationInfo) -> str:
        over = value.strip()
        if REFERENCE_WHOLE.fullmatch(over):
            return value
        if info.data.get("mode") != "distributed":
            raise _fail(
                "invalid_map",
                "over is one reference to a list an upstream task returned, e.g. {{ tasks.list.output.parts }}",
            )
        try:
            bucket, _ = split_s3_uri(over)
        except TemplateError as error:
            raise _fail(
                "invalid_map",
                "a distributed map's over is one reference to an upstream's s3://bucket/key, or s3://bucket/key "
                "itself: {message}",
                message=str(error),
            ) from None
        _check_bucket(bucket)
        return value

    @field_validator("format")
    @classmethod
    def _format(cls, value: ItemFormat | None, info: ValidationInfo) -> ItemFormat | None:
        if value is not None and info.data.get("mode") != "distributed":
            raise _fail("map_format", "format applies to a distributed map (mode: distributed), which reads S3")
        return value

    @field_validator("max_concurrency")
    @classmethod
    def _concurrency(cls, value: int, info: ValidationInfo) -> int:
        if value > MAX_MAP_CONCURRENCY and info.data.get("mode") != "distributed":
            raise _fail(
                "map_concurrency",
                "an inline map runs at most {inline} items at once (got {value}); mode: distributed, up to {most}",
                inline=MAX_MAP_CONCURRENCY,
                value=value,
                most=MAX_DISTRIBUTED_CONCURRENCY,
            )
        return value

    @property
    def items_format(self) -> ItemFormat:
        return self.format or "json"

    @property
    def named_object(self) -> tuple[str, str] | None:
        """(bucket, key template) when the spec itself names the object (not an upstream's output)."""
        over = self.over.strip()
        return split_s3_uri(over) if self.mode == "distributed" and not REFERENCE_WHOLE.fullmatch(over) else None


class DagTask(StrictModel):
    # What _heartbeats requires, said in the schema: a heartbeat_timeout only on a callback task.
    model_config = ConfigDict(
        **StrictModel.model_config,
        json_schema_extra={
            "if": {"required": ["heartbeat_timeout"], "properties": {"heartbeat_timeout": {"type": "string"}}},
            "then": {"properties": {"target": {"properties": {"type": {"const": "callback"}}}}},
        },
    )

    name: Name
    target: Target
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_DAG_TASKS)
    retry: RetryPolicy | None = None
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_ASYNC_TIMEOUT)] | None = Field(
        default=None, description="per attempt; default: the target's timeout"
    )
    heartbeat_timeout: Annotated[Duration, _bounded(timedelta(seconds=1), timedelta(days=1))] | None = Field(
        default=None, description="callback tasks: fail the attempt when no heartbeat arrives for this long"
    )
    trigger_rule: Literal["all_success", "all_done"] = "all_success"
    wait_for: WaitConditions = Field(
        default_factory=list, description="conditions the task waits on once its dependencies have finished"
    )
    wait: WaitPolicy | None = Field(default=None, description="with wait_for: how long, and then what")
    checks: Checks = Field(default_factory=list, description="quality gates on the task's output")
    map: MapSpec | None = Field(
        default=None, description="run the target once per item of an upstream task's list ({{ item }} in the payload)"
    )

    _checks_target = field_validator("checks")(_check_checks_target)

    @field_validator("map")
    @classmethod
    def _map_target(cls, value: MapSpec | None, info: ValidationInfo) -> MapSpec | None:
        target = info.data.get("target")
        if value is not None and target is not None and target.type not in MAP_TARGETS:
            raise _fail(
                "map_target",
                "a map runs its target once per item and waits for each: {allowed} targets can; {type} cannot",
                allowed=", ".join(MAP_TARGETS),
                type=target.type,
            )
        return value

    @model_validator(mode="after")
    def _heartbeats(self) -> DagTask:
        _check_wait_policy(self.wait_for, self.wait)
        if self.target.type in ("ecs", "batch", "kubernetes"):
            raise _fail(
                "container_task_in_dag",
                "an {type} target runs a job's runs; DAG tasks cannot run one yet",
                type=self.target.type,
            )
        if self.heartbeat_timeout is None:
            return self
        if self.target.type != "callback":
            raise _fail(
                "heartbeat_needs_callback",
                "heartbeat_timeout applies to callback tasks (the worker itself runs {type} targets within timeout)",
                type=self.target.type,
            )
        if (self.depends_on or self.wait_for) and self.heartbeat_timeout < MIN_PARKED_HEARTBEAT:
            # While it waits for its dependencies or its data the scheduler heartbeats the task once a minute.
            raise _fail(
                "heartbeat_too_short",
                "a task with depends_on or wait_for needs heartbeat_timeout of at least {minimum} (got {value})",
                minimum=format_duration(MIN_PARKED_HEARTBEAT),
                value=format_duration(self.heartbeat_timeout),
            )
        return self


def _check_wait_policy(conditions: list[WaitCondition], policy: WaitPolicy | None) -> None:
    if policy is not None and not conditions:
        raise _fail("wait_without_wait_for", "wait says how long to wait for wait_for's conditions: give wait_for")


class Dag(StrictModel):
    tasks: list[DagTask] = Field(min_length=1)

    @model_validator(mode="wrap")
    @classmethod
    def _graph(cls, data: Any, handler: ModelWrapValidatorHandler[Dag]) -> Dag:
        # Checked on the raw tasks so a cycle is reported together with any bad field of a task.
        tasks = data.get("tasks") if isinstance(data, dict) else None
        shape = [
            (task.get("name"), task.get("depends_on") or [])
            for task in (tasks if isinstance(tasks, list) else [])
            if isinstance(task, dict)
        ]
        problems = [
            InitErrorDetails(type=_fail("invalid_dag", "{message}", message=message), loc=loc, input=data)
            for loc, message in dag_problems(shape)
        ]
        return _validate_with(cls, data, handler, problems)

    @model_validator(mode="after")
    def _references(self, info: ValidationInfo) -> Dag:
        if is_stored(info):  # checked since #32: a stored job's unresolvable reference fails its task instead
            return self
        problems = reference_problems(self.tasks)
        if problems:
            raise ValidationError.from_exception_data(
                "Dag",
                [
                    InitErrorDetails(type=_fail(code, "{message}", message=message), loc=loc, input=None)
                    for loc, code, message in problems
                ],
            )
        return self

    def referenced_outputs(self) -> set[str]:
        """Tasks whose output a downstream task reads (its payload, or the list its map runs over): only theirs are
        kept for the run."""
        return {
            name
            for task in self.tasks
            for place in (getattr(task.target, "payload", None), task.map.over if task.map else None)
            for name in referenced_tasks(place)
        }

    def order(self) -> list[str]:
        """Task names in a dependency order (stable for the same spec)."""
        sorter: TopologicalSorter[str] = TopologicalSorter()
        for task in self.tasks:
            sorter.add(task.name, *task.depends_on)
        return list(sorter.static_order())


def reference_problems(tasks: list[DagTask]) -> list[tuple[tuple[str | int, ...], str, str]]:
    """(location, code, message) of every payload reference that cannot resolve: a bad form, an unknown task, a
    task not upstream (its output would not exist yet), or an upstream whose target returns no output."""
    by_name = {task.name: task for task in tasks}

    def ancestors(name: str) -> set[str]:
        seen: set[str] = set()
        pending = list(by_name[name].depends_on)
        while pending:
            current = pending.pop()
            if current not in seen and current in by_name:
                seen.add(current)
                pending.extend(by_name[current].depends_on)
        return seen

    problems: list[tuple[tuple[str | int, ...], str, str]] = []
    for index, task in enumerate(tasks):
        places: list[tuple[tuple[str | int, ...], Any]] = [
            (("tasks", index, "target", "payload"), getattr(task.target, "payload", None))
        ]
        if task.map is not None:
            places.append((("tasks", index, "map", "over"), task.map.over))
        for location, value in places:
            problems += _place_problems(task, location, value, by_name, ancestors)
    return problems


def _place_problems(
    task: DagTask,
    location: tuple[str | int, ...],
    value: Any,
    by_name: dict[str, DagTask],
    ancestors: Callable[[str], set[str]],
) -> list[tuple[tuple[str | int, ...], str, str]]:
    """The problems of the references in one place of a task (its payload, or its map's list)."""
    problems: list[tuple[tuple[str | int, ...], str, str]] = []
    found, unparsed = scan_references(value)
    problems += [(location, "invalid_reference", f"{where}: {why}" if where else why) for where, why in unparsed]
    upstream = ancestors(task.name) if found else set()
    for where, reference in found:
        at = f"{where}: " if where else ""
        if reference.task == RUN_PAYLOAD_REFERENCE:
            continue  # any task may read what the run was triggered with
        if reference.task == ITEM_REFERENCE:
            if task.map is None or location[-1] == "over":
                message = f"{at}{{{{ item }}}} is the item of a map task's payload; '{task.name}' has no map"
                problems.append((location, "item_outside_map", message))
            continue
        if reference.task not in by_name:
            known = ", ".join(sorted(by_name))
            message = f"{at}unknown task '{reference.task}'; tasks in this DAG: {known}"
            problems.append((location, "unknown_task_reference", message))
        elif reference.task not in upstream:
            message = f"{at}task '{reference.task}' is not upstream of '{task.name}': add it to depends_on"
            problems.append((location, "not_upstream", message))
        elif by_name[reference.task].target.type not in OUTPUT_TARGETS:
            kind = by_name[reference.task].target.type
            message = f"{at}task '{reference.task}' ({kind}) returns no output; {', '.join(OUTPUT_TARGETS)} do"
            problems.append((location, "no_output", message))
    return problems


def dag_problems(shape: list[tuple[Any, Any]]) -> list[tuple[tuple[str | int, ...], str]]:
    """Every structural problem of (name, depends_on) pairs as (location, message): all, not the first."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if len(shape) > MAX_DAG_TASKS:
        problems.append((("tasks",), f"{len(shape)} tasks; at most {MAX_DAG_TASKS} are allowed"))
    seen = _first_index_of_each_name(shape, problems)
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for index, (name, depends_on) in enumerate(shape):
        if not isinstance(name, str) or not isinstance(depends_on, list):
            continue
        sorter.add(name)
        for position, dependency in enumerate(depends_on):
            location: tuple[str | int, ...] = ("tasks", index, "depends_on", position)
            if not isinstance(dependency, str):
                continue  # not a task name: the field's own validation says so
            if dependency == name:
                problems.append((location, f"task '{name}' depends on itself"))
            elif dependency not in seen:
                known = ", ".join(sorted(seen)) or "none"
                problems.append((location, f"unknown task '{dependency}'; tasks in this DAG: {known}"))
            else:
                sorter.add(name, dependency)
    try:
        sorter.prepare()
    except CycleError as error:
        problems.append((("tasks",), "cycle: " + " -> ".join(error.args[1])))
    return problems


def _first_index_of_each_name(
    shape: list[tuple[Any, Any]], problems: list[tuple[tuple[str | int, ...], str]]
) -> dict[str, int]:
    """Each task name's first position; a repeated name is a problem at its later positions."""
    seen: dict[str, int] = {}
    for index, (name, _) in enumerate(shape):
        if not isinstance(name, str):
            continue
        if name in seen:
            problems.append((("tasks", index, "name"), f"duplicate task '{name}' (also tasks[{seen[name]}])"))
        else:
            seen[name] = index
    return seen
