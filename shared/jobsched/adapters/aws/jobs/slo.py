"""A team's SLO ledger on the Jobs table: one item per team, tier and UTC day (``JobsKeys.slo_day``) whose counters
each ended run adds to in one UpdateItem (ADD), and a counter per job with bad runs that day. A budget reads at
most the window's items of one tier, by key range: never the runs."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from jobsched.adapters.aws.dynamo import every_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.adapters.items import SLO_COUNTERS as COUNTERS
from jobsched.adapters.items import slo_day_of
from jobsched.core.names import JobsKeys
from jobsched.core.slo import MAX_WINDOW_DAYS, RunCount, SloDay


class SloLedgerStore(JobsTable):
    def count_run(self, team: str, tier: str, day: date, count: RunCount, *, job: str | None = None) -> None:
        names = {f"#{name}": name for name in COUNTERS}
        values: dict[str, object] = {f":{name}": getattr(count, name) for name in COUNTERS}
        adds = [f"#{name} :{name}" for name in COUNTERS]
        if job is not None and count.spent:
            names["#job"] = JobsKeys.SLO_JOB_PREFIX + job
            adds.append("#job :spent")
            values[":spent"] = count.spent
        expires = day + timedelta(days=MAX_WINDOW_DAYS + 1)
        names["#ttl"] = JobsKeys.TTL
        values[":ttl"] = _epoch(expires)
        self.db.update_item(
            TableName=self.table,
            Key=self._key(JobsKeys.TEAM_PREFIX + team, JobsKeys.slo_day(tier, day)),
            UpdateExpression="ADD " + ", ".join(adds) + " SET #ttl = :ttl",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_values(values),
        )

    def slo_days(self, team: str, tier: str, first: date, last: date) -> list[SloDay]:
        found = self._days(JobsKeys.TEAM_PREFIX + team, JobsKeys.slo_day(tier, first), JobsKeys.slo_day(tier, last))
        return [slo_day_of(values) for values in found]

    def _days(self, pk: str, first: str, last: str) -> list[dict[str, Any]]:
        """A ledger partition's items from sort key ``first`` to ``last`` (a window's days: bounded)."""
        return list(
            every_item(
                self.db,
                max_items=MAX_WINDOW_DAYS + 1,
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
                ExpressionAttributeValues=to_values({":pk": pk, ":first": first, ":last": last}),
            )
        )

    def note_team_day(self, team: str, day: date) -> None:
        self.db.update_item(
            TableName=self.table,
            Key=self._key(JobsKeys.SLO_TEAMS, day.isoformat()),
            UpdateExpression="ADD teams :team SET #ttl = :ttl",
            ExpressionAttributeNames={"#ttl": JobsKeys.TTL},
            ExpressionAttributeValues={
                ":team": {"SS": [team]},
                ":ttl": {"N": str(_epoch(day + timedelta(days=MAX_WINDOW_DAYS + 1)))},
            },
        )

    def teams_between(self, first: date, last: date) -> set[str]:
        found = self._days(JobsKeys.SLO_TEAMS, first.isoformat(), last.isoformat())
        return {str(team) for values in found for team in values.get("teams", ())}


def _epoch(day: date) -> int:
    return int((day - date(1970, 1, 1)).total_seconds())
