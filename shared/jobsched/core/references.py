"""Data between DAG tasks: ``"{{ tasks.extract.output.files }}"`` in a task's payload. Pure.

A string of a payload that is one reference becomes the referenced value itself (a list stays a list); a
reference inside a longer string is replaced by the value's text (a string as is, anything else as JSON).
Only ``{{ tasks.``, ``{{ run.payload`` (what a manual trigger passed, Airflow's ``conf``) and, in a map task's
payload, ``{{ item`` open a reference: other braces in a payload are the team's own and are left alone.

A reference names an upstream task (one the task depends on, directly or through others) whose target
returns output (``lambda``, ``http``, ``callback``), then a path into that output: ``.name``, ``["a name"]``,
``[0]``. Everything is checked when the job is PUT; at run time a path that is not in the output (an
``all_done`` task after a failed upstream, an upstream that returned something else) fails the task with the
reference named, not retried. The work is bounded: at most MAX_REFERENCES references a task, outputs of at
most MAX_TASK_OUTPUT bytes (larger data goes to the team's own S3 and its URI is the output), a rendered
payload within the target's payload limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobsched.core.bounds import UnreadableJson, parse_bounded_json
from jobsched.core.output_paths import MISSING, CheckDefinitionError, PathStep, describe_path, parse_steps, value_at

MAX_REFERENCES = 20  # per task payload
MAX_TASK_OUTPUT = 32 * 1024  # bytes of one task's output its downstream tasks may read
REFERENCE = re.compile(r"\{\{\s*(?P<text>(?:tasks\.|item\b|run\.payload\b)[^{}]{0,300}?)\s*\}\}")
ROOT = re.compile(r"^tasks\.(?P<task>[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)\.output(?P<path>.*)$")
ITEM = ""  # the task a reference names when it reads a map task's item (``{{ item.path }}``), not an output
RUN_PAYLOAD = "#run"  # ... when it reads the run's trigger payload (``{{ run.payload.path }}``): no task's name


class BadReference(ValueError):
    """A reference that cannot be resolved as written: the message says what is allowed."""


class MissingValue(ValueError):
    """At run time: the referenced value is not in the upstream's output."""


@dataclass(frozen=True)
class Reference:
    text: str  # as written, without the braces
    task: str
    path: tuple[PathStep, ...]

    def describe(self) -> str:
        root = next((root for root, (task, _) in ROOTED.items() if task == self.task), None)
        if root is not None:
            return root + describe_path(self.path).removeprefix("output")
        return f"tasks.{self.task}.{describe_path(self.path)}"


# The references that read no task's output: their root as written -> (the task they name, an example).
ROOTED = {"item": (ITEM, "item.key"), "run.payload": (RUN_PAYLOAD, "run.payload.day")}


def parse_reference(text: str) -> Reference:
    text = text.strip()
    for root, (task, example) in ROOTED.items():
        if text == root or text.startswith((f"{root}.", f"{root}[")):
            try:
                return Reference(text, task, parse_steps(text.removeprefix(root), text))
            except CheckDefinitionError:
                raise BadReference(
                    f"'{{{{ {text} }}}}': after {root} come .name, [\"name\"] or [index] steps "
                    f"(e.g. {{{{ {example} }}}})"
                ) from None
    found = ROOT.match(text)
    if found is None:
        raise BadReference(
            f"'{{{{ {text} }}}}': a reference is tasks.TASK.output followed by .name, [\"name\"] or [index] "
            "steps (e.g. {{ tasks.extract.output.files }})"
        )
    try:
        path = parse_steps(found["path"], text)
    except CheckDefinitionError:
        raise BadReference(
            f"'{{{{ {text} }}}}': after tasks.TASK.output come .name, [\"name\"] or [index] steps "
            "(e.g. {{ tasks.extract.output.files[0] }})"
        ) from None
    return Reference(text, found["task"], path)


def references_in(payload: Any) -> list[tuple[str, Reference]]:
    """(where in the payload, reference) of every reference, in document order; BadReference for a bad one."""
    found, problems = scan(payload)
    if problems:
        raise BadReference(problems[0][1])
    return found


