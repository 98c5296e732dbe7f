"""Runs and DAG tasks waiting for data, on the Jobs table: one item each in the job's partition, holding the
message that wakes it and what it awaits (a wake rule's event names which)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.adapters.aws.dynamo import every_item, to_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys


class WaitersStore(JobsTable):
    def add_waiter(self, job: str, waiter: str, message: str, *, awaits: list[str], expires_at: datetime) -> None:
        item = {
            JobsKeys.PK: job,
            JobsKeys.SK: f"{JobsKeys.WAITER_PREFIX}{waiter}",
            "message": message,
            "awaits": awaits,
            JobsKeys.TTL: int(expires_at.timestamp()),
        }
        self.db.put_item(TableName=self.table, Item=to_item(item))

    def waiters(self, job: str, *, limit: int, awaiting: str | None = None) -> dict[str, str]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": to_values({":pk": job, ":prefix": JobsKeys.WAITER_PREFIX}),
        }
        if awaiting is not None:
            request["FilterExpression"] = "contains(awaits, :awaiting)"
            request["ExpressionAttributeValues"] |= to_values({":awaiting": awaiting})
        found = every_item(self.db, max_items=limit, **request)
        return {str(item[JobsKeys.SK]).removeprefix(JobsKeys.WAITER_PREFIX): str(item["message"]) for item in found}

    def drop_waiter(self, job: str, waiter: str) -> None:
        self.db.delete_item(TableName=self.table, Key=self._key(job, f"{JobsKeys.WAITER_PREFIX}{waiter}"))
