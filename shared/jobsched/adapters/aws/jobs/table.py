"""The Jobs table as every aggregate's store sees it: its name, the client, item keys and the STATE item a spec
change writes (``jobs.specs``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.dynamo import to_item, to_values, update_if
from jobsched.core.limits import TeamLimits
from jobsched.core.names import JobsKeys
from jobsched.core.records import due_shard
from jobsched.core.runs import instant_text
from jobsched.tenancy.quotas import CachedLimits


class JobsTable:
    table: str
    _client: Any
    team_defaults: TeamLimits
    _limits: CachedLimits

    @property
    def db(self) -> Any:
        return self._client or client("dynamodb")

    def _team_query(self, team: str) -> dict[str, Any]:
        """A Query of the team index for ``team``'s jobs."""
        return {
            "TableName": self.table,
            "IndexName": JobsKeys.TEAM_INDEX,
            "KeyConditionExpression": "#team = :team",
            "ExpressionAttributeNames": {"#team": JobsKeys.TEAM},
            "ExpressionAttributeValues": to_values({":team": team}),
        }

    @staticmethod
    def _key(pk: str, sk: str) -> dict[str, Any]:
        return to_item({JobsKeys.PK: pk, JobsKeys.SK: sk})

    def _ensure_map(self, pk: str, sk: str, name: str) -> None:
        """The item has the map ``name`` (empty if it had none), so an update can set one of its entries."""
        update_if(
            self.db,
            TableName=self.table,
            Key=self._key(pk, sk),
            UpdateExpression=f"SET {name} = :empty",
            ConditionExpression=f"attribute_not_exists({name})",
            ExpressionAttributeValues=to_values({":empty": {}}),
        )

    def _state_update(self, job: str, version: int, cursor: datetime, next_visit_at: datetime | None) -> dict[str, Any]:
        """Keep the slots (runs in flight) while the cursor, version and due entry change. The audit restarts
        at the new cursor: instants of the old version or of a pause are not the dispatcher's to account for."""
        values: dict[str, Any] = {":cursor": instant_text(cursor), ":v": version, ":empty": {}}
        update = "SET #cursor = :cursor, audited_to = :cursor, spec_version = :v, slots = if_not_exists(slots, :empty)"
        if next_visit_at is None:
            update += " REMOVE due_shard, next_fire_at, wheel_slot"
        else:  # back on the due index: a change or a resume is visited there first
            update += ", due_shard = :shard, next_fire_at = :next REMOVE wheel_slot"
            values |= {":shard": due_shard(job), ":next": instant_text(next_visit_at)}
        return {
            "TableName": self.table,
            "Key": self._key(job, JobsKeys.STATE),
            "UpdateExpression": update,
            "ExpressionAttributeNames": {"#cursor": "cursor"},
            "ExpressionAttributeValues": to_values(values),
        }
