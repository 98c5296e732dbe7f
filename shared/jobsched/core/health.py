"""A job's health item: its freshness (``core.freshness``) and its learned baseline (``core.baseline``), kept
together on one item per job (``JobsKeys.HEALTH``) so that a run's end that changes both writes once."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from jobsched.core.baseline import Baseline
from jobsched.core.freshness import FreshnessState
from jobsched.core.names import LEASE_SHARDS


@dataclass(frozen=True)
class HealthItem:
    freshness: FreshnessState | None = None
    version: int = 0  # of the freshness part: its writes are conditional on the version read
    baseline: Baseline | None = None

    @classmethod
    def from_values(cls, values: dict[str, Any] | None) -> HealthItem:
        if not values:
            return cls()
        fresh, learned = values.get("freshness"), values.get("baseline")
        return cls(
            freshness=FreshnessState.from_values(fresh) if fresh else None,
            version=int(values.get("fresh_version", 0)),
            baseline=Baseline.from_values(learned) if learned else None,
        )


def fresh_shard(job: str) -> int:
    """The freshness index's shard of a job (spread like the leases)."""
    return zlib.crc32(job.encode()) % LEASE_SHARDS
