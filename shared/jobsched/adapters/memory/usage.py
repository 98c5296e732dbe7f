"""A job's item of the day in memory: the same items as ``aws.jobs.usage`` (usage and SLO counts in one write)."""

from __future__ import annotations

from datetime import date

from jobsched.adapters.items import job_day_adds, usage_day
from jobsched.adapters.memory.table import Item, MemoryTable
from jobsched.core.names import JobsKeys
from jobsched.core.slo import RunCount
from jobsched.ports import UsageDay


class MemoryUsage:
    table: MemoryTable

    def add_usage(
        self,
        team: str,
        job: str,
        day: date,
        counters: dict[str, float],
        *,
        tier: str,
        target_type: str | None = None,
        count: RunCount | None = None,
    ) -> None:
        added = job_day_adds(counters, count)

        def change(item: Item | None) -> Item:
            updated = dict(item or {JobsKeys.PK: f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.SK: sk})
            updated |= {"tier": tier, "job": job}
            if target_type is not None:
                updated["target_type"] = target_type
            for name, value in added.items():
                updated[name] = float(updated.get(name, 0.0)) + value
            return updated

        sk = f"{JobsKeys.USAGE_PREFIX}{day.isoformat()}#{job}"
        self.table.update(f"{JobsKeys.TEAM_PREFIX}{team}", sk, change)

    def usage_between(self, team: str, first: date, last: date) -> list[UsageDay]:
        return [usage_day(item) for item in self._job_days(team, first, last)]

    def _job_days(self, team: str, first: date, last: date) -> list[Item]:
        return list(
            self.table.partition(
                f"{JobsKeys.TEAM_PREFIX}{team}",
                first=f"{JobsKeys.USAGE_PREFIX}{first.isoformat()}#",
                last=f"{JobsKeys.USAGE_PREFIX}{last.isoformat()}#~",
            )
        )
