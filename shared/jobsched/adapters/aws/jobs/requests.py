"""What requests leave behind: per-minute rate windows, trigger idempotency keys, backfills."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import from_item, is_conditional_failure, to_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys
from jobsched.core.records import due_shard
from jobsched.core.runs import instant_text

IDEMPOTENCY_KEY_SECONDS = 7 * 86400  # a trigger retried within a week gets the same run


class RequestsStore(JobsTable):
    def count_request(self, team: str, *, now: datetime, limit: int) -> bool:
        """Count one API request in the team's current minute; False once ``limit`` is reached."""
        return self._count(f"{JobsKeys.TEAM_PREFIX}{team}", now=now, limit=limit)

    def count_principal_request(self, principal: str, *, now: datetime, limit: int) -> bool:
        """Count one authenticated request of this caller in its current minute (team routes or not)."""
        digest = hashlib.sha256(principal.encode()).hexdigest()[:32]
        return self._count(f"{JobsKeys.PRINCIPAL_PREFIX}{digest}", now=now, limit=limit)

    def count_event_run(self, job: str, *, now: datetime, limit: int) -> bool:
        """Count one run started by an event in the job's current minute; False once ``limit`` is reached."""
        return self._count(job, now=now, limit=limit, prefix=JobsKeys.EVENT_RUNS_PREFIX)

    def note_upstream(
        self, job: str, trigger: str, instant: datetime, upstream: str, run_id: str, *, expires_at: datetime
    ) -> dict[str, str]:
        updated = self.db.update_item(
            TableName=self.table,
            Key=self._key(job, f"{JobsKeys.AFTER_PREFIX}{trigger}#{instant_text(instant)}"),
            UpdateExpression="SET #upstream = :run, expires_at = :expires",
            ExpressionAttributeNames={"#upstream": f"{JobsKeys.UPSTREAM_ATTRIBUTE}{upstream}"},
            ExpressionAttributeValues=to_values({":run": run_id, ":expires": int(expires_at.timestamp())}),
            ReturnValues="ALL_NEW",
        )
        seen = from_item(updated["Attributes"])
        prefix = JobsKeys.UPSTREAM_ATTRIBUTE
        return {name[len(prefix) :]: str(value) for name, value in seen.items() if name.startswith(prefix)}

    def _count(self, partition: str, *, now: datetime, limit: int, prefix: str = JobsKeys.RATE_PREFIX) -> bool:
        window = now.strftime("%Y-%m-%dT%H:%M")
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(partition, f"{prefix}{window}"),
            UpdateExpression="ADD requests :one SET expires_at = if_not_exists(expires_at, :expires)",
            ConditionExpression="attribute_not_exists(requests) OR requests < :limit",
            ExpressionAttributeValues=to_values({":one": 1, ":limit": limit, ":expires": int(now.timestamp()) + 3600}),
        )

    def reserve_idempotency_key(self, job: str, key: str, *, run_id: str, now: datetime, principal: str) -> str:
        """The run id for ``key``: ``run_id`` if this call reserves the key, else the one reserved first."""
        item_key = self._key(job, f"{JobsKeys.IDEMPOTENCY_PREFIX}{key}")
        try:
            self.db.put_item(
                TableName=self.table,
                Item=item_key
                | to_item(
                    {
                        "run_id": run_id,
                        "at": instant_text(now),
                        "principal": principal,
                        JobsKeys.TTL: int(now.timestamp()) + IDEMPOTENCY_KEY_SECONDS,
                    }
                ),
                ConditionExpression="attribute_not_exists(pk)",
            )
            return run_id
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
        existing = self.db.get_item(TableName=self.table, Key=item_key, ConsistentRead=True)["Item"]
        return str(from_item(existing)["run_id"])

    def put_backfill(
        self, job: str, backfill_id: str, values: dict[str, Any], *, cursor: datetime, due_at: datetime
    ) -> None:
        item = {
            JobsKeys.PK: job,
            JobsKeys.SK: f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}",
            **values,
            "cursor": instant_text(cursor),
            JobsKeys.DUE_SHARD: due_shard(f"{job}/{backfill_id}"),
            JobsKeys.NEXT_VISIT_AT: instant_text(due_at),
        }
        self.db.put_item(TableName=self.table, Item=to_item(item), ConditionExpression="attribute_not_exists(pk)")

    def get_backfill(self, job: str, backfill_id: str) -> dict[str, Any] | None:
        response = self.db.get_item(
            TableName=self.table, Key=self._key(job, f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}"), ConsistentRead=True
        )
        item = response.get("Item")
        return from_item(item) if item else None

    def update_backfill(
        self,
        job: str,
        backfill_id: str,
        current: dict[str, Any],
        changes: dict[str, Any],
        *,
        cursor: datetime | None,
        due_at: datetime | None,
    ) -> bool:
        """Apply ``changes`` if nobody advanced the backfill since ``current`` was read (its ``sent``)."""
        values: dict[str, Any] = {":sent_before": current["sent"]}
        names: dict[str, str] = {}
        sets = []
        for index, (name, value) in enumerate(changes.items()):
            names[f"#c{index}"] = name
            values[f":c{index}"] = value
            sets.append(f"#c{index} = :c{index}")
        if cursor is not None:
            names["#cursor"] = "cursor"
            values[":cursor"] = instant_text(cursor)
            sets.append("#cursor = :cursor")
        update = "SET " + ", ".join(sets)
        if due_at is None:
            update += " REMOVE due_shard, next_fire_at"
        else:
            values[":due"] = instant_text(due_at)
            update = update.replace("SET ", "SET next_fire_at = :due, ", 1)
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}"),
            UpdateExpression=update,
            ConditionExpression="sent = :sent_before",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_values(values),
        )
