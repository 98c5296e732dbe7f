"""The Runs table's sparse indexes, as the stores read and leave them: leases run out (outside results, parked
DAG tasks due a heartbeat), deadlines passed, retries to wake, and each team's runs waiting for a slot. Each is
read by shard (or team) and instant only; a run leaves an index by a conditional write, so of two readers one
takes it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import every_item, from_item, is_conditional_failure, to_item, to_values, update_if
from jobsched.adapters.aws.runs_table import RunsTable
from jobsched.core.names import RunsKeys
from jobsched.core.run_records import TASK_PREFIX, ParkedTask, Run, TaskState
from jobsched.core.runs import RunStatus, instant_text

SLOT_WAIT_ATTRIBUTES = f"{RunsKeys.SLOT_WAIT_TEAM}, {RunsKeys.SLOT_WAIT_SINCE}"  # removed when the run starts or ends


class RunIndexesStore(RunsTable):
    def expired_leases(self, shard: int, now: datetime) -> Iterator[Run | ParkedTask]:
        """Runs waiting for an outside result whose lease has run out, and parked DAG tasks due a heartbeat
        (the sparse leases index only)."""
        return self._due_on_index(RunsKeys.LEASE_INDEX, RunsKeys.LEASE_SHARD, RunsKeys.LEASE_EXPIRES_AT, shard, now)

    def past_deadline(self, shard: int, now: datetime) -> Iterator[Run]:
        """Unfinished runs whose SLA deadline has passed and was not reported yet (the deadlines index)."""
        for run in self._due_on_index(
            RunsKeys.DEADLINE_INDEX, RunsKeys.DEADLINE_SHARD, RunsKeys.DEADLINE_AT, shard, now
        ):
            if isinstance(run, Run):
                yield run

    def deadline_reported(self, job: str, run_id: str) -> bool:
        """Take a run off the deadlines index once its miss is reported; False if already taken."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, run_id),
            UpdateExpression="REMOVE deadline_shard, deadline_at",
            ConditionExpression="attribute_exists(deadline_shard)",
        )

    def note_anomaly(self, job: str, run_id: str, text: str) -> None:
        """One write, on an ended run that exists (a run deleted meanwhile gets nothing)."""
        update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, run_id),
            UpdateExpression="SET anomaly = :text",
            ConditionExpression="attribute_exists(run_id)",
            ExpressionAttributeValues=to_values({":text": text[:200]}),
        )

    def wakeups(self, shard: int, until: datetime) -> Iterator[Run]:
        """Retries waiting longer than SQS can delay whose time comes by ``until`` (the wakeups index only)."""
        for run in self._due_on_index(RunsKeys.WAKE_INDEX, RunsKeys.WAKE_SHARD, RunsKeys.WAKE_AT, shard, until):
            if isinstance(run, Run):
                yield run

    def _due_on_index(
        self, index: str, shard_key: str, time_key: str, shard: int, until: datetime
    ) -> Iterator[Run | ParkedTask]:
        """Items on a sparse (shard, instant) index with an instant at or before ``until``, read in full."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index,
            "KeyConditionExpression": "#shard = :shard AND #at <= :until",
            "ExpressionAttributeNames": {"#shard": shard_key, "#at": time_key},
            "ExpressionAttributeValues": to_values({":shard": shard, ":until": instant_text(until)}),
        }
        for values in every_item(self.db, **request):
            if values[RunsKeys.SK].startswith(TASK_PREFIX):
                job, _, run_id = values[RunsKeys.PK].rpartition("#")
                key = {RunsKeys.PK: values[RunsKeys.PK], RunsKeys.SK: values[RunsKeys.SK]}
                found = self.db.get_item(TableName=self.table, Key=to_item(key), ConsistentRead=True)
                if "Item" in found:
                    yield ParkedTask(job, run_id, TaskState.from_values(from_item(found["Item"])))
                continue
            found = self.db.get_item(
                TableName=self.table, Key=self._key(values[RunsKeys.PK], values[RunsKeys.SK]), ConsistentRead=True
            )
            if "Item" in found:
                yield Run.from_values(from_item(found["Item"]))

    def note_held(
        self, job: str, run_id: str, *, reason: str | None = None, slot_team: str | None = None, since: datetime
    ) -> bool:
        """A first attempt held back (max_running, an open circuit): its reason, and with ``slot_team`` a place
        on that team's slot waits. One write; False if the run is past waiting."""
        sets, values = [], {":scheduled": RunStatus.SCHEDULED.value, ":one": 1}
        if reason is not None:
            sets.append("reason = :reason")
            values[":reason"] = reason
        if slot_team is not None:
            sets.append(f"{RunsKeys.SLOT_WAIT_TEAM} = :team, {RunsKeys.SLOT_WAIT_SINCE} = :since")
            values |= {":team": slot_team, ":since": instant_text(since)}
        if not sets:
            return True
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, run_id),
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="#status = :scheduled AND attempt = :one",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=to_values(values),
        )

    def slot_waiters(self, team: str, *, limit: int) -> list[tuple[str, str]]:
        """(job, run id) of the team's runs waiting for a slot, longest waiting first (the index's keys only)."""
        response = self.db.query(
            TableName=self.table,
            IndexName=RunsKeys.SLOT_WAIT_INDEX,
            KeyConditionExpression="#team = :team",
            ExpressionAttributeNames={"#team": RunsKeys.SLOT_WAIT_TEAM},
            ExpressionAttributeValues=to_values({":team": team}),
            Limit=limit,
        )
        return [(values[RunsKeys.PK], values[RunsKeys.SK]) for values in map(from_item, response.get("Items", []))]

    def take_slot_waiter(self, job: str, run_id: str) -> Run | None:
        """Take a waiting run off its team's slot waits to wake it; None if another waker (or its claim) did."""
        try:
            response = self.db.update_item(
                TableName=self.table,
                Key=self._key(job, run_id),
                UpdateExpression=f"REMOVE {SLOT_WAIT_ATTRIBUTES}",
                ConditionExpression=f"attribute_exists({RunsKeys.SLOT_WAIT_TEAM}) AND #status = :scheduled",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=to_values({":scheduled": RunStatus.SCHEDULED.value}),
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if is_conditional_failure(error):
                return None
            raise
        return Run.from_values(from_item(response["Attributes"]))

    def clear_wake(self, job: str, run_id: str, *, attempt: int) -> bool:
        """Take a retry off the wakeups index once its message is on a queue; False if already taken."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, run_id),
            UpdateExpression="REMOVE wake_shard, wake_at",
            ConditionExpression="attribute_exists(wake_shard) AND attempt = :attempt",
            ExpressionAttributeValues=to_values({":attempt": attempt}),
        )
