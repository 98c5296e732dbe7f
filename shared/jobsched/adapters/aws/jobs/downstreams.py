"""The links between jobs on the Jobs table: which jobs run after a job (one item per downstream in the upstream's
partition, written when the downstream is stored: a hint, ``registry.dependencies`` checks each against the
downstream's spec), and which upstream attempts an after-triggered run has carried already."""

from __future__ import annotations

from datetime import datetime

from jobsched.adapters.aws.dynamo import every_item, to_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys


class DownstreamsStore(JobsTable):
    def link_downstream(self, upstream: str, downstream: str) -> None:
        item = {JobsKeys.PK: upstream, JobsKeys.SK: f"{JobsKeys.DOWNSTREAM_PREFIX}{downstream}", "job": downstream}
        self.db.put_item(TableName=self.table, Item=to_item(item))

    def unlink_downstream(self, upstream: str, downstream: str) -> None:
        self.db.delete_item(TableName=self.table, Key=self._key(upstream, f"{JobsKeys.DOWNSTREAM_PREFIX}{downstream}"))

    def downstreams(self, job: str) -> list[str]:
        return [
            str(item["job"])
            for item in every_item(
                self.db,
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues=to_values({":pk": job, ":prefix": JobsKeys.DOWNSTREAM_PREFIX}),
                max_items=1000,
            )
        ]

    def carried(self, job: str, run_id: str, upstream_attempt: str) -> bool:
        key = self._key(job, f"{JobsKeys.CARRIED_PREFIX}{run_id}#{upstream_attempt}")
        return "Item" in self.db.get_item(TableName=self.table, Key=key, ConsistentRead=True)

    def mark_carried(self, job: str, run_id: str, upstream_attempt: str, *, expires_at: datetime) -> None:
        item = {
            JobsKeys.PK: job,
            JobsKeys.SK: f"{JobsKeys.CARRIED_PREFIX}{run_id}#{upstream_attempt}",
            JobsKeys.TTL: int(expires_at.timestamp()),
        }
        self.db.put_item(TableName=self.table, Item=to_item(item))
