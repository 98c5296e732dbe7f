"""Teams' budgets on the Jobs table: pk BUDGET / sk team (the document as JSON, all read with one query), and a
month's state under the team: pk "TEAM#{team}", sk "BUDGET#{month}", JSON with a version (conditional writes)."""

from __future__ import annotations

import json
from typing import Any

from jobsched.adapters.aws.dynamo import every_item, from_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys

MAX_BUDGETS = 2000


class BudgetsStore(JobsTable):
    def put_budget(self, team: str, budget: dict[str, Any] | None) -> None:
        key = self._key(JobsKeys.BUDGET, team)
        if budget is None:
            self.db.delete_item(TableName=self.table, Key=key)
            return
        self.db.put_item(TableName=self.table, Item=key | to_values({"document": json.dumps(budget)}))

    def budgets(self) -> dict[str, dict[str, Any]]:
        items = every_item(
            self.db,
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=to_values({":pk": JobsKeys.BUDGET}),
            max_items=MAX_BUDGETS,
        )
        return {str(item[JobsKeys.SK]): json.loads(str(item["document"])) for item in items}

    def budget_state(self, team: str, month: str) -> tuple[dict[str, Any] | None, int]:
        found = self.db.get_item(TableName=self.table, Key=self._state_key(team, month), ConsistentRead=True).get(
            "Item"
        )
        if not found:
            return None, 0
        values = from_item(found)
        return json.loads(str(values["state"])), int(values["version"])

    def put_budget_state(self, team: str, month: str, values: dict[str, Any], *, expected_version: int) -> bool:
        condition = "attribute_not_exists(version)" if expected_version == 0 else "version = :expected"
        names = {":state": json.dumps(values), ":version": expected_version + 1}
        if expected_version:
            names[":expected"] = expected_version
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._state_key(team, month),
            UpdateExpression="SET #state = :state, version = :version",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=to_values(names),
        )

    def _state_key(self, team: str, month: str) -> dict[str, Any]:
        return self._key(f"{JobsKeys.TEAM_PREFIX}{team}", f"{JobsKeys.BUDGET_MONTH_PREFIX}{month}")
