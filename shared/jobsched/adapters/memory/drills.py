"""Paging drills kept per team in memory: the same item as ``aws.jobs.drills`` (the contract suite runs both)."""

from __future__ import annotations

from jobsched.adapters.memory.table import Item, MemoryTable
from jobsched.core.names import JobsKeys


class MemoryDrills:
    table: MemoryTable

    def record_drills(self, team: str, verified: dict[str, dict[str, str]]) -> None:
        pk = JobsKeys.TEAM_PREFIX + team

        def change(item: Item | None) -> Item:
            return dict(item or {JobsKeys.PK: pk, JobsKeys.SK: JobsKeys.TEAM_DRILLS}) | {
                address: dict(result) for address, result in verified.items()
            }

        if verified:
            self.table.update(pk, JobsKeys.TEAM_DRILLS, change)

    def drills(self, team: str) -> dict[str, dict[str, str]]:
        item = self.table.get(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_DRILLS) or {}
        return {name: dict(value) for name, value in item.items() if isinstance(value, dict)}
