"""Specs and their audit trail: create, replace, pause/resume, delete, each a saga of single-item conditional writes
(#51: a table with multi-Region strong consistency has no transactions).

A change commits with one conditional write of the SPEC item (its version: one writer wins), which also records
what is left to do (``PendingChange``: the STATE item it implies, its audit entry) and puts the SPEC item on the
due index a minute ahead. Then, each idempotent and conditional so that no older change undoes a newer one:
1. the STATE item (cursor, spec version, due entry; a delete removes it),
2. the audit entry (its key fixed in the pending change),
3. the SPEC item's pending change removed (a delete removes the item, a tombstone until then).
A crash after the commit leaves the change pending on the SPEC item: the next change of the job finishes it first,
and the dispatcher, reading it from the due index after a minute, finishes it (``settle_change``). Until then a
deleted job reads as absent, and the dispatcher skips a job whose STATE lags its spec's version, as it always did
while a change was being written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import (
    batch_get,
    from_item,
    is_conditional_failure,
    to_item,
    to_values,
    update_if,
)
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.adapters.items import audit_spec_text, audit_values, first_version, jobs_snapshot
from jobsched.core.names import JobsKeys
from jobsched.core.records import AuditEntry, JobExists, JobsSnapshot, JobState, StoredJob, VersionConflict, due_shard
from jobsched.core.runs import instant_text, parse_instant
from jobsched.core.spec import JobSpec

CONSOLE_REQUEST_KEPT = timedelta(days=2)  # CloudTrail delivers within minutes; a day of outage still fits
CONSOLE_CONFIRM_LOOKBACK = 100  # the job's newest entries searched for the request's
CHANGE_GRACE = timedelta(minutes=1)  # a change left pending longer is the dispatcher's to finish
PENDING = "pending_change"  # the SPEC item's attribute holding its unfinished change
DELETING = "deleting"  # a SPEC item whose delete is under way: the job reads as absent


@dataclass(frozen=True)
class PendingChange:
    """What a committed change of a job's spec still has to write (see the module's docstring)."""

    version: int  # the spec version the change made (a delete: the version its audit entry has)
    cursor: datetime
    next_visit_at: datetime | None  # None: off the due index (paused, nothing left to fire, deleted)
    audit: dict[str, Any]
    delete: bool = False

    def to_text(self) -> str:
        """Without the audit entry's copy of the spec: the SPEC item holds it (a spec of 256 KB twice in one item
        would pass DynamoDB's 400 KB), and ``from_text`` puts it back."""
        return json.dumps(
            {
                "version": self.version,
                "cursor": instant_text(self.cursor),
                "next_visit_at": instant_text(self.next_visit_at) if self.next_visit_at else None,
                "audit": {key: value for key, value in self.audit.items() if key != "spec"},
                "audit_spec": "spec" in self.audit,
                "delete": self.delete,
            },
            sort_keys=True,
        )

    @classmethod
    def from_text(cls, text: str, spec_item: dict[str, Any]) -> PendingChange:
        """The change as ``to_text`` wrote it on ``spec_item`` (the SPEC item), its audit entry whole again."""
        values = json.loads(text)
        visit = values["next_visit_at"]
        audit = dict(values["audit"])
        if values.get("audit_spec"):
            audit["spec"] = audit_spec_text(StoredJob.from_values(spec_item).spec)
        return cls(
            int(values["version"]),
            parse_instant(values["cursor"]),
            parse_instant(visit) if visit else None,
            audit,
            bool(values["delete"]),
        )


def live(values: dict[str, Any]) -> StoredJob | None:
    """A SPEC item as the job it holds; None for a job being deleted."""
    return None if values.get(DELETING) else StoredJob.from_values(values)


