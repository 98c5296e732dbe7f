"""Paging drills kept per team on the Jobs table: pk "TEAM#{team}", sk "DRILLS", one attribute per destination
address (its last drill's outcome, when, for which job). A team's destinations are few (its jobs' topics and
webhooks), so one item holds them."""

from __future__ import annotations

from typing import Any

from jobsched.adapters.aws.dynamo import from_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys


class DrillsStore(JobsTable):
    def record_drills(self, team: str, verified: dict[str, dict[str, str]]) -> None:
        if not verified:
            return
        names = {f"#d{n}": address for n, address in enumerate(verified)}
        values: dict[str, Any] = {f":d{n}": result for n, result in enumerate(verified.values())}
        self.db.update_item(
            TableName=self.table,
            Key=self._key(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_DRILLS),
            UpdateExpression="SET " + ", ".join(f"#d{n} = :d{n}" for n in range(len(verified))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_values(values),
        )

    def drills(self, team: str) -> dict[str, dict[str, str]]:
        found = self.db.get_item(
            TableName=self.table, Key=self._key(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_DRILLS), ConsistentRead=True
        ).get("Item")
        values = from_item(found) if found else {}
        return {name: dict(value) for name, value in values.items() if isinstance(value, dict)}
