"""Usage counters on the Jobs table (``core.usage``): pk "TEAM#{team}", sk "USAGE#{day}#{job}", one UpdateItem ADD
an attempt (every counter in one write), a month read as one key range of the team's partition."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from jobsched.adapters.aws.dynamo import every_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.adapters.items import usage_day
from jobsched.core.names import JobsKeys
from jobsched.core.usage import COUNTERS
from jobsched.ports import UsageDay

MAX_DAYS_READ = 31 * 2000  # a month of a team's jobs at most (the team's job limit's order)


class UsageStore(JobsTable):
    def add_usage(
        self, team: str, job: str, day: date, counters: dict[str, float], *, tier: str, target_type: str
    ) -> None:
        added = {name: value for name, value in counters.items() if name in COUNTERS and value}
        names = {"#tier": "tier", "#target": "target_type", "#job": "job"}
        names |= {f"#c{index}": name for index, name in enumerate(added)}
        values: dict[str, object] = {":tier": tier, ":target": target_type, ":job": job}
        values |= {f":c{index}": Decimal(str(round(value, 9))) for index, value in enumerate(added.values())}
        update = "SET #tier = :tier, #target = :target, #job = :job"
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
        items = every_item(
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
        return [usage_day(item) for item in items]
