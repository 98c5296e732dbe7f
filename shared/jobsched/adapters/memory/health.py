"""A job's health item in memory: the same item, conditions and index as ``aws.jobs.health``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.core.baseline import Baseline
from jobsched.core.freshness import FreshnessState
from jobsched.core.health import HealthItem, fresh_shard
from jobsched.core.names import JobsKeys
from jobsched.core.runs import instant_text


class MemoryHealth:
    table: MemoryTable

    def health(self, job: str, *, consistent: bool = True) -> HealthItem:
        return HealthItem.from_values(self.table.get(job, JobsKeys.HEALTH, consistent=consistent))

    def put_health(
        self, job: str, *, freshness: FreshnessState | None = None, version: int = 0, baseline: Baseline | None = None
    ) -> bool:
        if freshness is None and baseline is None:
            return True

        def change(item: Item | None) -> Item:
            updated: Item = dict(item or {})
            if baseline is not None:
                updated["baseline"] = baseline.as_values()
            if freshness is not None:
                if int(updated.get("fresh_version", 0)) != version or (not version and "fresh_version" in updated):
                    raise ConditionFailed()
                updated |= {"freshness": freshness.as_values(), "fresh_version": version + 1}
                updated.pop(JobsKeys.FRESH_SHARD, None)
                updated.pop(JobsKeys.FRESH_CHECK_AT, None)
                if freshness.check_at is not None:
                    updated[JobsKeys.FRESH_SHARD] = fresh_shard(job)
                    updated[JobsKeys.FRESH_CHECK_AT] = instant_text(freshness.check_at)
            return updated

        try:
            self.table.update(job, JobsKeys.HEALTH, change)
        except ConditionFailed:
            return False
        return True

    def drop_freshness(self, job: str) -> None:
        def change(item: Item | None) -> Item | None:
            if item is None:
                return None
            kept = {k: v for k, v in item.items() if k not in DROPPED}
            return kept if set(kept) - {JobsKeys.PK, JobsKeys.SK} else None

        self.table.update(job, JobsKeys.HEALTH, change)

    def note_team_freshness(self, team: str, name: str, view: dict[str, str] | None) -> None:
        def change(item: Item | None) -> Item | None:
            updated: Item = {k: v for k, v in (item or {}).items() if k != name}
            if view is not None:
                updated[name] = dict(view)
            return updated if set(updated) - {JobsKeys.PK, JobsKeys.SK} else None

        self.table.update(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_FRESHNESS, change)

    def team_freshness(self, team: str) -> dict[str, dict[str, str]]:
        item = self.table.get(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_FRESHNESS) or {}
        return {name: dict(view) for name, view in item.items() if isinstance(view, dict)}

    def freshness_due(self, shard: int, until: datetime) -> Iterator[str]:
        for item in self.table.query_index(JobsKeys.FRESHNESS_INDEX, shard, instant_text(until)):
            yield str(item[JobsKeys.PK])


DROPPED = frozenset({"freshness", "fresh_version", JobsKeys.FRESH_SHARD, JobsKeys.FRESH_CHECK_AT})
