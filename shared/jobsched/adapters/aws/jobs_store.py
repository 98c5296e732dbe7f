"""The Jobs table: job specs, their dispatch state, concurrency slots, audit records.

Per job, one partition holds:
- SPEC: the spec (JSON), version, lifecycle state. Every write is conditional on the version.
- STATE: small and hot: next_fire_at + due_shard (the sparse ``due`` index), the dispatch cursor,
  the spec version the cursor belongs to, ``audited_to`` (every instant up to it has a run record: the
  lost-message audit) and ``slots`` (run -> lease) for max_running.
- AUDIT#...: who changed what, written in the same transaction as the change.

Conditional failures become domain exceptions; nothing here decides policy.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, Literal

from botocore.exceptions import ClientError

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.dynamo import batch_get, from_item, is_conditional_failure, to_item, to_values, update_if
from jobsched.core.limits import TeamLimits
from jobsched.core.names import TARGET_PREFIX, JobsKeys
from jobsched.core.records import (
    BreakerState,
    DueEntry,
    JobExists,
    JobState,
    SlotResult,
    StoredIncident,
    StoredJob,
    VersionConflict,
    due_shard,
    job_state_values,
    slots_to_evict,
)
from jobsched.core.runs import instant_text, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.tenancy.quotas import CachedLimits

IDEMPOTENCY_KEY_SECONDS = 7 * 86400  # a trigger retried within a week gets the same run


def spec_digest(spec: JobSpec | None) -> str:
    if spec is None:
        return "-"
    canonical = json.dumps(spec.model_dump(mode="json", exclude_none=True), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class JobsStore:
    def __init__(
        self, table_name: str, dynamodb: Any | None = None, *, team_defaults: TeamLimits | None = None
    ) -> None:
        self.table = table_name
        self._client = dynamodb
        self.team_defaults = team_defaults or TeamLimits()
        self._limits = CachedLimits(self.team_defaults, self.team_overrides)

    @property
    def db(self) -> Any:
        return self._client or client("dynamodb")

    # ------------------------------------------------------------------------------ spec items

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

    def audit_marks(self, jobs: list[str]) -> dict[str, datetime]:
        """Each job's ``audited_to`` (absent for jobs written before the audit existed), from its STATE item."""
        keys = [self._key(job, JobsKeys.STATE) for job in jobs]
        states = batch_get(self.db, self.table, keys, ProjectionExpression="pk, audited_to", ConsistentRead=False)
        return {values["pk"]: parse_instant(values["audited_to"]) for values in states if "audited_to" in values}

    def create(
        self, spec: JobSpec, *, now: datetime, principal: str, next_fire_at: datetime | None, cursor: datetime
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
                    {"Put": {"TableName": self.table, "Item": self._state_item(spec.key, 1, cursor, next_fire_at)}},
                    self._audit(spec.key, 1, now, principal, "create", None, spec),
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
        next_fire_at: datetime | None,
        cursor: datetime,
    ) -> StoredJob:
        """New spec at version + 1, conditional on ``current.version``; dispatch restarts at ``cursor``."""
        stored = current.changed_to(spec, now=now, principal=principal)
        self._transact_versioned(
            current,
            [
                {"Put": self._versioned_put(stored, current.version)},
                {"Update": self._state_update(spec.key, stored, cursor, next_fire_at)},
                self._audit(spec.key, stored.version, now, principal, "replace", current.spec, spec),
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
        next_fire_at: datetime | None,
        cursor: datetime,
    ) -> StoredJob:
        """Pause (leaves the due index) or resume (re-enters it at ``cursor``)."""
        paused = state == "PAUSED"
        stored = current.in_state(state, now=now, principal=principal, reason=reason)
        self._transact_versioned(
            current,
            [
                {"Put": self._versioned_put(stored, current.version)},
                {"Update": self._state_update(current.key, stored, cursor, None if paused else next_fire_at)},
                self._audit(
                    current.key,
                    stored.version,
                    now,
                    principal,
                    "pause" if paused else "resume",
                    current.spec,
                    current.spec,
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
                self._audit(current.key, current.version + 1, now, principal, "delete", current.spec, None),
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

    def audit_trail(self, job: str) -> list[dict[str, Any]]:
        response = self.db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=to_values({":pk": job, ":prefix": JobsKeys.AUDIT_PREFIX}),
        )
        return [from_item(item) for item in response.get("Items", [])]

    # ------------------------------------------------------------------------- incidents

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
        values = {
            JobsKeys.PK: stored.values["subject"],
            JobsKeys.SK: JobsKeys.INCIDENT_PREFIX + stored.values["incident_class"],
            "incident": json.dumps(stored.values, sort_keys=True),
            "version": stored.version,
            "unsent": stored.unsent,
            "resolved": stored.resolved,
        }
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

    # -------------------------------------------------------------------------- breakers

    def breaker(self, key: str) -> BreakerState:
        response = self.db.get_item(
            TableName=self.table, Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER), ConsistentRead=False
        )
        values = from_item(response.get("Item") or {})
        until = values.get("open_until")
        return BreakerState(int(values.get("failures", 0)), parse_instant(until) if until else None)

    def breaker_failed(
        self, key: str, *, now: datetime, threshold: int, cool_down: timedelta
    ) -> Literal["opened", "reopened"] | None:
        """Count a failure; open the breaker at ``threshold`` consecutive failures. "opened" only for the
        writer that moved it from closed to open (it escalates), "reopened" after a failed half-open try."""
        response = self.db.update_item(
            TableName=self.table,
            Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER),
            UpdateExpression="ADD failures :one",
            ExpressionAttributeValues=to_values({":one": 1}),
            ReturnValues="ALL_NEW",
        )
        values = from_item(response["Attributes"])
        if int(values["failures"]) < threshold:
            return None
        was_open = "open_until" in values
        opened = update_if(
            self.db,
            TableName=self.table,
            Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER),
            UpdateExpression="SET open_until = :until",
            ConditionExpression="attribute_not_exists(open_until) OR open_until <= :now",
            ExpressionAttributeValues=to_values({":until": instant_text(now + cool_down), ":now": instant_text(now)}),
        )
        if not opened:
            return None  # open already: another failure of the same burst
        return "reopened" if was_open else "opened"

    def breaker_succeeded(self, key: str) -> bool:
        """Close and forget the breaker; True if it had been open (its incident resolves)."""
        response = self.db.delete_item(
            TableName=self.table, Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER), ReturnValues="ALL_OLD"
        )
        return "open_until" in from_item(response.get("Attributes") or {})

    # ---------------------------------------------------------------------- dispatch state

    def due(self, shard: int, until: datetime) -> Iterator[DueEntry]:
        """Jobs on ``shard`` whose next instant is at or before ``until`` (sparse index: nothing else)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": JobsKeys.DUE_INDEX,
            "KeyConditionExpression": "due_shard = :shard AND next_fire_at <= :until",
            "ExpressionAttributeValues": to_values({":shard": shard, ":until": instant_text(until)}),
        }
        while True:
            response = self.db.query(**request)
            for item in response.get("Items", []):
                values = from_item(item)
                yield DueEntry(
                    job=values["pk"],
                    next_fire_at=parse_instant(values["next_fire_at"]),
                    cursor=parse_instant(values["cursor"]),
                    spec_version=int(values["spec_version"]),
                    sk=values["sk"],
                )
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def get_state(self, job: str) -> dict[str, Any] | None:
        response = self.db.get_item(TableName=self.table, Key=self._key(job, JobsKeys.STATE), ConsistentRead=True)
        item = response.get("Item")
        return from_item(item) if item else None

    def advance(
        self,
        job: str,
        *,
        spec_version: int,
        old_cursor: datetime,
        cursor: datetime,
        next_fire_at: datetime | None,
        audited_to: datetime | None = None,
    ) -> bool:
        """Move the cursor (forward; back only when queued messages were lost, see ``recovery``) and the
        audit mark; False if another dispatcher (or a spec change) got there first."""
        values: dict[str, Any] = {
            ":old": instant_text(old_cursor),
            ":v": spec_version,
            ":cursor": instant_text(cursor),
        }
        sets = "SET #cursor = :cursor"
        if audited_to is not None:
            sets += ", audited_to = :audited"
            values[":audited"] = instant_text(audited_to)
        if next_fire_at is None:
            update = sets + " REMOVE due_shard, next_fire_at"
        else:
            update = sets + ", next_fire_at = :next"
            values[":next"] = instant_text(next_fire_at)
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, JobsKeys.STATE),
            UpdateExpression=update,
            ConditionExpression="#cursor = :old AND spec_version = :v AND attribute_exists(due_shard)",
            ExpressionAttributeNames={"#cursor": "cursor"},
            ExpressionAttributeValues=to_values(values),
        )

    # ------------------------------------------------------------------ API request windows

    def count_request(self, team: str, *, now: datetime, limit: int) -> bool:
        """Count one API request in the team's current minute; False once ``limit`` is reached."""
        return self._count(f"{JobsKeys.TEAM_PREFIX}{team}", now=now, limit=limit)

    def count_principal_request(self, principal: str, *, now: datetime, limit: int) -> bool:
        """Count one authenticated request of this caller in its current minute (team routes or not)."""
        digest = hashlib.sha256(principal.encode()).hexdigest()[:32]
        return self._count(f"{JobsKeys.PRINCIPAL_PREFIX}{digest}", now=now, limit=limit)

    def _count(self, partition: str, *, now: datetime, limit: int) -> bool:
        window = now.strftime("%Y-%m-%dT%H:%M")
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(partition, f"{JobsKeys.RATE_PREFIX}{window}"),
            UpdateExpression="ADD requests :one SET expires_at = if_not_exists(expires_at, :expires)",
            ConditionExpression="attribute_not_exists(requests) OR requests < :limit",
            ExpressionAttributeValues=to_values({":one": 1, ":limit": limit, ":expires": int(now.timestamp()) + 3600}),
        )

    # ------------------------------------------------------------- idempotency and backfills

    def claim_idempotency_key(self, job: str, key: str, *, run_id: str, now: datetime, principal: str) -> str:
        """The run id for ``key``: ``run_id`` if this call claims the key, else the one claimed first."""
        item_key = self._key(job, f"{JobsKeys.IDEMPOTENCY_PREFIX}{key}")
        try:
            self.db.put_item(
                TableName=self.table,
                Item=item_key
                | to_item(
                    {
                        "run_id": run_id,
                        "at": instant_text(now),
                        "principal": principal,
                        JobsKeys.TTL: int(now.timestamp()) + IDEMPOTENCY_KEY_SECONDS,
                    }
                ),
                ConditionExpression="attribute_not_exists(pk)",
            )
            return run_id
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
        existing = self.db.get_item(TableName=self.table, Key=item_key, ConsistentRead=True)["Item"]
        return str(from_item(existing)["run_id"])

    def put_backfill(
        self, job: str, backfill_id: str, values: dict[str, Any], *, cursor: datetime, due_at: datetime
    ) -> None:
        item = {
            JobsKeys.PK: job,
            JobsKeys.SK: f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}",
            **values,
            "cursor": instant_text(cursor),
            JobsKeys.DUE_SHARD: due_shard(f"{job}/{backfill_id}"),
            JobsKeys.NEXT_FIRE_AT: instant_text(due_at),
        }
        self.db.put_item(TableName=self.table, Item=to_item(item), ConditionExpression="attribute_not_exists(pk)")

    def get_backfill(self, job: str, backfill_id: str) -> dict[str, Any] | None:
        response = self.db.get_item(
            TableName=self.table, Key=self._key(job, f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}"), ConsistentRead=True
        )
        item = response.get("Item")
        return from_item(item) if item else None

    def update_backfill(
        self,
        job: str,
        backfill_id: str,
        current: dict[str, Any],
        changes: dict[str, Any],
        *,
        cursor: datetime | None,
        due_at: datetime | None,
    ) -> bool:
        """Apply ``changes`` if nobody advanced the backfill since ``current`` was read (its ``sent``)."""
        values: dict[str, Any] = {":sent_before": current["sent"]}
        names: dict[str, str] = {}
        sets = []
        for index, (name, value) in enumerate(changes.items()):
            names[f"#c{index}"] = name
            values[f":c{index}"] = value
            sets.append(f"#c{index} = :c{index}")
        if cursor is not None:
            names["#cursor"] = "cursor"
            values[":cursor"] = instant_text(cursor)
            sets.append("#cursor = :cursor")
        update = "SET " + ", ".join(sets)
        if due_at is None:
            update += " REMOVE due_shard, next_fire_at"
        else:
            values[":due"] = instant_text(due_at)
            update = update.replace("SET ", "SET next_fire_at = :due, ", 1)
        return update_if(
            self.db,
            TableName=self.table,
            Key=self._key(job, f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}"),
            UpdateExpression=update,
            ConditionExpression="sent = :sent_before",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_values(values),
        )

    # ------------------------------------------------------------------------------- slots

    def acquire_slot(
        self,
        pk: str,
        sk: str,
        *,
        holder: str,
        lease_until: datetime,
        limit: int,
        now: datetime,
        ended: Callable[[list[str]], set[str]] | None = None,
    ) -> SlotResult:
        """Take one of ``limit`` slots for ``holder`` (idempotent for the same holder).

        Slots are released lazily: a run that ends writes nothing here. When the slots are full, the
        holders whose runs have ended (``ended``: which of these holders' runs are terminal) and those
        whose lease has expired (their worker died) are evicted in the same conditional write that takes
        the slot: one write per run instead of two, plus strongly consistent reads (a fifth of the price).
        (Writing blind first and reading only on refusal would cost more: with lazy release the slots are
        usually full of ended holders, and a refused conditional write is billed like a write.)
        """
        holders = self.slot_holders(pk, sk)
        for _ in range(3):
            stale = slots_to_evict(holders, holder, now=now, limit=limit, ended=ended)
            if stale is None:
                return SlotResult(False, holders)
            names = {"#h": holder}
            values: dict[str, Any] = {":lease": instant_text(lease_until), ":room": limit + len(stale)}
            update = "SET slots.#h = :lease"
            conditions = ["(attribute_exists(slots.#h) OR attribute_not_exists(slots) OR size(slots) < :room)"]
            if stale:
                update += " REMOVE " + ", ".join(f"slots.#s{index}" for index in range(len(stale)))
            for index, evicted in enumerate(stale):
                names[f"#s{index}"] = evicted
                values[f":s{index}"] = holders[evicted]
                conditions.append(f"slots.#s{index} = :s{index}")  # still the holder we judged ended
            try:
                self.db.update_item(
                    TableName=self.table,
                    Key=self._key(pk, sk),
                    UpdateExpression=update,
                    ConditionExpression=" AND ".join(conditions),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=to_values(values),
                )
                return SlotResult(True, {})
            except ClientError as error:
                if not is_conditional_failure(error):
                    if error.response.get("Error", {}).get("Code") == "ValidationException":
                        # The item has no ``slots`` map yet (a quota item written without one).
                        self._ensure_slots(pk, sk)
                        holders = self.slot_holders(pk, sk)
                        continue
                    raise
            holders = self.slot_holders(pk, sk)  # another worker changed them: judge again
        return SlotResult(False, holders)

    def release_slot(self, pk: str, sk: str, *, holder: str) -> None:
        self.db.update_item(
            TableName=self.table,
            Key=self._key(pk, sk),
            UpdateExpression="REMOVE slots.#h",
            ExpressionAttributeNames={"#h": holder},
        )

    def slot_holders(self, pk: str, sk: str) -> dict[str, str]:
        response = self.db.get_item(TableName=self.table, Key=self._key(pk, sk), ConsistentRead=True)
        item = from_item(response.get("Item") or {})
        slots = item.get("slots") or {}
        return {str(k): str(v) for k, v in slots.items()}

    def _ensure_slots(self, pk: str, sk: str) -> None:
        try:
            self.db.update_item(
                TableName=self.table,
                Key=self._key(pk, sk),
                UpdateExpression="SET slots = :empty",
                ConditionExpression="attribute_not_exists(slots)",
                ExpressionAttributeValues=to_values({":empty": {}}),
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise

    # ------------------------------------------------------------------------- team limits

    def team_limits(self, team: str, *, now: float | None = None) -> TeamLimits:
        """The platform's defaults with the team's overrides, cached for a minute (``CachedLimits``)."""
        return self._limits.get(team, now=now)

    def team_overrides(self, team: str) -> dict[str, int]:
        key = self._key(f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.QUOTA)
        item = from_item(self.db.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item") or {})
        return {name: int(item[name]) for name in TeamLimits().as_dict() if name in item}

    def set_team_limits(self, team: str, overrides: dict[str, int | None]) -> TeamLimits:
        """Set (an int) or drop (None: back to the platform default) some of a team's limits."""
        self.team_defaults.with_overrides(overrides)  # refuses unknown names and bad values before writing
        self._limits.forget(team)
        names = {f"#{name}": name for name in overrides}
        kept = {f":{name}": value for name, value in overrides.items() if value is not None}
        parts = [f"#{name} = :{name}" for name, value in overrides.items() if value is not None]
        dropped = [f"#{name}" for name, value in overrides.items() if value is None]
        update = ("SET " + ", ".join(parts) if parts else "") + (" REMOVE " + ", ".join(dropped) if dropped else "")
        if update:
            request: dict[str, Any] = {
                "TableName": self.table,
                "Key": self._key(f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.QUOTA),
                "UpdateExpression": update.strip(),
                "ExpressionAttributeNames": names,
            }
            if kept:
                request["ExpressionAttributeValues"] = to_values(kept)
            self.db.update_item(**request)
        return self.team_limits(team)

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

    # ----------------------------------------------------------------------------- helpers

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
    def _state_item(job: str, version: int, cursor: datetime, next_fire_at: datetime | None) -> dict[str, Any]:
        return to_item(job_state_values(job, version, cursor, next_fire_at))

    def _state_update(
        self, job: str, stored: StoredJob, cursor: datetime, next_fire_at: datetime | None
    ) -> dict[str, Any]:
        """Keep the slots (runs in flight) while the cursor, version and due entry change. The audit restarts
        at the new cursor: instants of the old version or of a pause are not the dispatcher's to account for."""
        values: dict[str, Any] = {":cursor": instant_text(cursor), ":v": stored.version, ":empty": {}}
        update = "SET #cursor = :cursor, audited_to = :cursor, spec_version = :v, slots = if_not_exists(slots, :empty)"
        if next_fire_at is None:
            update += " REMOVE due_shard, next_fire_at"
        else:
            update += ", due_shard = :shard, next_fire_at = :next"
            values |= {":shard": due_shard(job), ":next": instant_text(next_fire_at)}
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
        before: JobSpec | None,
        after: JobSpec | None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table,
                "Item": to_item(
                    {
                        JobsKeys.PK: job,
                        # The version orders changes made within the same second.
                        JobsKeys.SK: JobsKeys.AUDIT_PREFIX
                        + f"{instant_text(now)}#{version:010d}#{uuid.uuid4().hex[:6]}",
                        "version": version,
                        "action": action,
                        "principal": principal,
                        "at": instant_text(now),
                        "before": spec_digest(before),
                        "after": spec_digest(after),
                        "reason": reason,
                    }
                ),
            }
        }

    def _transact_versioned(self, current: StoredJob, items: list[dict[str, Any]]) -> None:
        try:
            self.db.transact_write_items(TransactItems=items)
        except ClientError as error:
            if is_conditional_failure(error):
                raise VersionConflict(f"{current.key} is no longer at version {current.version}") from None
            raise
