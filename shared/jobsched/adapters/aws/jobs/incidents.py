"""Incidents with their outbox of unsent pages, and the per-job marks of open incident classes."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import every_item, from_item, is_conditional_failure, to_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import JobsKeys
from jobsched.core.records import StoredIncident, VersionConflict


class IncidentsStore(JobsTable):
    def get_incident(self, subject: str, incident_class: str) -> StoredIncident | None:
        response = self.db.get_item(
            TableName=self.table,
            Key=self._key(subject, JobsKeys.INCIDENT_PREFIX + incident_class),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return StoredIncident.from_values(from_item(item)) if item else None

    def put_incident(self, incident: StoredIncident, *, expected_version: int) -> StoredIncident:
        """Store at ``expected_version + 1``; VersionConflict if another writer got there first."""
        stored = StoredIncident(incident.values, expected_version + 1, incident.unsent, incident.resolved)
        values = stored.to_values()
        condition = "attribute_not_exists(pk)" if expected_version == 0 else "version = :v"
        request: dict[str, Any] = {
            "TableName": self.table,
            "Item": to_item(values),
            "ConditionExpression": condition,
        }
        if expected_version:
            request["ExpressionAttributeValues"] = to_values({":v": expected_version})
        try:
            self.db.put_item(**request)
        except ClientError as error:
            if is_conditional_failure(error):
                raise VersionConflict(f"incident {stored.values['subject']} changed meanwhile") from None
            raise
        return stored

    def clear_incident_outbox(self, incident: StoredIncident) -> None:
        """After its pages went out: a resolved incident goes, an open one keeps no unsent pages."""
        key = self._key(incident.values["subject"], JobsKeys.INCIDENT_PREFIX + incident.values["incident_class"])
        condition = {
            "ConditionExpression": "version = :v",
            "ExpressionAttributeValues": to_values({":v": incident.version}),
        }
        try:
            if incident.resolved:
                self.db.delete_item(TableName=self.table, Key=key, **condition)
            else:
                self.db.update_item(TableName=self.table, Key=key, UpdateExpression="REMOVE unsent", **condition)
        except ClientError as error:
            if not is_conditional_failure(error):
                raise  # changed meanwhile: the next writer sends or keeps what is unsent

    def incidents(self, subject: str) -> list[StoredIncident]:
        response = self.db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=to_values({":pk": subject, ":prefix": JobsKeys.INCIDENT_PREFIX}),
            ConsistentRead=True,
        )
        return [StoredIncident.from_values(from_item(item)) for item in response.get("Items", [])]

    def drop_incidents(self, subject: str) -> None:
        """A deleted job's open incidents go with it (a job registered again under the name starts clean)."""
        for incident in self.incidents(subject):
            key = self._key(subject, JobsKeys.INCIDENT_PREFIX + incident.values["incident_class"])
            self.db.delete_item(TableName=self.table, Key=key)

    def mark_incident(self, job: str, incident_class: str, *, is_open: bool) -> None:
        """Flag an open incident on the job's STATE item, which the worker reads to know a success resolves
        something (so successes of healthy jobs send no event)."""
        update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, JobsKeys.STATE),
            UpdateExpression=f"{'ADD' if is_open else 'DELETE'} #incidents :class",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#incidents": JobsKeys.INCIDENTS},
            ExpressionAttributeValues={":class": {"SS": [incident_class]}},
        )

    def open_incidents(self, job: str) -> set[str]:
        response = self.db.get_item(
            TableName=self.table,
            Key=self._key(job, JobsKeys.STATE),
            ProjectionExpression="#incidents",
            ExpressionAttributeNames={"#incidents": JobsKeys.INCIDENTS},
            ConsistentRead=False,
        )
        return set(from_item(response.get("Item") or {}).get(JobsKeys.INCIDENTS) or ())

    def open_incident_list(self, *, limit: int = 200) -> list[StoredIncident]:
        """Every open incident across teams, oldest first (the sparse index: resolved ones are not on it)."""
        found = every_item(
            self.db,
            max_items=limit,
            TableName=self.table,
            IndexName=JobsKeys.OPEN_INCIDENTS_INDEX,
            KeyConditionExpression="#open = :open",
            ExpressionAttributeNames={"#open": JobsKeys.OPEN_INCIDENT},
            ExpressionAttributeValues=to_values({":open": "OPEN"}),
        )
        return [StoredIncident(json.loads(values["incident"]), int(values["version"])) for values in found]
