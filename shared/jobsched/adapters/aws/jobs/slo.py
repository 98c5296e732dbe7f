"""A team's SLO ledger on the Jobs table: each ended run (and freshness judgement) adds its counts to its job's
item of the day (``aws.jobs.usage``, with the attempt's usage: one write); a tier's day is the sum of the team's
job items of that day under the tier, read by key range (a window's days of the team's jobs: never the runs).
Items of the layout before #51 (one a tier a day, ``JobsKeys.slo_day``) are still read until their window has
passed. The teams with counted events on each day are kept apart (the executive view's rows)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from jobsched.adapters.aws.dynamo import every_item, to_values
from jobsched.adapters.aws.jobs.usage import UsageStore
from jobsched.adapters.items import slo_days_of
from jobsched.core.names import JobsKeys
from jobsched.core.slo import MAX_WINDOW_DAYS, RunCount, SloDay


class SloLedgerStore(UsageStore):
    def count_run(self, team: str, tier: str, day: date, count: RunCount, *, job: str) -> None:
        self.add_usage(team, job, day, {}, tier=tier, count=count)

    def slo_days(self, team: str, tier: str, first: date, last: date) -> list[SloDay]:
        ledger = self._days(JobsKeys.TEAM_PREFIX + team, JobsKeys.slo_day(tier, first), JobsKeys.slo_day(tier, last))
        return slo_days_of(self._job_days(team, first, last), ledger, tier)

    def _days(self, pk: str, first: str, last: str, *, per_day: int = 1) -> list[dict[str, Any]]:
        """A ledger partition's items from sort key ``first`` to ``last`` (a window's days, ``per_day`` items each at
        most: bounded)."""
        return list(
            every_item(
                self.db,
                max_items=(MAX_WINDOW_DAYS + 1) * per_day,
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
                ExpressionAttributeValues=to_values({":pk": pk, ":first": first, ":last": last}),
            )
        )

    def note_team_day(self, team: str, day: date) -> None:
        key = self._key(JobsKeys.SLO_TEAMS, JobsKeys.slo_teams_day(day, team))
        found = self.db.get_item(TableName=self.table, Key=key, ProjectionExpression="teams").get("Item") or {}
        if team in (found.get("teams") or {}).get("SS", ()):
            return  # an eventually consistent read that missed it adds it again: a set's add is idempotent
        self.db.update_item(
            TableName=self.table,
            Key=key,
            UpdateExpression="ADD teams :team SET #ttl = :ttl",
            ExpressionAttributeNames={"#ttl": JobsKeys.TTL},
            ExpressionAttributeValues={
                ":team": {"SS": [team]},
                ":ttl": {"N": str(_epoch(day + timedelta(days=MAX_WINDOW_DAYS + 1)))},
            },
        )

    def teams_between(self, first: date, last: date) -> set[str]:
        low, high = JobsKeys.slo_teams_range(first, last)
        found = self._days(JobsKeys.SLO_TEAMS, low, high, per_day=JobsKeys.SLO_TEAM_SHARDS + 1)
        return {str(team) for values in found for team in values.get("teams", ())}


def _epoch(day: date) -> int:
    return int((day - date(1970, 1, 1)).total_seconds())
