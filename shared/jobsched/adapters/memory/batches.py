"""Event batches and kept events in memory: the same items and conditions as ``aws.jobs.batches``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.core.event_batches import BatchAdded, BatchedEvent, EventBatch
from jobsched.core.names import JobsKeys
from jobsched.core.runs import instant_text, parse_instant


class MemoryBatches:
    table: MemoryTable
    _applied: Callable[[str, str, Callable[[Item | None], Item | None]], bool]

    # ---------------------------------------------------------------------------- event batches

    def current_batch(self, job: str, trigger: str) -> EventBatch | None:
        item = self.table.get(job, JobsKeys.batch(trigger))
        return EventBatch.from_values(job, trigger, item) if item is not None else None

    def start_batch(
        self, job: str, trigger: str, *, after: int, run_id: str, now: datetime
    ) -> tuple[EventBatch, EventBatch | None]:
        with self.table.transaction():
            before = self.table.get(job, JobsKeys.batch(trigger))
            if before is None and after:  # expired since it was read: start again from the first
                return self.start_batch(job, trigger, after=0, run_id=run_id, now=now)
            if before is not None and before["number"] != after:
                return EventBatch.from_values(job, trigger, before), None
            opened = instant_text(now)
            self.table.update(
                job,
                JobsKeys.batch(trigger),
                lambda item: {
                    "number": after + 1,
                    "run_id": run_id,
                    "opened_at": opened,
                    "count": 0,
                    "state": "OPEN",
                    "run_sent": False,
                },
            )
        replaced = EventBatch.from_values(job, trigger, before) if before is not None else None
        return EventBatch(job, trigger, after + 1, run_id, parse_instant(opened)), replaced

    def add_to_batch(
        self, batch: EventBatch, event: BatchedEvent, *, now: datetime, window: timedelta, max_events: int
    ) -> BatchAdded:
        key = JobsKeys.batch(batch.trigger)
        with self.table.transaction():
            if self.table.get(batch.job, JobsKeys.batched(batch.trigger, event.key)) is not None:
                return BatchAdded("duplicate")
            current = self.table.get(batch.job, key)
            if (
                current is None
                or current["number"] != batch.number
                or current["state"] != "OPEN"
                or current["count"] >= max_events
                or current["opened_at"] < instant_text(now - window)
            ):
                return BatchAdded("closed")
            entry = {"key": event.key, "time": instant_text(event.time), "entry": event.entry}
            self.table.put({JobsKeys.PK: batch.job, JobsKeys.SK: batch.event_sort_key(event), **entry})
            self.table.put(
                {
                    JobsKeys.PK: batch.job,
                    JobsKeys.SK: JobsKeys.batched(batch.trigger, event.key),
                    "number": batch.number,
                }
            )
            count = current["count"] + 1
            self.table.update(batch.job, key, lambda item: {**(item or {}), "count": count})
        return BatchAdded("filled" if count >= max_events else "added", run_sent=bool(current["run_sent"]))

    def mark_batch_sent(self, batch: EventBatch) -> None:
        def sent(item: Item | None) -> Item:
            if item is None or item["number"] != batch.number:
                raise ConditionFailed
            return {**item, "run_sent": True}

        self._applied(batch.job, JobsKeys.batch(batch.trigger), sent)

    def close_batch(self, job: str, trigger: str, number: int) -> list[BatchedEvent]:
        def closed(item: Item | None) -> Item:
            if item is None or item["number"] != number:
                raise ConditionFailed
            return {**item, "state": "CLOSED"}

        self._applied(job, JobsKeys.batch(trigger), closed)
        return self.batch_events(job, trigger, number)

    def batch_events(self, job: str, trigger: str, number: int) -> list[BatchedEvent]:
        prefix = JobsKeys.batch_events(trigger, number)
        return [
            BatchedEvent(key=item["key"], time=parse_instant(item["time"]), entry=item["entry"])
            for item in self.table.partition(job, first=prefix, last=prefix + "\uffff")
        ]

    def keep_event(self, job: str, run_id: str, event: dict[str, Any], *, expires_at: datetime) -> None:
        self.table.put({JobsKeys.PK: job, JobsKeys.SK: f"{JobsKeys.KEPT_EVENT_PREFIX}{run_id}", "event": event})

    def kept_event(self, job: str, run_id: str) -> dict[str, Any] | None:
        item = self.table.get(job, f"{JobsKeys.KEPT_EVENT_PREFIX}{run_id}")
        return dict(item["event"]) if item is not None else None
