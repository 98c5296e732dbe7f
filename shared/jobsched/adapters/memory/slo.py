"""A team's SLO ledger in memory: the same items as ``aws.jobs.slo`` (the contract suite runs both)."""

from __future__ import annotations

from datetime import date

from jobsched.adapters.items import slo_days_of
from jobsched.adapters.memory.table import Item
from jobsched.adapters.memory.usage import MemoryUsage
from jobsched.core.names import JobsKeys
from jobsched.core.slo import RunCount, SloDay


class MemorySloLedger(MemoryUsage):
    def count_run(self, team: str, tier: str, day: date, count: RunCount, *, job: str) -> None:
        self.add_usage(team, job, day, {}, tier=tier, count=count)

    def note_team_day(self, team: str, day: date) -> None:
        key = JobsKeys.slo_teams_day(day, team)
        if team in (self.table.get(JobsKeys.SLO_TEAMS, key, consistent=False) or {}).get("teams", ()):
            return

        def change(item: Item | None) -> Item:
            updated: Item = dict(item or {})
            updated["teams"] = set(updated.get("teams", set())) | {team}
            return updated

        self.table.update(JobsKeys.SLO_TEAMS, key, change)

    def teams_between(self, first: date, last: date) -> set[str]:
        low, high = JobsKeys.slo_teams_range(first, last)
        items = self.table.partition(JobsKeys.SLO_TEAMS, first=low, last=high)
        return {str(team) for item in items for team in item.get("teams", ())}

    def slo_days(self, team: str, tier: str, first: date, last: date) -> list[SloDay]:
        ledger = self.table.partition(
            JobsKeys.TEAM_PREFIX + team, first=JobsKeys.slo_day(tier, first), last=JobsKeys.slo_day(tier, last)
        )
        return slo_days_of(self._job_days(team, first, last), ledger, tier)
