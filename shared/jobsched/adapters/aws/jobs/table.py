"""The Jobs table as every aggregate's store sees it: its name, the client, item keys, the
spec, state and audit items, and versioned transactions (a conditional failure becomes VersionConflict)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.dynamo import is_conditional_failure, to_item, to_values
from jobsched.adapters.items import audit_values, job_state_values
from jobsched.core.limits import TeamLimits
from jobsched.core.names import JobsKeys
from jobsched.core.records import StoredJob, VersionConflict, due_shard
from jobsched.core.runs import instant_text
from jobsched.core.spec import JobSpec
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

    def _spec_item(self, stored: StoredJob) -> dict[str, Any]:
        return to_item(stored.to_values())

    def _versioned_put(self, stored: StoredJob, expected_version: int) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Item": self._spec_item(stored),
            "ConditionExpression": "version = :v",
            "ExpressionAttributeValues": to_values({":v": expected_version}),
        }

    @staticmethod
    def _state_item(job: str, version: int, cursor: datetime, next_visit_at: datetime | None) -> dict[str, Any]:
        return to_item(job_state_values(job, version, cursor, next_visit_at))

    def _state_update(
        self, job: str, stored: StoredJob, cursor: datetime, next_visit_at: datetime | None
    ) -> dict[str, Any]:
        """Keep the slots (runs in flight) while the cursor, version and due entry change. The audit restarts
        at the new cursor: instants of the old version or of a pause are not the dispatcher's to account for."""
        values: dict[str, Any] = {":cursor": instant_text(cursor), ":v": stored.version, ":empty": {}}
        update = "SET #cursor = :cursor, audited_to = :cursor, spec_version = :v, slots = if_not_exists(slots, :empty)"
        if next_visit_at is None:
            update += " REMOVE due_shard, next_fire_at"
        else:
            update += ", due_shard = :shard, next_fire_at = :next"
            values |= {":shard": due_shard(job), ":next": instant_text(next_visit_at)}
        return {
            "TableName": self.table,
            "Key": self._key(job, JobsKeys.STATE),
            "UpdateExpression": update,
            "ExpressionAttributeNames": {"#cursor": "cursor"},
            "ExpressionAttributeValues": to_values(values),
        }

    def _audit(
        self,
        job: str,
        version: int,
        now: datetime,
        principal: str,
        action: str,
        spec: JobSpec | None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """The audit item of a change, written in the change's transaction; ``spec``: the one it stored."""
        return {
            "Put": {
                "TableName": self.table,
                "Item": to_item(audit_values(job, version, now, principal, action, spec, reason=reason)),
            }
        }

    def _transact_versioned(self, current: StoredJob, items: list[dict[str, Any]]) -> None:
        try:
            self.db.transact_write_items(TransactItems=items)
        except ClientError as error:
            if is_conditional_failure(error):
                raise VersionConflict(f"{current.key} is no longer at version {current.version}") from None
            raise
