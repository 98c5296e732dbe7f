"""Specs and their audit trail: create, replace, pause/resume, delete, each in one transaction
with its audit record and the STATE item it implies."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import batch_get, from_item, is_conditional_failure, to_item, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.adapters.items import audit_values, jobs_snapshot
from jobsched.core.names import JobsKeys
from jobsched.core.records import AuditEntry, JobExists, JobsSnapshot, JobState, StoredJob
from jobsched.core.spec import JobSpec

CONSOLE_REQUEST_KEPT = timedelta(days=2)  # CloudTrail delivers within minutes; a day of outage still fits
CONSOLE_CONFIRM_LOOKBACK = 100  # the job's newest entries searched for the request's


class SpecsStore(JobsTable):
    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None:
        response = self.db.get_item(TableName=self.table, Key=self._key(job, JobsKeys.SPEC), ConsistentRead=consistent)
        item = response.get("Item")
        return StoredJob.from_values(from_item(item)) if item else None

    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]:
        """Spec items for up to any number of jobs."""
        # Eventually consistent: the dispatcher compares versions with the due entry and skips a mismatch.
        keys = [self._key(job, JobsKeys.SPEC) for job in jobs]
        stored = (
            StoredJob.from_values(values) for values in batch_get(self.db, self.table, keys, ConsistentRead=False)
        )
        return {job.key: job for job in stored}

    def snapshot(self, jobs: list[str]) -> JobsSnapshot:
        """Specs and STATE items in one BatchGetItem (eventually consistent: see ``JobsSnapshot``)."""
        keys = [self._key(job, sk) for job in dict.fromkeys(jobs) for sk in (JobsKeys.SPEC, JobsKeys.STATE)]
        return jobs_snapshot(batch_get(self.db, self.table, keys, ConsistentRead=False))

    def create(
        self, spec: JobSpec, *, now: datetime, principal: str, next_visit_at: datetime | None, cursor: datetime
    ) -> StoredJob:
        stored = StoredJob(spec, 1, "ACTIVE", now, now, principal)
        try:
            self.db.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": self._spec_item(stored),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {"Put": {"TableName": self.table, "Item": self._state_item(spec.key, 1, cursor, next_visit_at)}},
                    self._audit(spec.key, 1, now, principal, "create", spec),
                ]
            )
        except ClientError as error:
            if is_conditional_failure(error):
                raise JobExists(spec.key) from None
            raise
        return stored

    def replace(
        self,
        current: StoredJob,
        spec: JobSpec,
        *,
        now: datetime,
        principal: str,
        next_visit_at: datetime | None,
        cursor: datetime,
        action: str = "replace",
        reason: str | None = None,
    ) -> StoredJob:
        """New spec at version + 1, conditional on ``current.version``; dispatch restarts at ``cursor``.
        ``action``/``reason``: how the history names the change (a rollback says which version it restored)."""
        stored = current.changed_to(spec, now=now, principal=principal)
        self._transact_versioned(
            current,
            [
                {"Put": self._versioned_put(stored, current.version)},
                {"Update": self._state_update(spec.key, stored, cursor, next_visit_at)},
                self._audit(spec.key, stored.version, now, principal, action, spec, reason),
            ],
        )
        return stored

    def set_state(
        self,
        current: StoredJob,
        state: JobState,
        *,
        now: datetime,
        principal: str,
        reason: str | None,
        next_visit_at: datetime | None,
        cursor: datetime,
    ) -> StoredJob:
        """Pause (leaves the due index) or resume (re-enters it at ``cursor``)."""
        paused = state == "PAUSED"
        stored = current.in_state(state, now=now, principal=principal, reason=reason)
        self._transact_versioned(
            current,
            [
                {"Put": self._versioned_put(stored, current.version)},
                {"Update": self._state_update(current.key, stored, cursor, None if paused else next_visit_at)},
                self._audit(
                    current.key,
                    stored.version,
                    now,
                    principal,
                    "pause" if paused else "resume",
                    None,  # the spec did not change
                    reason,
                ),
            ],
        )
        return stored

    def delete(self, current: StoredJob, *, now: datetime, principal: str) -> None:
        self._transact_versioned(
            current,
            [
                {
                    "Delete": {
                        "TableName": self.table,
                        "Key": self._key(current.key, JobsKeys.SPEC),
                        "ConditionExpression": "version = :v",
                        "ExpressionAttributeValues": to_values({":v": current.version}),
                    }
                },
                {"Delete": {"TableName": self.table, "Key": self._key(current.key, JobsKeys.STATE)}},
                self._audit(current.key, current.version + 1, now, principal, "delete", None),
            ],
        )

    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]:
        """Job keys of ``team`` in name order, ``limit`` at a time; the second value continues the listing."""
        request = self._team_query(team) | {"Limit": limit}
        if after_name:
            job = f"{team}/{after_name}"
            request["ExclusiveStartKey"] = to_item(
                {JobsKeys.TEAM: team, JobsKeys.NAME: after_name, JobsKeys.PK: job, JobsKeys.SK: JobsKeys.SPEC}
            )
        response = self.db.query(**request)
        keys = [from_item(item)[JobsKeys.PK] for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return keys, (from_item(last)[JobsKeys.NAME] if last else None)

    def record_action(
        self,
        job: str,
        *,
        version: int,
        now: datetime,
        principal: str,
        action: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """An action on the job that changes no spec (trigger, cancel, rerun, backfill), for its history."""
        values = audit_values(job, version, now, principal, action, None, reason=reason, details=details)
        self.db.put_item(TableName=self.table, Item=to_item(values))

    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        """The job's history, newest first, a page of ``limit``; the token continues after the page."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": to_values({":pk": job, ":prefix": JobsKeys.AUDIT_PREFIX}),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if before:
            request["ExclusiveStartKey"] = self._key(job, before)
        response = self.db.query(**request)
        entries = [AuditEntry.from_values(from_item(item)) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return entries, (from_item(last)[JobsKeys.SK] if last else None)

    def remember_console_request(self, request_id: str, job: str, *, now: datetime) -> None:
        """The job a console request acts on, for ``confirm_console_request`` (written before the action)."""
        self.db.put_item(
            TableName=self.table,
            Item=to_item(
                {
                    JobsKeys.PK: JobsKeys.CONSOLE_PREFIX + request_id,
                    JobsKeys.SK: JobsKeys.CONSOLE_REQUEST,
                    "job": job,
                    JobsKeys.TTL: int((now + CONSOLE_REQUEST_KEPT).timestamp()),
                }
            ),
        )

    def confirm_console_request(self, request_id: str, principal: str, person: str) -> str | None:
        """Name ``person`` on the audit entries ``principal`` (that request's console principal) wrote; returns
        the job, or None when the request wrote no entry. Once: an entry already confirmed keeps its name."""
        marker = self.db.get_item(
            TableName=self.table,
            Key=self._key(JobsKeys.CONSOLE_PREFIX + request_id, JobsKeys.CONSOLE_REQUEST),
            ConsistentRead=True,
        ).get("Item")
        if marker is None:
            return None
        job = str(from_item(marker)["job"])
        recent, _ = self.history(job, limit=CONSOLE_CONFIRM_LOOKBACK)
        written = [entry for entry in recent if entry.principal == principal]
        for entry in written:
            try:
                self.db.update_item(
                    TableName=self.table,
                    Key=self._key(job, entry.sort_key),
                    UpdateExpression="SET confirmed_by = :person",
                    ConditionExpression="attribute_exists(pk) AND attribute_not_exists(confirmed_by)",
                    ExpressionAttributeValues=to_values({":person": person}),
                )
            except ClientError as error:
                if not is_conditional_failure(error):
                    raise
        return job if written else None

    def audit_trail(self, job: str) -> list[dict[str, Any]]:
        response = self.db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=to_values({":pk": job, ":prefix": JobsKeys.AUDIT_PREFIX}),
        )
        return [from_item(item) for item in response.get("Items", [])]

    def count_team_jobs(self, team: str, *, at_least: int) -> int:
        """How many jobs the team has, counting no further than ``at_least`` (the API checks a limit)."""
        counted, start = 0, None
        while counted < at_least:
            request = self._team_query(team) | {"Select": "COUNT"}
            if start:
                request["ExclusiveStartKey"] = start
            response = self.db.query(**request)
            counted += int(response.get("Count", 0))
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        return counted
