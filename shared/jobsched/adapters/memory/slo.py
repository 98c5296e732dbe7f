"""A team's SLO ledger in memory: the same items as ``aws.jobs.slo`` (the contract suite runs both)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import date

from jobsched.adapters.items import SLO_COUNTERS as COUNTERS
from jobsched.adapters.items import slo_day_of
from jobsched.adapters.memory.table import Item, MemoryTable
from jobsched.core.names import JobsKeys
from jobsched.core.slo import RunCount, SloDay


class MemorySloLedger:
    table: MemoryTable

    def count_run(self, team: str, tier: str, day: date, count: RunCount, *, job: str | None = None) -> None:
        pk, sk = JobsKeys.TEAM_PREFIX + team, JobsKeys.slo_day(tier, day)
        added = {name: value for name, value in asdict(count).items() if name in COUNTERS}
        if job is not None and count.spent:
            added[JobsKeys.SLO_JOB_PREFIX + job] = count.spent

        def change(item: Item | None) -> Item:
            updated: Item = dict(item or {JobsKeys.PK: pk, JobsKeys.SK: sk})
            for name, value in added.items():
                updated[name] = int(updated.get(name, 0)) + value
            return updated

        self.table.update(pk, sk, change)

    def note_team_day(self, team: str, day: date) -> None:
        def change(item: Item | None) -> Item:
            updated: Item = dict(item or {})
            updated["teams"] = set(updated.get("teams", set())) | {team}
            return updated

        self.table.update(JobsKeys.SLO_TEAMS, day.isoformat(), change)

    def teams_between(self, first: date, last: date) -> set[str]:
        items = self.table.partition(JobsKeys.SLO_TEAMS, first=first.isoformat(), last=last.isoformat())
        return {str(team) for item in items for team in item.get("teams", ())}

    def slo_days(self, team: str, tier: str, first: date, last: date) -> list[SloDay]:
        items = self.table.partition(
            JobsKeys.TEAM_PREFIX + team, first=JobsKeys.slo_day(tier, first), last=JobsKeys.slo_day(tier, last)
        )
        return [slo_day_of(item) for item in items]
