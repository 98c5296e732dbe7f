"""Counting what a benchmark's AWS calls cost, against moto: requests by service and operation, and DynamoDB write
and read units computed from item sizes (moto's own ConsumedCapacity figures are wrong). For writes it reads each
written item before and after, and counts index writes from index-key changes. ``scripts/bench_pipeline.py`` prices
what it counts."""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.names import RUNS_TABLE, IndexDefinition, JobsKeys, TableDefinition

# What each item a run writes is for: the guarantee it carries (the breakdown the cost lines print).
ITEM_KINDS = {
    "job state": "the job's cursor (one run per instant), its running slots (max_running per job), the audit mark",
    "team quota": "the team's running slots (max_running per team: no noisy neighbour)",
    "run": "the run record: the claim (one attempt runs), its fencing, lease, result",
    "other": "other items",
}


def item_kind(table: str, pk: str, sk: str) -> str:
    """Which kind of item a write touched (see ``ITEM_KINDS``)."""
    if table == RUNS_TABLE.logical_name:
        return "run"
    if pk.startswith(JobsKeys.TEAM_PREFIX) and sk == JobsKeys.QUOTA:
        return "team quota"
    if sk == JobsKeys.STATE:
        return "job state"
    return "other"


def attribute_size(value: dict[str, Any]) -> int:
    """DynamoDB's item-size rules, closely enough for capacity units."""
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return len(inner.lstrip("-").replace(".", "")) // 2 + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + attribute_size(v) + 1 for k, v in inner.items())
    if kind == "L":
        return 3 + sum(attribute_size(v) + 1 for v in inner)
    if kind in ("SS", "NS"):
        return sum(len(str(v)) for v in inner)
    return 0


def item_size(item: dict[str, Any] | None) -> int:
    return sum(len(name.encode()) + attribute_size(value) for name, value in (item or {}).items())


@dataclass
class Meter:
    """Counts requests and capacity units by wrapping each client's API calls."""

    tables: dict[str, TableDefinition]
    requests: Counter[str] = field(default_factory=Counter)
    write_units: Counter[str] = field(default_factory=Counter)
    read_units: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    aws_seconds: float = 0.0  # wall time spent inside moto
    aws_cpu_seconds: float = 0.0  # CPU time spent inside moto, in the calling threads (subtracted from our CPU)
    write_units_by_item: Counter[str] = field(default_factory=Counter)  # by what the item is (``item_kind``)

    @contextlib.contextmanager
    def paused(self) -> Any:
        """Calls the test makes in AWS's place (stopping a task ECS would stop itself) are not counted."""
        counted, self.requests = self.requests, Counter()
        try:
            yield
        finally:
            self.requests = counted

    @property
    def calls(self) -> int:
        return sum(self.requests.values())

    def wrap(self, client: Any, service: str) -> None:
        original = client._make_api_call

        def metered(operation: str, params: dict[str, Any]) -> Any:
            self.requests[f"{service}.{operation}"] += 1
            if service == "dynamodb" and operation in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"):
                return self._write(original, operation, params)
            began, cpu = time.perf_counter(), time.thread_time()
            response = original(operation, params)
            self.aws_seconds += time.perf_counter() - began
            self.aws_cpu_seconds += time.thread_time() - cpu
            if service == "dynamodb":
                self._read(operation, params, response)
            return response

        client._make_api_call = metered
        self._raw = original

    # ------------------------------------------------------------------------------ writes

    def _write(self, original: Any, operation: str, params: dict[str, Any]) -> Any:
        cpu = time.thread_time()  # the meter's own reads of the item before and after count as moto's CPU too
        targets = self._write_targets(operation, params)
        before = {key: self._get(original, table, key) for table, key in targets}
        began = time.perf_counter()
        failed = False
        try:
            return original(operation, params)
        except Exception as error:
            failed = "ConditionalCheckFailed" in str(error) or "TransactionCanceled" in str(error)
            raise
        finally:
            self.aws_seconds += time.perf_counter() - began
            factor = 2 if operation == "TransactWriteItems" else 1
            for table, key in targets:
                old = before[key]
                new = old if failed else self._get(original, table, key)
                units = max(1, math.ceil(max(item_size(old), item_size(new)) / 1024)) * factor
                self.write_units[f"{self._logical(table)} table"] += units
                self.write_units_by_item[item_kind(self._logical(table), key[1], key[2])] += units
                if not failed:
                    for index in self.tables[table].indexes:
                        self.write_units[f"{self._logical(table)} index {index.name}"] += self._index_writes(
                            index, self.tables[table], old, new
                        )
            self.aws_cpu_seconds += time.thread_time() - cpu

    def _write_targets(self, operation: str, params: dict[str, Any]) -> list[tuple[str, tuple[str, str, str]]]:
        def key_of(table: str, key_or_item: dict[str, Any]) -> tuple[str, tuple[str, str, str]]:
            definition = self.tables[table]
            pk, sk = definition.partition_key[0], definition.sort_key[0]
            return table, (table, key_or_item[pk]["S"], key_or_item[sk]["S"])

        if operation == "TransactWriteItems":
            found = []
            for entry in params["TransactItems"]:
                ((kind, body),) = entry.items()
                found.append(key_of(body["TableName"], body["Item"] if kind == "Put" else body["Key"]))
            return found
        return [key_of(params["TableName"], params.get("Item") or params["Key"])]

    def _get(self, original: Any, table: str, key: tuple[str, str, str]) -> dict[str, Any] | None:
        definition = self.tables[table]
        response = original(
            "GetItem",
            {
                "TableName": table,
                "Key": {definition.partition_key[0]: {"S": key[1]}, definition.sort_key[0]: {"S": key[2]}},
                "ConsistentRead": True,
            },
        )
        item = response.get("Item")
        return dict(item) if item else None

    @staticmethod
    def _index_writes(
        index: IndexDefinition, table: TableDefinition, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> int:
        keys = (index.partition_key[0], index.sort_key[0])

        def projection(item: dict[str, Any] | None) -> dict[str, Any] | None:
            if item is None or any(k not in item for k in keys):
                return None
            names = {*keys, table.partition_key[0], table.sort_key[0], *index.non_key_attributes}
            if index.projection == "ALL":
                return item
            return {name: item[name] for name in names if name in item}

        before, after = projection(old), projection(new)
        if before is None and after is None:
            return 0
        if before is None or after is None:
            return 1
        if any(before.get(k) != after.get(k) for k in keys):
            return 2  # an index key change is a delete and a put in the index
        return 1 if before != after else 0

    # ------------------------------------------------------------------------------- reads

    def _read(self, operation: str, params: dict[str, Any], response: dict[str, Any]) -> None:
        if operation == "GetItem":
            units = max(1, math.ceil(item_size(response.get("Item")) / 4096))
            self.read_units[params["TableName"]] += units * (1 if params.get("ConsistentRead") else 0.5)
        elif operation == "BatchGetItem":
            for table, items in response.get("Responses", {}).items():
                consistent = params["RequestItems"][table].get("ConsistentRead", False)
                for item in items:
                    self.read_units[table] += max(1, math.ceil(item_size(item) / 4096)) * (1 if consistent else 0.5)
        elif operation == "Query":
            size = sum(item_size(item) for item in response.get("Items", []))
            consistent = params.get("ConsistentRead", False) and "IndexName" not in params
            name = f"{params['TableName']} {params.get('IndexName', '')}".strip()
            self.read_units[name] += max(1, math.ceil(size / 4096)) * (1 if consistent else 0.5)

    def _logical(self, table: str) -> str:
        return self.tables[table].logical_name
