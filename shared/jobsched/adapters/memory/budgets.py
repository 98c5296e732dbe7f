"""Teams' budgets in memory: the same items as ``aws.jobs.budgets``."""

from __future__ import annotations

import json
from typing import Any

from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.core.names import JobsKeys


class MemoryBudgets:
    table: MemoryTable

    def put_budget(self, team: str, budget: dict[str, Any] | None) -> None:
        if budget is None:
            self.table.delete(JobsKeys.BUDGET, team)
            return
        self.table.put({JobsKeys.PK: JobsKeys.BUDGET, JobsKeys.SK: team, "document": json.dumps(budget)})

    def budgets(self) -> dict[str, dict[str, Any]]:
        return {str(item[JobsKeys.SK]): json.loads(item["document"]) for item in self.table.partition(JobsKeys.BUDGET)}

    def budget_state(self, team: str, month: str) -> tuple[dict[str, Any] | None, int]:
        item = self.table.get(f"{JobsKeys.TEAM_PREFIX}{team}", f"{JobsKeys.BUDGET_MONTH_PREFIX}{month}")
        return (json.loads(item["state"]), int(item["version"])) if item else (None, 0)

    def put_budget_state(self, team: str, month: str, values: dict[str, Any], *, expected_version: int) -> bool:
        pk, sk = f"{JobsKeys.TEAM_PREFIX}{team}", f"{JobsKeys.BUDGET_MONTH_PREFIX}{month}"

        def change(item: Item | None) -> Item:
            if int((item or {}).get("version", 0)) != expected_version:
                raise ConditionFailed
            return {JobsKeys.PK: pk, JobsKeys.SK: sk, "state": json.dumps(values), "version": expected_version + 1}

        try:
            self.table.update(pk, sk, change)
        except ConditionFailed:
            return False
        return True
