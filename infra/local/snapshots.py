"""The tables' snapshots: every write through the handlers' client marks its items changed, and the changed
items are read back and saved to ``<state-dir>/tables.json`` within a second (a full scan every second was a
fifth of moto's time under load).

A snapshot is a cut: no write is under way while a save reads. Without that, a save that read a job's
dispatch state after a write it had not marked (its audit mark moved past an instant) but did not read the
run record written just before it (marked after the save began) kept the mark without the record, and a
``kill -9`` then lost that instant for good: recovery goes back only to the audit mark.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.local.statefiles import write_atomically

log = logging.getLogger("jobsched.local")

TABLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
Keys = tuple[str, str]  # a table's partition and sort key attributes
TOUCHED = "jobsched_touched"  # a write request's items, kept on its context from request to answer
WRITING = "jobsched_writing"  # set on a write's context while it holds its place in the gate
DRAIN_PATIENCE = 10.0  # seconds a save waits for writes under way (a write that never answers does not stop saves)


class WriteGate:
    """Writes under way against a save: a save waits until the writes under way have answered and holds new ones
    back until it has read what it saves."""

    def __init__(self) -> None:
        self._changes = threading.Condition()
        self._writing = 0
        self._saving = False

    @property
    def under_way(self) -> int:
        return self._writing

    def enter(self) -> None:
        with self._changes:
            self._changes.wait_for(lambda: not self._saving)
            self._writing += 1

    def leave(self) -> None:
        with self._changes:
            self._writing -= 1
            self._changes.notify_all()

    @contextmanager
    def closed(self) -> Iterator[None]:
        with self._changes:
            self._saving = True
            drained = self._changes.wait_for(lambda: self._writing == 0, timeout=DRAIN_PATIENCE)
        if not drained:
            log.warning("a table write has not answered in %.0f s: this snapshot may be cut mid-write", DRAIN_PATIENCE)
        try:
            yield
        finally:
            with self._changes:
                self._saving = False
                self._changes.notify_all()


@dataclass
class Snapshots:
    """The tables' items written since the last save, read back and saved within a second."""

    path: Path
    keys: dict[str, Keys] = field(default_factory=dict)  # table name -> its key attributes
    changed: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    gate: WriteGate = field(default_factory=WriteGate)
    dirty: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # table -> key (JSON) -> key
    saved: dict[str, dict[str, Any]] = field(default_factory=dict)  # table name -> key (JSON) -> item

    def watch(self, dynamodb: Any) -> None:
        """Every write through ``dynamodb`` from now on is marked, and none is under way while a save reads."""
        events = dynamodb.meta.events
        events.register("before-parameter-build.dynamodb", self.note_request)
        events.register("before-call.dynamodb", self.note_sending)
        events.register("after-call.dynamodb", self.note_written)
        events.register("after-call-error.dynamodb", self.note_written)  # no answer: it may have landed

    def note_request(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """Before a write is built: which items it is about to change, kept on the request."""
        if model.name in TABLE_WRITES:
            context[TOUCHED] = _written_keys(model.name, params)

    def note_sending(self, context: dict[str, Any], **_: Any) -> None:
        """Right before a write is sent (its parameters are valid: it will answer or fail): it takes its place."""
        if TOUCHED in context:
            self.gate.enter()
            context[WRITING] = True

    def note_written(self, context: dict[str, Any], **_: Any) -> None:
        """After the write's answer: its items marked changed, so a save that reads them back reads what it wrote
        (marked before the answer, a save could read an item back before the write landed, clear its mark, and
        keep the old item until the next write of it: a kill -9 then lost a job stored long before). A refused
        conditional write changed nothing, and reading it back costs only a read."""
        touched = context.pop(TOUCHED, None)
        if touched:
            with self.lock:
                for table, values in touched:
                    key = self.keys.get(table)
                    if key is not None:
                        self.dirty.setdefault(table, {})[json.dumps([values[key[0]], values[key[1]]])] = {
                            key[0]: values[key[0]],
                            key[1]: values[key[1]],
                        }
            self.changed.set()
        if context.pop(WRITING, False):
            self.gate.leave()  # marked first: the next save reads it

    def save(self, dynamodb: Any) -> None:
        """A full scan the first time, then only the items written since, read back in batches of 100; no write
        is under way while it reads."""
        if not self.keys:
            return  # a start that failed before its snapshots began: the state saved before stays as it was
        with self.gate.closed():
            with self.lock:
                dirty, self.dirty = self.dirty, {}
            for table, key in self.keys.items():
                items = self.saved.get(table)
                if items is None:
                    self.saved[table] = _scan(dynamodb, table, key)
                else:
                    _refresh(dynamodb, table, key, items, dirty.get(table, {}))
            # By table name, as AWS keeps them: a release that names other tables finds these where they were.
            snapshot = {"format": 2, "tables": {table: list(self.saved[table].values()) for table in self.keys}}
        write_atomically(self.path, json.dumps(snapshot))


def _written_keys(operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(table, key or item) of every item a DynamoDB write request names."""
    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        return [(params["TableName"], params.get("Key") or params["Item"])]
    touched: list[tuple[str, dict[str, Any]]] = []
    if operation == "BatchWriteItem":
        for table, requests in params["RequestItems"].items():
            for request in requests:
                change = request.get("PutRequest") or request.get("DeleteRequest") or {}
                touched.append((table, change.get("Key") or change.get("Item") or {}))
        return touched
    for item in params["TransactItems"]:
        for kind in ("Put", "Update", "Delete"):
            if kind in item:
                touched.append((item[kind]["TableName"], item[kind].get("Key") or item[kind]["Item"]))
    return touched


def _scan(dynamodb: Any, table: str, key: Keys) -> dict[str, Any]:
    items: dict[str, Any] = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            items[json.dumps([item[key[0]], item[key[1]]])] = item
    return items


def _refresh(dynamodb: Any, table: str, key: Keys, items: dict[str, Any], dirty: dict[str, dict[str, Any]]) -> None:
    """Read the written items back (100 a batch) into ``items``; one that is gone was deleted."""
    changed = list(dirty.items())
    for start in range(0, len(changed), 100):
        chunk = dict(changed[start : start + 100])
        found: dict[str, Any] = {}
        request: dict[str, Any] = {table: {"Keys": list(chunk.values()), "ConsistentRead": True}}
        while request:
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(table, []):
                found[json.dumps([item[key[0]], item[key[1]]])] = item
            request = response.get("UnprocessedKeys") or {}
        for name in chunk:
            if name in found:
                items[name] = found[name]
            else:
                items.pop(name, None)  # deleted
