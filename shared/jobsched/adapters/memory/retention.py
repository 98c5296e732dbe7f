"""Retention without TTL in memory: the same pages and conditional deletes as ``aws.retention``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobsched.adapters.items import sweep_state_of, sweep_state_values
from jobsched.adapters.memory.table import MemoryTable
from jobsched.core.names import SWEEP, JobsKeys
from jobsched.ports import ExpiredPage, SweepState


class MemoryExpiredItems:
    def __init__(self, jobs: MemoryTable, runs: MemoryTable) -> None:
        self._tables = {jobs.definition.logical_name: jobs, runs.definition.logical_name: runs}
        self._jobs = jobs

    def tables(self) -> tuple[str, ...]:
        return tuple(self._tables)

    def expired_page(self, table: str, *, cursor: str | None, now: datetime, limit: int) -> ExpiredPage:
        store = self._tables[table]
        after = tuple(json.loads(cursor)) if cursor else None
        keys = sorted(store.items)
        start = 0 if after is None else next((i for i, key in enumerate(keys) if key > after), len(keys))
        page = keys[start : start + limit]
        pk, sk = store.definition.partition_key[0], store.definition.sort_key[0]
        expired = [{pk: key[0], sk: key[1]} for key in page if _expired(store.items.get(key), int(now.timestamp()))]
        more = start + limit < len(keys)
        return ExpiredPage(expired, len(page), json.dumps(list(page[-1])) if more and page else None)

    def delete_expired(self, table: str, keys: Sequence[dict[str, Any]], *, now: datetime) -> int:
        store = self._tables[table]
        pk, sk = store.definition.partition_key[0], store.definition.sort_key[0]
        deleted = 0
        for key in keys:
            with store.transaction():
                if _expired(store.items.get((key[pk], key[sk])), int(now.timestamp())):
                    store.delete(key[pk], key[sk])
                    deleted += 1
        return deleted

    def sweep_state(self, table: str) -> SweepState:
        return sweep_state_of(self._jobs.get(SWEEP, table) or {})

    def save_sweep_state(self, table: str, state: SweepState) -> None:
        self._jobs.put(sweep_state_values(table, state))


def _expired(item: dict[str, Any] | None, now: int) -> bool:
    expires = item.get(JobsKeys.TTL) if item else None
    return expires is not None and int(expires) < now