def scan(payload: Any) -> tuple[list[tuple[str, Reference]], list[tuple[str, str]]]:
    """Every reference of the payload, and (where, why) of every one that cannot be parsed."""
    found: list[tuple[str, Reference]] = []
    problems: list[tuple[str, str]] = []

    def visit(value: Any, where: str) -> None:
        if isinstance(value, str):
            for match in REFERENCE.finditer(value):
                if len(found) + len(problems) >= MAX_REFERENCES:
                    problems.append((where, f"at most {MAX_REFERENCES} references in one task's payload"))
                    return
                try:
                    found.append((where, parse_reference(match["text"])))
                except BadReference as error:
                    problems.append((where, str(error)))
        elif isinstance(value, Mapping):
            for key, item in value.items():
                visit(item, f"{where}.{key}" if where else str(key))
        elif isinstance(value, Sequence):
            for index, item in enumerate(value):
                visit(item, f"{where}[{index}]")

    visit(payload, "")
    return found, problems


def has_reference(payload: Any) -> bool:
    if isinstance(payload, str):
        return REFERENCE.search(payload) is not None
    if isinstance(payload, Mapping):
        return any(has_reference(value) for value in payload.values())
    if isinstance(payload, list):
        return any(has_reference(value) for value in payload)
    return False


def referenced_tasks(payload: Any) -> set[str]:
    """The upstream tasks a payload reads (a reference that cannot be parsed, possible only in a job stored before
    references existed, reads nothing: rendering it fails its task)."""
    found, _ = scan(payload)
    return {reference.task for _, reference in found if reference.task not in (ITEM, RUN_PAYLOAD)}


def reads_run_payload(payload: Any) -> bool:
    """Whether a payload reads the run's trigger payload (``{{ run.payload... }}``)."""
    found, _ = scan(payload)
    return any(reference.task == RUN_PAYLOAD for _, reference in found)


def parse_output(text: str | None) -> Any:
    """A task's output as its downstream tasks read it: JSON when it is JSON, else the text as a string;
    UnreadableJson when it is JSON no bounded reader takes (nested too deep, NaN, ``1e400``, an endless integer):
    the reading task fails with that reason."""
    if text is None:
        return None
    try:
        return parse_bounded_json(text)
    except UnreadableJson:
        raise
    except ValueError:
        return text


def render(payload: Any, outputs: Mapping[str, Any]) -> Any:
    """The payload with every reference replaced from ``outputs`` (task -> parsed output, ITEM -> a map task's
    item, RUN_PAYLOAD -> the run's trigger payload); MissingValue names the first reference whose value is not there."""
    if isinstance(payload, str):
        return _render_text(payload, outputs)
    if isinstance(payload, Mapping):
        return {key: render(value, outputs) for key, value in payload.items()}
    if isinstance(payload, list):
        return [render(value, outputs) for value in payload]
    return payload


def _render_text(text: str, outputs: Mapping[str, Any]) -> Any:
    whole = REFERENCE.fullmatch(text.strip())
    if whole is not None:
        return _value(parse_reference(whole["text"]), outputs)

    def one(match: re.Match[str]) -> str:
        value = _value(parse_reference(match["text"]), outputs)
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))

    return REFERENCE.sub(one, text)


def _value(reference: Reference, outputs: Mapping[str, Any]) -> Any:
    if reference.task == ITEM and ITEM not in outputs:
        raise MissingValue(f"{reference.describe()}: only a map task's items have an item")
    if reference.task == RUN_PAYLOAD and outputs.get(RUN_PAYLOAD) is None:
        raise MissingValue(f"{reference.describe()}: this run was started with no payload (trigger it with one)")
    if reference.task not in outputs:
        raise MissingValue(f"{reference.describe()}: task {reference.task} has no output")
    value = value_at(outputs[reference.task], reference.path)
    if value is MISSING:
        source = {ITEM: "the item", RUN_PAYLOAD: "the run's payload"}.get(reference.task, f"{reference.task}'s output")
        raise MissingValue(f"{reference.describe()} is missing from {source}")
    return value
