"""Dispatch state (the STATE item): the due index, the cursor and the audit mark, moved only
conditionally on the cursor read (a fenced cursor move)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import batch_get, every_item, from_item, is_missing_map, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.adapters.items import due_entry, wheel_marks_of
from jobsched.core.names import JobsKeys
from jobsched.core.records import DispatchState, DueEntry, due_shard
from jobsched.core.runs import instant_text, parse_instant


class DispatchStateStore(JobsTable):
    def due(self, shard: int, until: datetime) -> Iterator[DueEntry]:
        """Jobs on ``shard`` whose next instant is at or before ``until`` (sparse index: nothing else)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": JobsKeys.DUE_INDEX,
            "KeyConditionExpression": "due_shard = :shard AND next_fire_at <= :until",
            "ExpressionAttributeValues": to_values({":shard": shard, ":until": instant_text(until)}),
        }
        # A listing while the tables move may list an item twice (adapters.aws.moves: the previous table's copy, then
        # the global table's): the later is the newer, and a job sent twice would be sent twice.
        latest: dict[tuple[str, str], dict[str, Any]] = {}
        for values in every_item(self.db, **request):
            latest.pop((values["pk"], values["sk"]), None)
            latest[(values["pk"], values["sk"])] = values
        for values in latest.values():
            if entry := due_entry(values):
                yield entry

    def get_state(self, job: str) -> DispatchState | None:
        response = self.db.get_item(TableName=self.table, Key=self._key(job, JobsKeys.STATE), ConsistentRead=True)
        item = response.get("Item")
        return DispatchState.from_values(from_item(item)) if item else None

    def audit_marks(self, jobs: list[str]) -> dict[str, datetime]:
        """Each job's ``audited_to`` (absent for jobs written before the audit existed), from its STATE item."""
        keys = [self._key(job, JobsKeys.STATE) for job in jobs]
        states = batch_get(self.db, self.table, keys, ProjectionExpression="pk, audited_to", ConsistentRead=False)
        return {values["pk"]: parse_instant(values["audited_to"]) for values in states if "audited_to" in values}

    def advance(
        self,
        job: str,
        *,
        spec_version: int,
        old_cursor: datetime,
        cursor: datetime,
        next_visit_at: datetime | None,
        audited_to: datetime | None = None,
        wheel_slot: str | None = None,
    ) -> bool:
        """Move the cursor (forward; back only when queued messages were lost, see ``recovery``) and the
        audit mark, and put the job where its next visit is found: the wheel (``wheel_slot``; an unchanged slot
        writes no index entry) or the due index; False if another dispatcher (or a spec change) got there first."""
        values: dict[str, Any] = {
            ":old": instant_text(old_cursor),
            ":v": spec_version,
            ":cursor": instant_text(cursor),
        }
        sets = "SET #cursor = :cursor"
        if audited_to is not None:
            sets += ", audited_to = :audited"
            values[":audited"] = instant_text(audited_to)
        if next_visit_at is None:
            update = sets + " REMOVE due_shard, next_fire_at, wheel_slot"
        elif wheel_slot is not None:
            update = sets + ", next_fire_at = :next, wheel_slot = :slot REMOVE due_shard"
            values |= {":next": instant_text(next_visit_at), ":slot": wheel_slot}
        else:
            update = sets + ", next_fire_at = :next, due_shard = :shard REMOVE wheel_slot"
            values |= {":next": instant_text(next_visit_at), ":shard": due_shard(job)}
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, JobsKeys.STATE),
            UpdateExpression=update,
            ConditionExpression=(
                "#cursor = :old AND spec_version = :v AND (attribute_exists(due_shard) OR attribute_exists(wheel_slot))"
            ),
            ExpressionAttributeNames={"#cursor": "cursor"},
            ExpressionAttributeValues=to_values(values),
        )

    def wheel(self, slot: str) -> list[str]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": JobsKeys.WHEEL_INDEX,
            "KeyConditionExpression": "wheel_slot = :slot",
            "ExpressionAttributeValues": to_values({":slot": slot}),
        }
        return sorted({str(values[JobsKeys.PK]) for values in every_item(self.db, **request)})

    def due_states(self, jobs: list[str]) -> list[DueEntry]:
        keys = [self._key(job, JobsKeys.STATE) for job in jobs]
        return [
            entry
            for values in batch_get(self.db, self.table, keys, ConsistentRead=False)
            if (entry := due_entry(values, whole_item=True))
        ]

    def wheel_marks(self) -> dict[int, datetime]:
        response = self.db.get_item(
            TableName=self.table, Key=self._key(JobsKeys.DISPATCH, JobsKeys.WHEEL_MARKS), ConsistentRead=True
        )
        return wheel_marks_of(from_item(response.get("Item") or {}))

    def mark_wheel(self, marks: dict[int, datetime], read: dict[int, datetime]) -> bool:
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        sets, conditions = [], []
        for index, (shard, mark) in enumerate(sorted(marks.items())):
            names[f"#s{index}"] = str(shard)
            values[f":m{index}"] = instant_text(mark)
            sets.append(f"marks.#s{index} = :m{index}")
            if shard in read:
                values[f":r{index}"] = instant_text(read[shard])
                conditions.append(f"marks.#s{index} = :r{index}")
            else:
                conditions.append(f"attribute_not_exists(marks.#s{index})")
        if not sets:
            return True
        request: dict[str, Any] = {
            "TableName": self.table,
            "Key": self._key(JobsKeys.DISPATCH, JobsKeys.WHEEL_MARKS),
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_values(values),
        }
        try:
            return update_if(self.db, **request)
        except ClientError as error:
            if not is_missing_map(error):
                raise
        self._ensure_map(JobsKeys.DISPATCH, JobsKeys.WHEEL_MARKS, "marks")  # a deployment's first mark
        return update_if(self.db, **request)
