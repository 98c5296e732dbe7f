"""Which jobs run after a job: one item per downstream in the upstream's partition, written when the
downstream is stored (a hint; ``registry.dependencies`` checks each against the downstream's spec)."""

from __future__ import annotations

from jobsched.adapters.aws.dynamo import every_item, to_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys


class DependenciesStore(JobsTable):
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
