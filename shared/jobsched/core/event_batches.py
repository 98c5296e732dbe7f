"""A batched trigger's events, in numbered batches: each batch is one run, named by job, trigger and number
(``batch_run_id``), that receives the batch's events as a list (``batch_payload``). Pure.

An event is added to a batch only while the batch is open, not full and inside its window, in one transaction
with the marker that makes it one entry however often it is delivered; the worker closes the batch before
reading it, so nothing is added to a batch whose run has read its list.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from jobsched.core.names import JobsKeys
from jobsched.core.runs import instant_text, parse_instant, scheduled_run_id

MAX_BATCH_PAYLOAD_BYTES = 256 * 1024  # a batched run's list of events, as its target receives it


def batch_run_id(job: str, trigger: str, number: int, opened_at: datetime) -> str:
    """A batch's run: time-sortable by the batch's first event, the same for every event of the batch."""
    digest = hashlib.sha256(f"{job}|{trigger}|{number}".encode()).hexdigest()[:16]
    return f"{scheduled_run_id(opened_at)}-b-{digest}"


@dataclass(frozen=True)
class EventBatch:
    """One batch of a trigger's events, as stored: its number (1, 2, ...), its run and when it opened."""

    job: str
    trigger: str  # the trigger's fingerprint
    number: int
    run_id: str
    opened_at: datetime
    run_sent: bool = False  # the batch's run is created and its message sent
    count: int = 0  # events added (as last read)

    @classmethod
    def from_values(cls, job: str, trigger: str, values: dict[str, Any]) -> EventBatch:
        """From the stored item (number, run_id, opened_at, run_sent, count)."""
        return cls(
            job=job,
            trigger=trigger,
            number=int(values["number"]),
            run_id=str(values["run_id"]),
            opened_at=parse_instant(str(values["opened_at"])),
            run_sent=bool(values.get("run_sent")),
            count=int(values.get("count", 0)),
        )

    def event_sort_key(self, event: BatchedEvent) -> str:
        return f"{JobsKeys.batch_events(self.trigger, self.number)}{instant_text(event.time)}#{event.key}"


@dataclass(frozen=True)
class BatchedEvent:
    """One event in a batch: ``key`` (its identity's digest) makes it one entry however often delivered."""

    key: str
    time: datetime
    entry: dict[str, Any]


BatchAdd = Literal["added", "filled", "duplicate", "closed"]


@dataclass(frozen=True)
class BatchAdded:
    """added; filled (added, and the batch is now full: its run may start); duplicate (the event is in a
    batch already); closed (the batch takes no more: closed, full or past its window; nothing written)."""

    status: BatchAdd
    run_sent: bool = True


def batch_named(detail: dict[str, Any] | None) -> tuple[str, int] | None:
    """(trigger fingerprint, batch number) of a batched run, from its trigger detail (None: not a batch)."""
    batch = (detail or {}).get("batch")
    return (str(batch["trigger"]), int(str(batch["number"]))) if isinstance(batch, dict) else None


def run_events_path(job: str, run_id: str) -> str:
    """The API path that returns a run's events whole (a large event, or a batch's full list)."""
    team, name = job.split("/", 1)
    return f"/teams/{team}/jobs/{name}/runs/{run_id}/events"


def batch_payload(detail: dict[str, Any], events: list[BatchedEvent], *, events_ref: str) -> dict[str, Any]:
    """What a batched run's target receives: the trigger, the count and the events in time order, bounded
    (entries past ``MAX_BATCH_PAYLOAD_BYTES`` are counted as omitted, never cut in half, and ``events_ref``
    is the API path that lists them all)."""
    entries: list[dict[str, Any]] = []
    size = 0
    for event in sorted(events, key=lambda e: (e.time, e.key)):
        entry_size = len(json.dumps(event.entry, separators=(",", ":")).encode()) + 1
        if size + entry_size > MAX_BATCH_PAYLOAD_BYTES:
            break
        entries.append(event.entry)
        size += entry_size
    payload: dict[str, Any] = {"trigger": {**detail, "count": len(events)}, "events": entries}
    if len(entries) < len(events):
        payload["omitted"] = len(events) - len(entries)
        payload["events_ref"] = events_ref
    return payload
