"""Usage counters in memory: the same items as ``aws.jobs.usage``."""

from __future__ import annotations

from datetime import date

from jobsched.adapters.items import usage_day
from jobsched.adapters.memory.table import Item, MemoryTable
from jobsched.core.names import JobsKeys
from jobsched.core.usage import COUNTERS
from jobsched.ports import UsageDay


class MemoryUsage:
    table: MemoryTable

    def add_usage(
        self, team: str, job: str, day: date, counters: dict[str, float], *, tier: str, target_type: str
    ) -> None:
        def change(item: Item | None) -> Item:
            updated = dict(item or {JobsKeys.PK: f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.SK: sk})
            updated |= {"tier": tier, "target_type": target_type, "job": job}
            for name, value in counters.items():
                if name in COUNTERS and value:
                    updated[name] = float(updated.get(name, 0.0)) + float(value)
            return updated

        sk = f"{JobsKeys.USAGE_PREFIX}{day.isoformat()}#{job}"
        self.table.update(f"{JobsKeys.TEAM_PREFIX}{team}", sk, change)

    def usage_between(self, team: str, first: date, last: date) -> list[UsageDay]:
        items = self.table.partition(
            f"{JobsKeys.TEAM_PREFIX}{team}",
            first=f"{JobsKeys.USAGE_PREFIX}{first.isoformat()}#",
            last=f"{JobsKeys.USAGE_PREFIX}{last.isoformat()}#~",
        )
        return [usage_day(item) for item in items]
