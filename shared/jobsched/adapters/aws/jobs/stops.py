"""Emergency stops on the Jobs table: pk "STOP#{id}", sk "STOP", the stop as one JSON attribute (a stop lists at
most ``MAX_STOPPED_JOBS`` jobs: well under an item's 400 KB). Resumed once: the write is conditional on no resume."""

from __future__ import annotations

import json

from jobsched.adapters.aws.dynamo import from_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys
from jobsched.core.stops import Stop


class StopsStore(JobsTable):
    def put_stop(self, stop: Stop) -> None:
        self.db.put_item(
            TableName=self.table,
            Item=self._key(JobsKeys.STOP_PREFIX + stop.stop_id, JobsKeys.STOP)
            | to_values({"stop": json.dumps(stop.as_values())}),
        )

    def get_stop(self, stop_id: str) -> Stop | None:
        found = self.db.get_item(
            TableName=self.table, Key=self._key(JobsKeys.STOP_PREFIX + stop_id, JobsKeys.STOP), ConsistentRead=True
        ).get("Item")
        return Stop.from_values(json.loads(from_item(found)["stop"])) if found else None

    def resume_stop_once(self, stop: Stop) -> bool:
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(JobsKeys.STOP_PREFIX + stop.stop_id, JobsKeys.STOP),
            UpdateExpression="SET #stop = :stop, resumed = :yes",
            ConditionExpression="attribute_exists(#stop) AND attribute_not_exists(resumed)",
            ExpressionAttributeNames={"#stop": "stop"},
            ExpressionAttributeValues=to_values({":stop": json.dumps(stop.as_values()), ":yes": True}),
        )
