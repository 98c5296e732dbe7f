"""The Jobs table in memory: the same items, keys and conditions as ``aws.jobs_store``, for every port that store
serves (``JobsPort``, ``IncidentsPort``, ``RegistryPort``, ``TriggerStorePort``; the contract suite runs both)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from jobsched.adapters.items import (
    audit_values,
    due_entry,
    first_version,
    job_state_values,
    jobs_snapshot,
    wheel_marks_of,
)
from jobsched.adapters.memory.batches import MemoryBatches
from jobsched.adapters.memory.breakers import MemoryBreakers
from jobsched.adapters.memory.budgets import MemoryBudgets
from jobsched.adapters.memory.company import MemoryCompany
from jobsched.adapters.memory.drills import MemoryDrills
from jobsched.adapters.memory.health import MemoryHealth
from jobsched.adapters.memory.incidents import MemoryIncidents
from jobsched.adapters.memory.slo import MemorySloLedger
from jobsched.adapters.memory.slots import MemorySlots
from jobsched.adapters.memory.stops import MemoryStops
from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.adapters.memory.usage import MemoryUsage
from jobsched.core.limits import TeamLimits
from jobsched.core.names import JOBS_TABLE, JobsKeys
from jobsched.core.records import (
    AuditEntry,
    DispatchState,
    DueEntry,
    JobExists,
    JobsSnapshot,
    JobState,
    StoredJob,
    VersionConflict,
    due_shard,
)
from jobsched.core.runs import instant_text, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.tenancy.quotas import CachedLimits


class MemoryJobs(
    MemoryBreakers,
    MemorySlots,
    MemoryIncidents,
    MemoryBatches,
    MemorySloLedger,
    MemoryDrills,
    MemoryHealth,
    MemoryStops,
    MemoryCompany,
    MemoryUsage,
    MemoryBudgets,
):
    def __init__(self, *, team_defaults: TeamLimits | None = None) -> None:
        self.table = MemoryTable(JOBS_TABLE)
        self.team_defaults = team_defaults or TeamLimits()
        self._limits = CachedLimits(self.team_defaults, self._overrides)
        self._audit_items: dict[str, list[dict[str, Any]]] = {}  # job -> its history, oldest first

    # ------------------------------------------------------------------------------ specs

    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None:
        item = self.table.get(job, JobsKeys.SPEC, consistent=consistent)
        return StoredJob.from_values(item) if item else None

    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]:
        found = self.table.get_batch([(job, JobsKeys.SPEC) for job in jobs], consistent=False)
        return {stored.key: stored for stored in (StoredJob.from_values(item) for item in found)}

    def snapshot(self, jobs: list[str], *, specs: bool = True) -> JobsSnapshot:
        kinds = (JobsKeys.SPEC, JobsKeys.STATE) if specs else (JobsKeys.STATE,)
        keys = [(job, sk) for job in dict.fromkeys(jobs) for sk in kinds]
        return jobs_snapshot(self.table.get_batch(keys, consistent=False))

    def create(
        self, spec: JobSpec, *, now: datetime, principal: str, next_visit_at: datetime | None, cursor: datetime
    ) -> StoredJob:
        version = first_version(self.history(spec.key, limit=1)[0])
        stored = StoredJob(spec, version, "ACTIVE", now, now, principal)
        if not self.table.put(stored.to_values(), if_absent=True):
            raise JobExists(spec.key)
        self.table.put(job_state_values(spec.key, version, cursor, next_visit_at))
        self._put_audit(audit_values(spec.key, version, now, principal, "create", spec))
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
        stored = current.changed_to(spec, now=now, principal=principal)
        self._write_versioned(current, stored, cursor, next_visit_at)
        self._put_audit(audit_values(spec.key, stored.version, now, principal, action, spec, reason=reason))
        return stored

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
        self._put_audit(audit_values(job, version, now, principal, action, None, reason=reason, details=details))

    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        """The job's history, newest first, a page of ``limit``; the token continues after the page."""
        entries = sorted(self._audit_items.get(job, []), key=lambda values: values[JobsKeys.SK], reverse=True)
        if before is not None:
            entries = [values for values in entries if values[JobsKeys.SK] < before]
        page = entries[:limit]
        more = len(entries) > limit
        return [AuditEntry.from_values(values) for values in page], (page[-1][JobsKeys.SK] if more else None)

    def _put_audit(self, values: dict[str, Any]) -> None:
        self._audit_items.setdefault(values[JobsKeys.PK], []).append(values)

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
        paused = state == "PAUSED"
        stored = current.in_state(state, now=now, principal=principal, reason=reason)
        self._write_versioned(current, stored, cursor, None if paused else next_visit_at)
        action = "pause" if paused else "resume"
        self._put_audit(audit_values(current.key, stored.version, now, principal, action, None, reason=reason))
        return stored

    def _write_versioned(
        self, current: StoredJob, stored: StoredJob, cursor: datetime, next_visit_at: datetime | None
    ) -> None:
        def put_spec(item: Item | None) -> Item:
            if item is None or int(item["version"]) != current.version:
                raise ConditionFailed
            return stored.to_values()

        try:
            self.table.update(current.key, JobsKeys.SPEC, put_spec)
        except ConditionFailed:
            raise VersionConflict(f"{current.key} is no longer at version {current.version}") from None

        def restart(item: Item | None) -> Item:
            # Keep the slots (runs in flight); the audit restarts at the new cursor.
            state = job_state_values(current.key, stored.version, cursor, next_visit_at)
            state["slots"] = (item or {}).get("slots") or {}
            state[JobsKeys.INCIDENTS] = (item or {}).get(JobsKeys.INCIDENTS)
            return state

        self.table.update(current.key, JobsKeys.STATE, restart)

    # ---------------------------------------------------------------------- dispatch state

    def settle_change(self, job: str) -> bool:
        return False  # its writes leave no change pending: nothing to finish

    def due(self, shard: int, until: datetime) -> Iterator[DueEntry]:
        for values in self.table.query_index(JobsKeys.DUE_INDEX, shard, instant_text(until)):
            if entry := due_entry(values):
                yield entry

    def wheel(self, slot: str) -> list[str]:
        return sorted({str(values[JobsKeys.PK]) for values in self.table.query_index(JobsKeys.WHEEL_INDEX, slot, "~")})

    def due_states(self, jobs: list[str]) -> list[DueEntry]:
        states = self.table.get_batch([(job, JobsKeys.STATE) for job in jobs], consistent=False)
        return [entry for values in states if (entry := due_entry(values, whole_item=True))]

    def wheel_marks(self) -> dict[int, datetime]:
        return wheel_marks_of(self.table.get(JobsKeys.DISPATCH, JobsKeys.WHEEL_MARKS) or {})

    def mark_wheel(self, marks: dict[int, datetime], read: dict[int, datetime]) -> bool:
        def move(item: Item | None) -> Item:
            stored = dict((item or {}).get("marks") or {})
            for shard in marks:
                if stored.get(str(shard)) != (instant_text(read[shard]) if shard in read else None):
                    raise ConditionFailed
            stored |= {str(shard): instant_text(mark) for shard, mark in marks.items()}
            return {**(item or {}), "marks": stored}

        return self._applied(JobsKeys.DISPATCH, JobsKeys.WHEEL_MARKS, move)

    def get_state(self, job: str) -> DispatchState | None:
        values = self.table.get(job, JobsKeys.STATE)
        return DispatchState.from_values(values) if values else None

    def audit_marks(self, jobs: list[str]) -> dict[str, datetime]:
        states = self.table.get_batch([(job, JobsKeys.STATE) for job in jobs], consistent=False)
        return {
            values[JobsKeys.PK]: parse_instant(values["audited_to"]) for values in states if values.get("audited_to")
        }

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
        def move(item: Item | None) -> Item:
            if (
                item is None
                or item.get("cursor") != instant_text(old_cursor)
                or int(item.get("spec_version", -1)) != spec_version
                or (item.get(JobsKeys.DUE_SHARD) is None and item.get(JobsKeys.WHEEL_SLOT) is None)
            ):
                raise ConditionFailed
            item["cursor"] = instant_text(cursor)
            if audited_to is not None:
                item["audited_to"] = instant_text(audited_to)
            if next_visit_at is None:
                for name in (JobsKeys.DUE_SHARD, JobsKeys.NEXT_VISIT_AT, JobsKeys.WHEEL_SLOT):
                    item.pop(name, None)
            elif wheel_slot is not None:
                item.pop(JobsKeys.DUE_SHARD, None)
                item |= {JobsKeys.NEXT_VISIT_AT: instant_text(next_visit_at), JobsKeys.WHEEL_SLOT: wheel_slot}
            else:
                item.pop(JobsKeys.WHEEL_SLOT, None)
                item |= {JobsKeys.NEXT_VISIT_AT: instant_text(next_visit_at), JobsKeys.DUE_SHARD: due_shard(job)}
            return item

        return self._applied(job, JobsKeys.STATE, move)

    # ---------------------------------------------------------------------------- backfills

    def put_backfill(
        self, job: str, backfill_id: str, values: dict[str, Any], *, cursor: datetime, due_at: datetime
    ) -> None:
        item = {
            JobsKeys.PK: job,
            JobsKeys.SK: f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}",
            **values,
            "cursor": instant_text(cursor),
            JobsKeys.DUE_SHARD: due_shard(f"{job}/{backfill_id}"),
            JobsKeys.NEXT_VISIT_AT: instant_text(due_at),
        }
        if not self.table.put(item, if_absent=True):
            raise ConditionFailed(f"backfill {backfill_id} of {job} exists")

    def get_backfill(self, job: str, backfill_id: str) -> dict[str, Any] | None:
        return self.table.get(job, f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}")

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
        def apply(item: Item | None) -> Item:
            if item is None or item.get("sent") != current["sent"]:
                raise ConditionFailed
            item |= changes
            if cursor is not None:
                item["cursor"] = instant_text(cursor)
            if due_at is None:
                item.pop(JobsKeys.DUE_SHARD, None)
                item.pop(JobsKeys.NEXT_VISIT_AT, None)
            else:
                item[JobsKeys.NEXT_VISIT_AT] = instant_text(due_at)
            return item

        return self._applied(job, f"{JobsKeys.BACKFILL_PREFIX}{backfill_id}", apply)

    # ---------------------------------------------------------------------------- registry

    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]:
        specs = (item for (_, sk), item in list(self.table.items.items()) if sk == JobsKeys.SPEC)
        names = sorted(str(item[JobsKeys.NAME]) for item in specs if item.get(JobsKeys.TEAM) == team)
        names = [name for name in names if after_name is None or name > after_name]
        page = names[:limit]
        return [f"{team}/{name}" for name in page], (page[-1] if len(names) > limit else None)

    def count_team_jobs(self, team: str, *, at_least: int) -> int:
        specs = (item for (_, sk), item in list(self.table.items.items()) if sk == JobsKeys.SPEC)
        return sum(1 for item in specs if item.get(JobsKeys.TEAM) == team)  # one page: all of them

    def delete(self, current: StoredJob, *, now: datetime, principal: str) -> None:
        def remove(item: Item | None) -> None:
            if item is None or int(item["version"]) != current.version:
                raise ConditionFailed

        try:
            self.table.update(current.key, JobsKeys.SPEC, remove)
        except ConditionFailed:
            raise VersionConflict(f"{current.key} is no longer at version {current.version}") from None
        self.table.delete(current.key, JobsKeys.STATE)
        self._put_audit(audit_values(current.key, current.version + 1, now, principal, "delete", None))

    def reserve_idempotency_key(self, job: str, key: str, *, run_id: str, now: datetime, principal: str) -> str:
        sk = f"{JobsKeys.IDEMPOTENCY_PREFIX}{key}"

        def reserve(item: Item | None) -> Item:
            return item if item is not None else {"run_id": run_id, "at": instant_text(now), "principal": principal}

        reserved = self.table.update(job, sk, reserve)
        assert reserved is not None
        return str(reserved["run_id"])

    def link_downstream(self, upstream: str, downstream: str) -> None:
        self.table.put(
            {JobsKeys.PK: upstream, JobsKeys.SK: f"{JobsKeys.DOWNSTREAM_PREFIX}{downstream}", "job": downstream}
        )

    def unlink_downstream(self, upstream: str, downstream: str) -> None:
        self.table.delete(upstream, f"{JobsKeys.DOWNSTREAM_PREFIX}{downstream}")

    def downstreams(self, job: str) -> list[str]:
        prefix = JobsKeys.DOWNSTREAM_PREFIX
        return [str(item["job"]) for item in self.table.partition(job, first=prefix, last=prefix + "\uffff")]

    def add_waiter(self, job: str, waiter: str, message: str, *, awaits: list[str], expires_at: datetime) -> None:
        self.table.put(
            {
                JobsKeys.PK: job,
                JobsKeys.SK: f"{JobsKeys.WAITER_PREFIX}{waiter}",
                "message": message,
                "awaits": list(awaits),
                JobsKeys.TTL: int(expires_at.timestamp()),
            }
        )

    def waiters(self, job: str, *, limit: int, awaiting: str | None = None) -> dict[str, str]:
        prefix = JobsKeys.WAITER_PREFIX
        found = [
            item
            for item in self.table.partition(job, first=prefix, last=prefix + "\uffff")
            if awaiting is None or awaiting in item.get("awaits", [])
        ][:limit]
        return {str(item[JobsKeys.SK]).removeprefix(prefix): str(item["message"]) for item in found}

    def drop_waiter(self, job: str, waiter: str) -> None:
        self.table.delete(job, f"{JobsKeys.WAITER_PREFIX}{waiter}")

    def carried(self, job: str, run_id: str, upstream_attempt: str) -> bool:
        return self.table.get(job, f"{JobsKeys.CARRIED_PREFIX}{run_id}#{upstream_attempt}") is not None

    def mark_carried(self, job: str, run_id: str, upstream_attempt: str, *, expires_at: datetime) -> None:
        sk = f"{JobsKeys.CARRIED_PREFIX}{run_id}#{upstream_attempt}"
        self.table.put({JobsKeys.PK: job, JobsKeys.SK: sk, JobsKeys.TTL: int(expires_at.timestamp())})

    def note_upstream(
        self, job: str, trigger: str, instant: datetime, upstream: str, run_id: str, *, expires_at: datetime
    ) -> dict[str, str]:
        prefix = JobsKeys.UPSTREAM_ATTRIBUTE
        seen = self.table.update(
            job,
            f"{JobsKeys.AFTER_PREFIX}{trigger}#{instant_text(instant)}",
            lambda item: {**(item or {}), f"{prefix}{upstream}": run_id},
        )
        assert seen is not None
        return {name[len(prefix) :]: str(value) for name, value in seen.items() if name.startswith(prefix)}

    def count_event_run(self, job: str, *, now: datetime, limit: int) -> bool:
        def count(item: Item | None) -> Item:
            taken = int((item or {}).get("requests", 0))
            if taken >= limit:
                raise ConditionFailed()
            return {"requests": taken + 1}

        return self._applied(job, f"{JobsKeys.EVENT_RUNS_PREFIX}{now.strftime('%Y-%m-%dT%H:%M')}", count)

    def _applied(self, pk: str, sk: str, change: Callable[[Item | None], Item | None]) -> bool:
        try:
            self.table.update(pk, sk, change)
        except ConditionFailed:
            return False
        return True
