"""A job's item of the day on the Jobs table: pk "TEAM#{team}", sk "USAGE#{day}#{job}". Each attempt's usage
(``core.usage``) and, at a run's end, its SLO counts (``core.slo``) are added to it in one UpdateItem (ADD): a
run's end is one write. A team's month (its chargeback) or SLO window is one key range of the team's partition."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from jobsched.adapters.aws.dynamo import every_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.adapters.items import job_day_adds, usage_day
from jobsched.core.names import JobsKeys
from jobsched.core.slo import RunCount
from jobsched.ports import UsageDay

MAX_DAYS_READ = 31 * 2000  # a month of a team's jobs at most (the team's job limit's order)


class UsageStore(JobsTable):
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
        names = {"#tier": "tier", "#job": "job"}
        names |= {f"#c{index}": name for index, name in enumerate(added)}
        values: dict[str, object] = {":tier": tier, ":job": job}
        values |= {f":c{index}": Decimal(str(round(value, 9))) for index, value in enumerate(added.values())}
        update = "SET #tier = :tier, #job = :job"
        if target_type is not None:
            names["#target"], values[":target"] = "target_type", target_type
            update += ", #target = :target"
        if added:
            update += " ADD " + ", ".join(f"#c{index} :c{index}" for index in range(len(added)))
        self.db.update_item(
            TableName=self.table,
            Key=self._key(f"{JobsKeys.TEAM_PREFIX}{team}", f"{JobsKeys.USAGE_PREFIX}{day.isoformat()}#{job}"),
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_values(values),
        )

    def usage_between(self, team: str, first: date, last: date) -> list[UsageDay]:
        return [usage_day(item) for item in self._job_days(team, first, last)]

    def _job_days(self, team: str, first: date, last: date) -> list[dict[str, Any]]:
        """Every job's items of the days ``first`` to ``last``, as stored."""
        return list(
            every_item(
                self.db,
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
                ExpressionAttributeValues=to_values(
                    {
                        ":pk": f"{JobsKeys.TEAM_PREFIX}{team}",
                        ":first": f"{JobsKeys.USAGE_PREFIX}{first.isoformat()}#",
                        ":last": f"{JobsKeys.USAGE_PREFIX}{last.isoformat()}#~",
                    }
                ),
                max_items=MAX_DAYS_READ,
            )
        )
