"""Emergency stops in memory: the same item and condition as ``aws.jobs.stops``."""

from __future__ import annotations

import json

from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.core.names import JobsKeys
from jobsched.core.stops import Stop


class MemoryStops:
    table: MemoryTable

    def put_stop(self, stop: Stop) -> None:
        self.table.put({JobsKeys.PK: JobsKeys.STOP_PREFIX + stop.stop_id, JobsKeys.SK: JobsKeys.STOP,
                        "stop": json.dumps(stop.as_values())})  # fmt: skip

    def get_stop(self, stop_id: str) -> Stop | None:
        item = self.table.get(JobsKeys.STOP_PREFIX + stop_id, JobsKeys.STOP)
        return Stop.from_values(json.loads(item["stop"])) if item else None

    def resume_stop_once(self, stop: Stop) -> bool:
        def change(item: Item | None) -> Item:
            if item is None or item.get("resumed"):
                raise ConditionFailed
            return {**item, "stop": json.dumps(stop.as_values()), "resumed": True}

        try:
            self.table.update(JobsKeys.STOP_PREFIX + stop.stop_id, JobsKeys.STOP, change)
        except ConditionFailed:
            return False
        return True
