"""Retention of the hot tables without TTL (``ports.ExpiredItemsPort``): a Scan page at a time, filtered to items
whose ``expires_at`` has passed and projected to their keys, each deleted by a DeleteItem conditional on its expiry
still being past (an item rewritten meanwhile with a later expiry stays). Where a pass has got to is kept on the
Jobs table (pk ``SWEEP``, sk the table's logical name), so a pass goes on across invocations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.dynamo import from_item, is_conditional_failure, to_item, to_values
from jobsched.adapters.items import sweep_state_of, sweep_state_values
from jobsched.core.names import JOBS_TABLE, RUNS_TABLE, SWEEP, JobsKeys, TableDefinition
from jobsched.ports import ExpiredPage, SweepState


class ExpiredItems:
    def __init__(self, jobs_table: str, runs_table: str, dynamodb: Any | None = None) -> None:
        self._client = dynamodb
        self._tables: dict[str, tuple[str, TableDefinition]] = {
            JOBS_TABLE.logical_name: (jobs_table, JOBS_TABLE),
            RUNS_TABLE.logical_name: (runs_table, RUNS_TABLE),
        }
        self._jobs_table = jobs_table

    @property
    def db(self) -> Any:
        return self._client or client("dynamodb")

    def tables(self) -> tuple[str, ...]:
        return tuple(self._tables)

    def expired_page(self, table: str, *, cursor: str | None, now: datetime, limit: int) -> ExpiredPage:
        name, definition = self._tables[table]
        keys = [definition.partition_key[0], definition.sort_key[0]]
        request: dict[str, Any] = {
            "TableName": name,
            "Limit": limit,
            "FilterExpression": "#expires < :now",
            "ProjectionExpression": "#k0, #k1",
            "ExpressionAttributeNames": {"#expires": JobsKeys.TTL, "#k0": keys[0], "#k1": keys[1]},
            "ExpressionAttributeValues": to_values({":now": int(now.timestamp())}),
        }
        if cursor:
            request["ExclusiveStartKey"] = to_item(json.loads(cursor))
        page = self.db.scan(**request)
        last = page.get("LastEvaluatedKey")
        return ExpiredPage(
            keys=[from_item(item) for item in page.get("Items", [])],
            scanned=int(page.get("ScannedCount", 0)),
            cursor=json.dumps(from_item(last), sort_keys=True, default=str) if last else None,
        )

    def delete_expired(self, table: str, keys: Sequence[dict[str, Any]], *, now: datetime) -> int:
        name, _ = self._tables[table]
        deleted = 0
        for key in keys:
            try:
                self.db.delete_item(
                    TableName=name,
                    Key=to_item(key),
                    ConditionExpression="#expires < :now",
                    ExpressionAttributeNames={"#expires": JobsKeys.TTL},
                    ExpressionAttributeValues=to_values({":now": int(now.timestamp())}),
                )
                deleted += 1
            except ClientError as error:
                if not is_conditional_failure(error):
                    raise
        return deleted

    def sweep_state(self, table: str) -> SweepState:
        item = self.db.get_item(
            TableName=self._jobs_table, Key=to_item({JobsKeys.PK: SWEEP, JobsKeys.SK: table}), ConsistentRead=True
        ).get("Item")
        return sweep_state_of(from_item(item) if item else {})

    def save_sweep_state(self, table: str, state: SweepState) -> None:
        self.db.put_item(TableName=self._jobs_table, Item=to_item(sweep_state_values(table, state)))
