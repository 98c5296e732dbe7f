"""Inputs: what a task (or one map item) receives, resolved from its upstream tasks' outputs, or the reason it
cannot be. Reads only: the run's task records and outputs, and for a distributed map the team's object."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from jobsched.core.bounds import UnreadableJson
from jobsched.core.errors import WorkflowsNotConfigured
from jobsched.core.item_lists import MAX_ITEMS_OBJECT_BYTES, BadItems, count_items, items_object
from jobsched.core.references import (
    ITEM,
    RUN_PAYLOAD,
    BadReference,
    MissingValue,
    has_reference,
    parse_output,
    referenced_tasks,
)
from jobsched.core.references import render as render_references
from jobsched.core.run_records import TaskState
from jobsched.core.runs import TaskStatus
from jobsched.core.spec import MAX_MAP_ITEMS, MAX_PAYLOAD_BYTES
from jobsched.core.templates import render_key
from jobsched.core.waits import key_zone
from jobsched.pipeline.dag.turn import NO_ITEM, TaskTurn, Unresolved
from jobsched.ports import DataChecksPort, TaskRunsPort
from jobsched.tenancy.ownership import NotOwned

# Distributed maps' objects read at once in one worker process (its batch runs on threads): each may hold up to
# MAX_ITEMS_OBJECT_BYTES and its text, so the worker's memory, shared by every team's runs, stays bounded.
OBJECT_READS = threading.BoundedSemaphore(2)


@dataclass(frozen=True)
class Inputs:
    runs: TaskRunsPort
    objects: DataChecksPort | None = None  # the team's objects distributed maps run over

    def payload(self, turn: TaskTurn, *, item: Any = NO_ITEM, states: dict[str, TaskState] | None = None) -> Any:
        """The task's payload with its references resolved (None: it has none), or Unresolved."""
        return self.resolved(turn, getattr(turn.task.target, "payload", None), item=item, states=states)

    def resolved(
        self, turn: TaskTurn, value: Any, *, item: Any = NO_ITEM, states: dict[str, TaskState] | None = None
    ) -> Any:
        """``value`` (a payload, a map's list) with its references resolved from upstream outputs (and a map
        item's value); None when it has none; Unresolved saying why not. Only an upstream that SUCCEEDED has an
        output to read, and only the one its final attempt wrote. ``states``: the run's tasks when they were just
        read and cannot have changed since (otherwise they are read here)."""
        if value is None or not has_reference(value):
            return None
        run = turn.run
        names = referenced_tasks(value)
        if states is None:
            states = self.runs.tasks(run.job, run.run_id) if names else {}
        succeeded = {
            name: states[name].attempt
            for name in names
            if name in states and states[name].status is TaskStatus.SUCCEEDED
        }
        stored = self.runs.task_outputs(run.job, run.run_id, list(succeeded)) if succeeded else {}
        try:
            outputs = {
                name: parse_output(found.text) for name, found in stored.items() if found.attempt == succeeded.get(name)
            }
        except UnreadableJson as unreadable:
            return Unresolved(f"an upstream output cannot be read: {unreadable}")
        if item is not NO_ITEM:
            outputs[ITEM] = item
        outputs[RUN_PAYLOAD] = run.payload  # what a manual trigger passed ({{ run.payload... }})
        try:
            rendered = render_references(value, outputs)
        except (MissingValue, BadReference) as missing:  # a job stored before #32 may hold any {{ ... }} text
            return Unresolved(f"{missing}")
        size = len(json.dumps(rendered, separators=(",", ":")).encode())
        if size > MAX_PAYLOAD_BYTES:
            return Unresolved(f"payload of {size} bytes with its references resolved; at most {MAX_PAYLOAD_BYTES}")
        return rendered

    def map_answer(self, turn: TaskTurn) -> dict[str, Any] | Unresolved:
        """A map task's answer to its first state: its list (inline), or its object and how many items it holds."""
        assert turn.task.map is not None
        return self._inline_list(turn) if turn.task.map.mode == "inline" else self._items_object(turn)

    def _inline_list(self, turn: TaskTurn) -> dict[str, Any] | Unresolved:
        """An inline map's answer: the upstream's list itself."""
        assert turn.task.map is not None
        over = turn.task.map.over.strip()
        items = self.resolved(turn, over)
        if isinstance(items, Unresolved):
            return items
        if not isinstance(items, list):
            return Unresolved(f"map over {over}: {type(items).__name__ if items is not None else 'null'}, not a list")
        if len(items) > MAX_MAP_ITEMS:
            return Unresolved(f"map over {over}: {len(items)} items; at most {MAX_MAP_ITEMS}")
        return {"items": items}

    def _items_object(self, turn: TaskTurn) -> dict[str, Any] | Unresolved:
        """A distributed map's answer: the object Step Functions reads and how many items it holds. The object is
        read once here, as the team, on a bucket checked to be the team's, and every item is checked."""
        spec, mapped = turn.spec, turn.task.map
        assert mapped is not None
        over = mapped.over.strip()
        named = mapped.named_object
        if named is not None:
            bucket, key = named[0], render_key(named[1], turn.run.scheduled_at, key_zone(spec))
        else:
            value = self.resolved(turn, over)
            if isinstance(value, Unresolved):
                return value
            try:
                bucket, key = items_object(value)
            except BadItems as bad:
                return Unresolved(f"map over {over}: {bad}")
        if self.objects is None:
            raise WorkflowsNotConfigured("this worker reads no S3 objects: distributed maps cannot run")
        place = f"map over s3://{bucket}/{key}"
        try:
            with OBJECT_READS:
                data = self.objects.read_object(turn.run.team, bucket, key, max_bytes=MAX_ITEMS_OBJECT_BYTES)
                if data is None:
                    return Unresolved(f"{place}: no such object")
                count = count_items(data, mapped.items_format)
        except (NotOwned, BadItems) as refused:
            return Unresolved(f"{place}: {refused}")
        return {"bucket": bucket, "key": key, "count": count}
