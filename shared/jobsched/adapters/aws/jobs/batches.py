"""Batched triggers' batches in the Jobs table (the protocol: ``jobsched.ports.EventBatchesPort``).

One item per trigger holds its current batch (number, run, opened, count, state). An event is added by a saga of
single-item conditional writes (#51: a table with multi-Region strong consistency has no transactions):
1. its once-only marker, reserved (a marker already added: a redelivery, nothing written);
2. its item in the batch, pending;
3. the batch's count, conditional on the batch being the one read, open, not full and inside its window (else the
   item is bounced and the event goes to the next batch);
4. its item counted, conditional on still pending: a close bounces the pending items it finds, so an event is in
   the batch's list exactly when this write wins;
5. its marker added.
A crash after any step leaves a reserved marker that the event's redelivery takes over and completes. A count
taken by a delivery that died (or bounced) is not given back: the batch may fill up to that many events early,
never holding an event twice or losing one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import every_item, from_item, is_conditional_failure, to_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.event_batches import BatchAdded, BatchedEvent, EventBatch
from jobsched.core.names import JobsKeys
from jobsched.core.runs import instant_text, parse_instant

BATCH_ITEMS_SECONDS = 14 * 86400  # a batch's items outlive its run's retries
EVENT_STATE = "event_state"  # of an event's item in a batch and of its marker
PENDING, COUNTED, BOUNCED = "pending", "counted", "bounced"


class BatchesStore(JobsTable):
    after_batch_step: Callable[[str], None] | None = None  # tests stop an add between two of its writes

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
        if not self._reserve(batch, event, expires):
            return BatchAdded("duplicate")
        self._batch_step("reserved")
        event_key = self._key(job, batch.event_sort_key(event))
        try:
            self.db.put_item(
                TableName=self.table,
                Item=to_item(
                    {
                        JobsKeys.PK: job,
                        JobsKeys.SK: batch.event_sort_key(event),
                        "key": event.key,
                        "time": instant_text(event.time),
                        "entry": event.entry,
                        EVENT_STATE: PENDING,
                        JobsKeys.TTL: expires,
                    }
                ),
                ConditionExpression="attribute_not_exists(pk) OR #s = :pending",
                ExpressionAttributeNames={"#s": EVENT_STATE},
                ExpressionAttributeValues=to_values({":pending": PENDING}),
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            # An earlier delivery of this event got that far: counted in this batch, or bounced by its close.
            return self._already(job, trigger, event.key, event_key)
        self._batch_step("event")
        counted = update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, JobsKeys.batch(trigger)),
            UpdateExpression="ADD #count :one SET expires_at = :expires",  # the batch lives as long as its newest event
            ConditionExpression="#number = :number AND #state = :open AND #count < :max AND opened_at >= :oldest",
            ExpressionAttributeNames={"#number": "number", "#count": "count", "#state": "state"},
            ExpressionAttributeValues=to_values(
                {
                    ":one": 1,
                    ":number": batch.number,
                    ":open": "OPEN",
                    ":max": max_events,
                    ":oldest": instant_text(now - window),
                    ":expires": expires,
                }
            ),
        )
        if not counted:  # closed, full or past its window: the event goes to the next batch
            self._set_event_state(event_key, BOUNCED)
            return BatchAdded("closed")
        self._batch_step("counted")
        if not self._set_event_state(event_key, COUNTED):
            # The batch's close bounced it first (the next batch takes it), or a concurrent delivery counted it.
            return self._already(job, trigger, event.key, event_key)
        self._batch_step("in batch")
        self._mark_added(job, trigger, event.key)
        now_stored = self.db.get_item(
            TableName=self.table, Key=self._key(job, JobsKeys.batch(trigger)), ConsistentRead=True
        ).get("Item")
        values = from_item(now_stored) if now_stored else {}
        same = values.get("number") == batch.number
        filled = same and int(values.get("count", 0)) >= max_events
        return BatchAdded("filled" if filled else "added", run_sent=bool(values.get("run_sent")) or not same)

    def _reserve(self, batch: EventBatch, event: BatchedEvent, expires: int) -> bool:
        """The event's once-only marker, reserved for ``batch``; False when the event is in a batch already (a
        redelivery). A marker a delivery that died left reserved is taken over: if that delivery's event made it
        into its batch, this is a redelivery; else its item there is bounced and the event comes here."""
        job, trigger, key = batch.job, batch.trigger, event.key
        marker_key = self._key(job, JobsKeys.batched(trigger, key))
        try:
            self.db.put_item(
                TableName=self.table,
                Item=to_item(
                    {
                        JobsKeys.PK: job,
                        JobsKeys.SK: JobsKeys.batched(trigger, key),
                        EVENT_STATE: PENDING,
                        "number": batch.number,
                        JobsKeys.TTL: expires,
                    }
                ),
                ConditionExpression="attribute_not_exists(pk)",
            )
            return True
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
        found = self.db.get_item(TableName=self.table, Key=marker_key, ConsistentRead=True).get("Item")
        marker = from_item(found) if found else {}
        # A marker of the layout before #51 (no state) was written with its event, in one transaction.
        if marker.get(EVENT_STATE) != PENDING:
            return False
        earlier = int(marker.get("number", batch.number))
        if earlier != batch.number:
            earlier_batch = replace(batch, number=earlier)
            event_key = self._key(job, earlier_batch.event_sort_key(event))
            item = self.db.get_item(TableName=self.table, Key=event_key, ConsistentRead=True).get("Item")
            state = from_item(item).get(EVENT_STATE) if item else None
            if state == COUNTED or (state == PENDING and not self._set_event_state(event_key, BOUNCED)):
                self._mark_added(job, trigger, key)
                return False
            self.db.update_item(
                TableName=self.table,
                Key=marker_key,
                UpdateExpression="SET #number = :number",
                ExpressionAttributeNames={"#number": "number"},
                ExpressionAttributeValues=to_values({":number": batch.number}),
            )
        return True

    def _already(self, job: str, trigger: str, key: str, event_key: dict[str, Any]) -> BatchAdded:
        item = self.db.get_item(TableName=self.table, Key=event_key, ConsistentRead=True).get("Item")
        if item is not None and from_item(item).get(EVENT_STATE) == BOUNCED:
            return BatchAdded("closed")
        self._mark_added(job, trigger, key)
        return BatchAdded("duplicate")

    def _mark_added(self, job: str, trigger: str, key: str) -> None:
        self.db.update_item(
            TableName=self.table,
            Key=self._key(job, JobsKeys.batched(trigger, key)),
            UpdateExpression="SET #s = :added",
            ExpressionAttributeNames={"#s": EVENT_STATE},
            ExpressionAttributeValues=to_values({":added": COUNTED}),
        )

    def _set_event_state(self, event_key: dict[str, Any], state: str) -> bool:
        """An event item's state moved from pending to ``state``; False when it had left pending already."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=event_key,
            UpdateExpression="SET #s = :state",
            ConditionExpression="#s = :pending",
            ExpressionAttributeNames={"#s": EVENT_STATE},
            ExpressionAttributeValues=to_values({":state": state, ":pending": PENDING}),
        )

    def _batch_step(self, name: str) -> None:
        if self.after_batch_step is not None:
            self.after_batch_step(name)

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
        # An event still being added (counted or not yet) is decided now: bounced to the next batch, unless its
        # count made it in first. After this the batch's list cannot change.
        for item in self._event_items(job, trigger, number):
            if item.get(EVENT_STATE) == PENDING:
                self._set_event_state(self._key(job, str(item[JobsKeys.SK])), BOUNCED)
        return self.batch_events(job, trigger, number)

    def batch_events(self, job: str, trigger: str, number: int) -> list[BatchedEvent]:
        return [
            BatchedEvent(key=str(item["key"]), time=parse_instant(str(item["time"])), entry=dict(item["entry"]))
            for item in self._event_items(job, trigger, number)
            # Items of the layout before #51 have no state: their transaction counted them.
            if item.get(EVENT_STATE, COUNTED) == COUNTED
        ]

    def _event_items(self, job: str, trigger: str, number: int) -> list[dict[str, Any]]:
        return list(
            every_item(
                self.db,
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues=to_values({":pk": job, ":prefix": JobsKeys.batch_events(trigger, number)}),
                ConsistentRead=True,
            )
        )

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
