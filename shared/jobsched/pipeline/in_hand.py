"""The job's spec the worker holds for the record it is processing, on the record's thread: the lifecycle's
subscribers run on that thread right after the worker's writes, and take the job's terms (tier, deadline, zone)
from it instead of reading the spec again (an hourly job's run read it once more for its SLO count, since the
subscribers' one-minute cache had long expired). As stale as the worker's own read (eventually consistent), which
the subscribers already allowed a minute of."""

from __future__ import annotations

import threading

from jobsched.core.records import StoredJob

_local = threading.local()


def hold_spec(stored: StoredJob) -> None:
    _local.stored = stored


def drop_spec() -> None:
    _local.stored = None


def spec_in_hand(job: str) -> StoredJob | None:
    stored: StoredJob | None = getattr(_local, "stored", None)
    return stored if stored is not None and stored.key == job else None