class SpecsStore(JobsTable):
    after_change_step: Callable[[str], None] | None = None  # tests stop a change between two of its writes

    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None:
        values = self._spec_values(job, consistent=consistent)
        return live(values) if values else None

    def _spec_values(self, job: str, *, consistent: bool = True) -> dict[str, Any]:
        """The job's SPEC item as stored, pending change and tombstone included ({}: none)."""
        response = self.db.get_item(TableName=self.table, Key=self._key(job, JobsKeys.SPEC), ConsistentRead=consistent)
        item = response.get("Item")
        return from_item(item) if item else {}

    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]:
        """Spec items for up to any number of jobs."""
        # Eventually consistent: the dispatcher compares versions with the due entry and skips a mismatch.
        keys = [self._key(job, JobsKeys.SPEC) for job in jobs]
        found = (live(values) for values in batch_get(self.db, self.table, keys, ConsistentRead=False))
        return {stored.key: stored for stored in found if stored is not None}

    def snapshot(self, jobs: list[str], *, specs: bool = True) -> JobsSnapshot:
        """STATE items, and SPEC items unless ``specs`` is False, in one BatchGetItem (eventually consistent: see
        ``JobsSnapshot``)."""
        kinds = (JobsKeys.SPEC, JobsKeys.STATE) if specs else (JobsKeys.STATE,)
        keys = [self._key(job, sk) for job in dict.fromkeys(jobs) for sk in kinds]
        items = batch_get(self.db, self.table, keys, ConsistentRead=False)
        return jobs_snapshot(values for values in items if not values.get(DELETING))

    def create(
        self, spec: JobSpec, *, now: datetime, principal: str, next_visit_at: datetime | None, cursor: datetime
    ) -> StoredJob:
        for _ in range(2):  # a second time after finishing the delete of an earlier job of that name
            version = first_version(self._latest_entry(spec.key))
            stored = StoredJob(spec, version, "ACTIVE", now, now, principal)
            audit = audit_values(spec.key, version, now, principal, "create", spec)
            change = PendingChange(version, cursor, next_visit_at, audit)
            try:
                self.db.put_item(
                    TableName=self.table,
                    Item=self._committed(stored.to_values(), change, now),
                    ConditionExpression="attribute_not_exists(pk)",
                )
                break
            except ClientError as error:
                if not is_conditional_failure(error):
                    raise
                taken = self._spec_values(spec.key)
                if not taken.get(DELETING) or not self._settle_pending(spec.key, taken):
                    raise JobExists(spec.key) from None
        else:
            raise JobExists(spec.key)
        self._change_step("commit")
        self._settle(spec.key, change)
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
        audit = audit_values(spec.key, stored.version, now, principal, action, spec, reason=reason)
        self._change(current, stored.to_values(), PendingChange(stored.version, cursor, next_visit_at, audit), now)
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
        action = "pause" if paused else "resume"  # the spec did not change
        audit = audit_values(current.key, stored.version, now, principal, action, None, reason=reason)
        visit = None if paused else next_visit_at
        self._change(current, stored.to_values(), PendingChange(stored.version, cursor, visit, audit), now)
        return stored

    def delete(self, current: StoredJob, *, now: datetime, principal: str) -> None:
        version = current.version + 1
        audit = audit_values(current.key, version, now, principal, "delete", None)
        tombstone = current.to_values() | {DELETING: True}
        self._change(current, tombstone, PendingChange(version, now, None, audit, delete=True), now)

    def settle_change(self, job: str) -> bool:
        """Finish the job's pending change, if it has one (the dispatcher, after ``CHANGE_GRACE``)."""
        return self._settle_pending(job, self._spec_values(job))

    def _settle_pending(self, job: str, values: dict[str, Any]) -> bool:
        """Finish the pending change on ``values``, the job's SPEC item as just read; False: it has none."""
        text = values.get(PENDING)
        if not text:
            return False
        self._settle(job, PendingChange.from_text(str(text), values))
        return True

    # ------------------------------------------------------------------------------ the saga

    def _committed(self, values: dict[str, Any], change: PendingChange, now: datetime) -> dict[str, Any]:
        """The SPEC item that commits ``change``: on the due index (one minute ahead) until it is finished."""
        return to_item(
            {k: v for k, v in values.items() if v is not None}
            | {
                PENDING: change.to_text(),
                JobsKeys.DUE_SHARD: due_shard(str(values[JobsKeys.PK])),
                JobsKeys.NEXT_VISIT_AT: instant_text(now + CHANGE_GRACE),
                "cursor": instant_text(change.cursor),
                "spec_version": change.version,
            }
        )

    def _change(self, current: StoredJob, values: dict[str, Any], change: PendingChange, now: datetime) -> None:
        """Commit ``change`` over ``current`` (its version), finishing an earlier pending change first."""
        for _ in range(2):
            try:
                self.db.put_item(
                    TableName=self.table,
                    Item=self._committed(values, change, now),
                    ConditionExpression=(
                        "version = :v AND attribute_not_exists(#pending) AND attribute_not_exists(#deleting)"
                    ),
                    ExpressionAttributeNames={"#pending": PENDING, "#deleting": DELETING},
                    ExpressionAttributeValues=to_values({":v": current.version}),
                )
                break
            except ClientError as error:
                if not is_conditional_failure(error):
                    raise
                # At its version but with a change of its own unfinished (a crash): finish that one, then ours.
                found = self._spec_values(current.key)
                at_version = bool(found) and not found.get(DELETING) and int(found["version"]) == current.version
                if not at_version or not self._settle_pending(current.key, found):
                    raise VersionConflict(f"{current.key} is no longer at version {current.version}") from None
        else:
            raise VersionConflict(f"{current.key} is no longer at version {current.version}")
        self._change_step("commit")
        self._settle(current.key, change)

    def _settle(self, job: str, change: PendingChange) -> None:
        self._settle_state(job, change)
        self._change_step("state")
        self.db.put_item(TableName=self.table, Item=to_item(change.audit))  # idempotent: its key is fixed
        self._change_step("audit")
        self._settle_spec(job, change)

    def _settle_state(self, job: str, change: PendingChange) -> None:
        """The STATE item as of ``change``, unless a newer change wrote it already."""
        key = self._key(job, JobsKeys.STATE)
        if change.delete:
            try:
                self.db.delete_item(
                    TableName=self.table,
                    Key=key,
                    ConditionExpression="attribute_not_exists(pk) OR spec_version < :v",
                    ExpressionAttributeValues=to_values({":v": change.version}),
                )
            except ClientError as error:
                if not is_conditional_failure(error):
                    raise
            return
        update = self._state_update(job, change.version, change.cursor, change.next_visit_at)
        update_if(
            self.db,
            **update,
            ConditionExpression="attribute_not_exists(spec_version) OR spec_version < :v",
        )

    def _settle_spec(self, job: str, change: PendingChange) -> None:
        """The SPEC item without its pending change (and off the due index); a delete's tombstone removed."""
        key = self._key(job, JobsKeys.SPEC)
        condition = {
            "ConditionExpression": "#pending = :change",
            "ExpressionAttributeValues": to_values({":change": change.to_text()}),
        }
        names = {"#pending": PENDING}
        try:
            if change.delete:
                self.db.delete_item(TableName=self.table, Key=key, ExpressionAttributeNames=names, **condition)
            else:
                self.db.update_item(
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="REMOVE #pending, due_shard, next_fire_at, #cursor, spec_version",
                    ExpressionAttributeNames=names | {"#cursor": "cursor"},
                    **condition,
                )
        except ClientError as error:
            if not is_conditional_failure(error):  # finished already, by us or by the dispatcher
                raise

    def _change_step(self, name: str) -> None:
        if self.after_change_step is not None:
            self.after_change_step(name)

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

    def _latest_entry(self, job: str) -> list[AuditEntry]:
        """The name's newest history entry, read strongly (a delete a moment ago names the version to go on from)."""
        return self._history_page(job, limit=1, consistent=True)[0]

    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        """The job's history, newest first, a page of ``limit``; the token continues after the page."""
        return self._history_page(job, limit=limit, before=before)

    def _history_page(
        self, job: str, *, limit: int, before: str | None = None, consistent: bool = False
    ) -> tuple[list[AuditEntry], str | None]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": to_values({":pk": job, ":prefix": JobsKeys.AUDIT_PREFIX}),
            "ScanIndexForward": False,
            "Limit": limit,
            "ConsistentRead": consistent,
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
