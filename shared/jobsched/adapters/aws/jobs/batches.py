"""Batched triggers' batches in the Jobs table (the protocol: ``jobsched.ports.EventBatchesPort``).

One item per trigger holds its current batch (number, run, opened, count, state). An event is added in one
transaction of three writes: that item's count, conditional on the batch being the one read, open, not full
and inside its window; the event's item in the batch; and the event's once-only marker. A redelivered event
fails on the marker and writes nothing; an event racing a close or a new batch fails on the count.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import every_item, from_item, is_conditional_failure, to_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.event_batches import BatchAdded, BatchedEvent, EventBatch
from jobsched.core.names import JobsKeys
from jobsched.core.runs import instant_text, parse_instant

BATCH_ITEMS_SECONDS = 14 * 86400  # a batch's items outlive its run's retries


class BatchesStore(JobsTable):
    def current_batch(self, job: str, trigger: str) -> EventBatch | None:
        item = self.db.get_item(TableName=self.table, Key=self._key(job, JobsKeys.batch(trigger)), ConsistentRead=True)
        return EventBatch.from_values(job, trigger, from_item(item["Item"])) if "Item" in item else None

    def start_batch(
        self, job: str, trigger: str, *, after: int, run_id: str, now: datetime
    ) -> tuple[EventBatch, EventBatch | None]:
        try:
            replaced = self.db.update_item(
                TableName=self.table,
                ReturnValues="ALL_OLD",
                Key=self._key(job, JobsKeys.batch(trigger)),
                UpdateExpression=(
                    "SET #number = :next, run_id = :run, opened_at = :now, #count = :zero, #state = :open,"
                    " run_sent = :false, expires_at = :expires"
                ),
                ConditionExpression="attribute_not_exists(pk)" if after == 0 else "#number = :after",
                ExpressionAttributeNames={"#number": "number", "#count": "count", "#state": "state"},
                ExpressionAttributeValues=to_values(
                    {
                        ":next": after + 1,
                        ":run": run_id,
                        ":now": instant_text(now),
                        ":zero": 0,
                        ":open": "OPEN",
                        ":false": False,
                        ":expires": int(now.timestamp()) + BATCH_ITEMS_SECONDS,
                        **({":after": after} if after else {}),
                    }
                ),
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            current = self.current_batch(job, trigger)
            if current is None:  # expired since it was read: start again from the first
                return self.start_batch(job, trigger, after=0, run_id=run_id, now=now)
            return current, None
        started = EventBatch(job, trigger, after + 1, run_id, now.replace(microsecond=0))
        old = replaced.get("Attributes")
        return started, EventBatch.from_values(job, trigger, from_item(old)) if old else None

    def add_to_batch(
        self, batch: EventBatch, event: BatchedEvent, *, now: datetime, window: timedelta, max_events: int
    ) -> BatchAdded:
        job, trigger = batch.job, batch.trigger
        expires = int(now.timestamp()) + BATCH_ITEMS_SECONDS
        try:
            self.db.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": self._key(job, JobsKeys.batch(trigger)),
                            # The batch item lives as long as its newest event (all expire together).
                            "UpdateExpression": "ADD #count :one SET expires_at = :expires",
                            "ConditionExpression": (
                                "#number = :number AND #state = :open AND #count < :max AND opened_at >= :oldest"
                            ),
                            "ExpressionAttributeNames": {"#number": "number", "#count": "count", "#state": "state"},
                            "ExpressionAttributeValues": to_values(
                                {
                                    ":one": 1,
                                    ":number": batch.number,
                                    ":open": "OPEN",
                                    ":max": max_events,
                                    ":oldest": instant_text(now - window),
                                    ":expires": expires,
                                }
                            ),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(
                                {
                                    JobsKeys.PK: job,
                                    JobsKeys.SK: batch.event_sort_key(event),
                                    "key": event.key,
                                    "time": instant_text(event.time),
                                    "entry": event.entry,
                                    JobsKeys.TTL: expires,
                                }
                            ),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(
                                {
                                    JobsKeys.PK: job,
                                    JobsKeys.SK: JobsKeys.batched(trigger, event.key),
                                    "number": batch.number,
                                    JobsKeys.TTL: expires,
                                }
                            ),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = [reason.get("Code") for reason in error.response.get("CancellationReasons") or []]
            if len(reasons) == 3 and "ConditionalCheckFailed" in reasons[1:]:
                return BatchAdded("duplicate")
            if reasons[:1] == ["ConditionalCheckFailed"]:
                return BatchAdded("closed")
            raise
        now_stored = self.db.get_item(
            TableName=self.table, Key=self._key(job, JobsKeys.batch(trigger)), ConsistentRead=True
        ).get("Item")
        values = from_item(now_stored) if now_stored else {}
        same = values.get("number") == batch.number
        filled = same and int(values.get("count", 0)) >= max_events
        return BatchAdded("filled" if filled else "added", run_sent=bool(values.get("run_sent")) or not same)

    def mark_batch_sent(self, batch: EventBatch) -> None:
        update_if(
            self.db,
            TableName=self.table,
            Key=self._key(batch.job, JobsKeys.batch(batch.trigger)),
            UpdateExpression="SET run_sent = :true",
            ConditionExpression="#number = :number",
            ExpressionAttributeNames={"#number": "number"},
            ExpressionAttributeValues=to_values({":true": True, ":number": batch.number}),
        )

    def close_batch(self, job: str, trigger: str, number: int) -> list[BatchedEvent]:
        # Closed unless the trigger has moved past this batch already (then nothing can be added to it).
        update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, JobsKeys.batch(trigger)),
            UpdateExpression="SET #state = :closed",
            ConditionExpression="#number = :number",
            ExpressionAttributeNames={"#number": "number", "#state": "state"},
            ExpressionAttributeValues=to_values({":closed": "CLOSED", ":number": number}),
        )
        return self.batch_events(job, trigger, number)

    def batch_events(self, job: str, trigger: str, number: int) -> list[BatchedEvent]:
        return [
            BatchedEvent(key=str(item["key"]), time=parse_instant(str(item["time"])), entry=dict(item["entry"]))
            for item in every_item(
                self.db,
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues=to_values({":pk": job, ":prefix": JobsKeys.batch_events(trigger, number)}),
                ConsistentRead=True,
            )
        ]

    def keep_event(self, job: str, run_id: str, event: dict[str, Any], *, expires_at: datetime) -> None:
        # As JSON text: EventBridge's events are at most 256 KB, within DynamoDB's 400 KB item.
        self.db.put_item(
            TableName=self.table,
            Item=to_item(
                {
                    JobsKeys.PK: job,
                    JobsKeys.SK: f"{JobsKeys.KEPT_EVENT_PREFIX}{run_id}",
                    "event": json.dumps(event, separators=(",", ":")),
                    JobsKeys.TTL: int(expires_at.timestamp()),
                }
            ),
        )

    def kept_event(self, job: str, run_id: str) -> dict[str, Any] | None:
        item = self.db.get_item(
            TableName=self.table, Key=self._key(job, f"{JobsKeys.KEPT_EVENT_PREFIX}{run_id}"), ConsistentRead=True
        ).get("Item")
        return dict(json.loads(from_item(item)["event"])) if item else None
