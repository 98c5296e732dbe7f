"""A DynamoDB table in a dict: items by (partition, sort) key, the table's sparse (shard, instant) indexes
kept up to date on every write, and DynamoDB's capacity arithmetic counted as it goes.

Each write is atomic under one lock, the way one conditional write is atomic in DynamoDB: ``update`` hands
the current item to a function that either returns the new item or raises ``ConditionFailed``, and nothing
is stored in the second case. Reads return copies, so no caller can change a stored item by accident.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import math
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.names import TableDefinition

Key = tuple[str, str]
Item = dict[str, Any]


class ConditionFailed(Exception):
    """The stored item is not what the write was conditional on: nothing was written."""


@dataclass
class Capacity:
    """Units consumed, as DynamoDB on-demand would bill them (reads eventually consistent unless strong)."""

    read_units: float = 0.0
    write_units: float = 0.0  # the table's and its indexes'
    writes: int = 0
    reads: int = 0
    # Of ``write_units``, each index's: an index has its own partitions and throughput (and throttles the table's
    # writes when it is short of them), so a burst's model weighs each apart.
    index_write_units: dict[str, float] = field(default_factory=dict)

    def reset(self) -> None:
        self.read_units = self.write_units = 0.0
        self.writes = self.reads = 0
        self.index_write_units = {}

    def by_store(self, table: str) -> dict[str, float]:
        """Write units by what serves them: ``table`` itself and each index, as ``<table>/<index>``."""
        indexes = {f"{table}/{name}": units for name, units in self.index_write_units.items() if units}
        return {table: self.write_units - sum(indexes.values()), **indexes}


@dataclass
class MemoryTable:
    definition: TableDefinition
    items: dict[Key, Item] = field(default_factory=dict)
    capacity: Capacity = field(default_factory=Capacity)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._pk, self._sk = self.definition.partition_key[0], self.definition.sort_key[0]
        # index name -> shard -> item key -> sort value (only items carrying both index attributes)
        self._indexes: dict[str, dict[Any, dict[Key, str]]] = {
            index.name: defaultdict(dict) for index in self.definition.indexes
        }
        # Each partition's sort keys in order: a range is found by bisection, as DynamoDB's B-tree finds it, so a
        # partition's history costs a read nothing (#51: cost and speed independent of history).
        self._partitions: dict[str, list[str]] = defaultdict(list)

    # ------------------------------------------------------------------------------ reads

    def get(self, pk: str, sk: str, *, consistent: bool = True) -> Item | None:
        with self._lock:
            item = self.items.get((pk, sk))
            self._count_read(item, consistent)
            return copy.deepcopy(item) if item is not None else None

    def get_batch(self, keys: list[Key], *, consistent: bool = True) -> list[Item]:
        """The items that exist among ``keys``, counted as BatchGetItem requests of up to 100 keys."""
        with self._lock:
            found = [copy.deepcopy(self.items[key]) for key in keys if key in self.items]
            self.capacity.reads += math.ceil(len(keys) / 100)
            units = sum(max(1, math.ceil(item_size(item) / 4096)) for item in found)
            self.capacity.read_units += units if consistent else units / 2
            return found

    def partition(
        self,
        pk: str,
        *,
        first: str | None = None,
        last: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Item]:
        """A partition's items in sort-key order (``newest_first``: reversed), optionally between two sort keys
        (inclusive) and at most ``limit`` of them; the read is counted on the items returned, as a Query's."""
        with self._lock:
            ordered = self._partitions.get(pk, [])
            low = 0 if first is None else bisect.bisect_left(ordered, first)
            high = len(ordered) if last is None else bisect.bisect_right(ordered, last)
            keys = ordered[low:high][::-1] if newest_first else ordered[low:high]
            keys = keys[:limit] if limit is not None else keys
            found = [copy.deepcopy(self.items[(pk, sk)]) for sk in keys]
            self.capacity.reads += 1
            self.capacity.read_units += max(1, math.ceil(sum(item_size(item) for item in found) / 4096)) / 2
            return found

    def query_index(self, index: str, shard: Any, until: str) -> Iterator[Item]:
        """Items on a sparse index's shard whose sort value is at or before ``until``, in sort order."""
        with self._lock:
            entries = sorted((at, key) for key, at in self._indexes[index].get(shard, {}).items() if at <= until)
            found = [copy.deepcopy(self.items[key]) for _, key in entries]
            self.capacity.reads += 1
            self.capacity.read_units += max(1, math.ceil(len(found) * 100 / 4096)) / 2
        yield from found

    # ----------------------------------------------------------------------------- writes

    def update(self, pk: str, sk: str, change: Callable[[Item | None], Item | None]) -> Item | None:
        """Apply ``change`` to the stored item (None when absent) atomically; a None result deletes it.
        ``change`` raises ConditionFailed to write nothing. Returns the new item (a copy)."""
        with self._lock:
            before = self.items.get((pk, sk))
            after = change(copy.deepcopy(before) if before is not None else None)
            if after is None:
                if before is not None:
                    self._store((pk, sk), before, None)
                return None
            after[self._pk], after[self._sk] = pk, sk
            self._store((pk, sk), before, after)
            return copy.deepcopy(after)

    def put(self, item: Item, *, if_absent: bool = False) -> bool:
        """Store ``item``; with ``if_absent``, only if no item has its key (False otherwise)."""
        pk, sk = item[self._pk], item[self._sk]

        def replace(current: Item | None) -> Item:
            if if_absent and current is not None:
                raise ConditionFailed
            return dict(item)

        try:
            self.update(pk, sk, replace)
        except ConditionFailed:
            return False
        return True

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """Several writes as one: hold this while checking every condition, then writing (TransactWriteItems)."""
        return self._lock

    def delete(self, pk: str, sk: str) -> Item | None:
        with self._lock:
            before = self.items.get((pk, sk))
            if before is not None:
                self._store((pk, sk), before, None)
            return before

    # ---------------------------------------------------------------------------- internals

    def _store(self, key: Key, before: Item | None, after: Item | None) -> None:
        size = max(item_size(before) if before else 0, item_size(after) if after else 0)
        self.capacity.writes += 1
        self.capacity.write_units += max(1, math.ceil(size / 1024))
        for index in self.definition.indexes:
            shard_attr, at_attr = index.partition_key[0], index.sort_key[0]
            old = (before[shard_attr], before[at_attr]) if before and _indexed(before, shard_attr, at_attr) else None
            new = (after[shard_attr], after[at_attr]) if after and _indexed(after, shard_attr, at_attr) else None
            projected = index.non_key_attributes
            if old is not None and (new is None or new[0] != old[0]):
                del self._indexes[index.name][old[0]][key]
            if new is not None:
                self._indexes[index.name][new[0]][key] = new[1]
            # An index write costs a unit per item put or removed there (two when its key moves).
            units = 0
            if old != new:
                units = (old is not None) + (new is not None)
            elif new is not None and before and after and any(before.get(a) != after.get(a) for a in projected):
                units = 1
            if units:
                self.capacity.write_units += units
                by_index = self.capacity.index_write_units
                by_index[index.name] = by_index.get(index.name, 0) + units
        if after is None:
            self.items.pop(key, None)
            ordered = self._partitions[key[0]]
            at = bisect.bisect_left(ordered, key[1])
            if at < len(ordered) and ordered[at] == key[1]:
                del ordered[at]
        else:
            if key not in self.items:
                bisect.insort(self._partitions[key[0]], key[1])
            self.items[key] = after

    def _count_read(self, item: Item | None, consistent: bool) -> None:
        self.capacity.reads += 1
        units = max(1, math.ceil((item_size(item) if item else 0) / 4096))
        self.capacity.read_units += units if consistent else units / 2


def _indexed(item: Item, shard_attr: str, at_attr: str) -> bool:
    return item.get(shard_attr) is not None and item.get(at_attr) is not None


def item_size(item: Item | None) -> int:
    """DynamoDB's item size: attribute names plus values (strings by UTF-8 length, numbers about one byte
    per two digits, maps and lists with three bytes of overhead)."""
    if not item:
        return 0
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items() if value is not None)


def _value_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int | float):
        return len(str(value)) // 2 + 1
    if isinstance(value, dict):
        return 3 + sum(len(str(k).encode()) + _value_size(v) for k, v in value.items())
    if isinstance(value, list | set | tuple):
        return 3 + sum(_value_size(v) for v in value)
    return len(str(value).encode())
