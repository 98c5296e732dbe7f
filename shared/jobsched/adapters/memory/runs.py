"""The Runs table in memory (``TaskRunsPort``): one item per run and one per DAG task, every transition
conditional on status and attempt exactly as in ``aws.runs_store`` (the contract suite runs both)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobsched.adapters.items import (
    MAX_WAIT_SCAN,
    ended_holders,
    new_run_values,
    new_waiting_values,
    running_values,
    succeeded_in,
    waiting_values,
)
from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.adapters.memory.task_records import MemoryTaskRecords
from jobsched.core.checks import CheckResult
from jobsched.core.names import RUNS_TABLE, RunsKeys
from jobsched.core.records import Waiting
from jobsched.core.run_records import (
    LOST_PREFIX,
    TASK_PREFIX,
    AttemptClaim,
    ParkedTask,
    Progress,
    Run,
    StaleAttempt,
    TaskState,
    lease_shard,
)
from jobsched.core.runs import (
    MAX_OUTPUT,
    RunMessage,
    RunStatus,
    instant_text,
    moment_text,
    scheduled_run_id,
    truncate,
)

Check = Callable[[Item], bool]


class MemoryRuns(MemoryTaskRecords):
    def __init__(self) -> None:
        self.table = MemoryTable(RUNS_TABLE)

    # ------------------------------------------------------------------------------ reads

    def get(self, job: str, run_id: str) -> Run | None:
        item = self.table.get(job, run_id)
        return Run.from_values(item) if item else None

    def history(
        self, job: str, *, limit: int = 50, newest_first: bool = True, between: tuple[str, str] | None = None
    ) -> list[Run]:
        first, last = between or (None, None)
        items = self.table.partition(job, first=first, last=last, limit=limit, newest_first=newest_first)
        return [Run.from_values(item) for item in items]

    def ended(self, runs: Mapping[tuple[str, str], int | None]) -> dict[tuple[str, str], int | None]:
        return ended_holders(runs, lambda keys, consistent: self.table.get_batch(keys, consistent=consistent))

    def scheduled_ids(self, job: str, first: str, last: str) -> set[str]:
        return {item[RunsKeys.SK] for item in self.table.partition(job, first=first, last=last)}

    def expired_leases(self, shard: int, now: datetime) -> Iterator[Run | ParkedTask]:
        for item in self.table.query_index(RunsKeys.LEASE_INDEX, shard, instant_text(now)):
            if item[RunsKeys.SK].startswith(TASK_PREFIX):  # a parked DAG task due for its heartbeat
                job, _, run_id = item[RunsKeys.PK].rpartition("#")
                yield ParkedTask(job, run_id, TaskState.from_values(item))
            else:
                yield Run.from_values(item)

    def past_deadline(self, shard: int, now: datetime) -> Iterator[Run]:
        yield from self._on_index(RunsKeys.DEADLINE_INDEX, shard, now)

    def wakeups(self, shard: int, until: datetime) -> Iterator[Run]:
        yield from self._on_index(RunsKeys.WAKE_INDEX, shard, until)

    def _on_index(self, index: str, shard: int, until: datetime) -> Iterator[Run]:
        for item in self.table.query_index(index, shard, instant_text(until)):
            yield Run.from_values(item)

    def succeeded_between(self, job: str, first: datetime, last: datetime) -> str | None:
        found = self.table.partition(job, first=scheduled_run_id(first), last=scheduled_run_id(last) + "\uffff")
        for values in list(reversed(found))[:MAX_WAIT_SCAN]:
            if succeeded_in(values, first, last):
                return str(values[RunsKeys.SK])
        return None

    # --------------------------------------------------------------------------- creation

    def create(
        self,
        message: RunMessage,
        *,
        status: RunStatus,
        now: datetime,
        retention: timedelta,
        lease_until: datetime | None = None,
        external: bool = False,
        reason: str | None = None,
        deadline: timedelta | None = None,
    ) -> Run | None:
        values = new_run_values(
            message,
            status=status,
            now=now,
            retention=retention,
            lease_until=lease_until,
            external=external,
            reason=reason,
            deadline=deadline,
        )
        if not self.table.put(values, if_absent=True):
            return None
        return Run.from_values(values)

    def wait(
        self, message: RunMessage, waiting: Waiting, *, now: datetime, retention: timedelta, deadline: timedelta | None
    ) -> Run:
        values = new_waiting_values(message, waiting, now=now, retention=retention, deadline=deadline)
        if self.table.put(values, if_absent=True):
            return Run.from_values(values)

        def change(item: Item | None) -> Item:
            waits = item is not None and item.get("status") in (RunStatus.SCHEDULED.value, RunStatus.WAITING.value)
            if item is None or not waits or int(item["attempt"]) != 1:
                raise ConditionFailed
            item |= waiting_values(message.job, message.run_id, waiting)
            item.setdefault("wait_started_at", instant_text(waiting.since))
            return item

        try:
            updated = self.table.update(message.job, message.run_id, change)
        except ConditionFailed:
            raise StaleAttempt(f"{message.job} {message.run_id}: no longer waiting") from None
        assert updated is not None
        return Run.from_values(updated)

    # -------------------------------------------------------------------------- transitions

    def claim_attempt(self, job: str, run_id: str, claim: AttemptClaim) -> Run:
        expected = claim.expected_status

        def allowed(item: Item) -> bool:
            if not _at(item, expected, claim.expected_attempt):
                return False
            lease = item.get("lease_until")
            if claim.require_expired_lease and not (lease and lease <= instant_text(claim.now)):
                return False
            return expected is not RunStatus.MISSED or str(item.get("reason") or "").startswith(LOST_PREFIX)

        sets: Item = {"status": RunStatus.RUNNING.value, "attempt": claim.attempt}
        sets |= running_values(job, run_id, claim.now, claim.lease_until, claim.external)
        if expected in (RunStatus.SCHEDULED, RunStatus.MISSED) and claim.lateness_ms is not None:
            sets["lateness_ms"] = claim.lateness_ms
        removes = ("next_attempt_at", RunsKeys.WAKE_SHARD, RunsKeys.WAKE_AT, "reason", "finished_at", "waiting_for")
        return self._transition(job, run_id, allowed, sets, removes + SLOT_WAIT)

    def to_retrying(
        self, job: str, run_id: str, *, attempt: int, now: datetime, next_attempt_at: datetime, error: str, wake: bool
    ) -> Run:
        sets: Item = {
            "status": RunStatus.RETRYING.value,
            "next_attempt_at": instant_text(next_attempt_at),
            "error": truncate(error),
        }
        if wake:
            sets |= {RunsKeys.WAKE_SHARD: lease_shard(job, run_id), RunsKeys.WAKE_AT: instant_text(next_attempt_at)}
        removes = (RunsKeys.LEASE_SHARD, RunsKeys.LEASE_EXPIRES_AT)
        return self._transition(job, run_id, _running_at(attempt), sets, removes)

    def reopen(
        self,
        job: str,
        run_id: str,
        *,
        expected_status: RunStatus,
        attempt: int,
        now: datetime,
        retention: timedelta,
        reason: str,
        downstream: bool = False,
        rerun_tasks: Sequence[str] | None = None,
    ) -> Run:
        sets: Item = {
            "status": RunStatus.RETRYING.value,
            "next_attempt_at": instant_text(now),
            RunsKeys.WAKE_SHARD: lease_shard(job, run_id),
            RunsKeys.WAKE_AT: instant_text(now),
            "reason": truncate(reason),
            "attempt_base": attempt,
            RunsKeys.TTL: int((now + retention).timestamp()),
        }
        if downstream:
            sets["downstream_attempt"] = attempt + 1
        removes: tuple[str, ...] = ("finished_at",) if downstream else ("finished_at", "downstream_attempt")
        if expected_status is RunStatus.SUCCEEDED:  # its work is done: a rerun starts afresh, not from its checkpoint
            removes += ("checkpoint",)
        if rerun_tasks is not None:  # a DAG re-execution: a new execution, which runs these tasks again
            sets["rerun_tasks"] = list(rerun_tasks)
            removes += ("execution_arn", "graph")  # recorded again, as the job's DAG is now, by its start
        else:
            removes += ("rerun_tasks",)
        return self._transition(job, run_id, lambda item: _at(item, expected_status, attempt), sets, removes)

    def finish(
        self,
        job: str,
        run_id: str,
        *,
        attempt: int,
        status: RunStatus,
        now: datetime,
        output: str | None = None,
        error: str | None = None,
        from_status: RunStatus = RunStatus.RUNNING,
        reason: str | None = None,
        checks: Sequence[CheckResult] = (),
    ) -> Run:
        sets: Item = {
            "status": status.value,
            "finished_at": moment_text(now),
            "error": truncate(error),
            "output": truncate(output, MAX_OUTPUT),
        }
        if checks:
            sets["checks"] = [check.as_values() for check in checks]
        if reason is not None:
            sets["reason"] = truncate(reason)
        removes = (
            RunsKeys.LEASE_SHARD,
            RunsKeys.LEASE_EXPIRES_AT,
            RunsKeys.WAKE_SHARD,
            RunsKeys.WAKE_AT,
            RunsKeys.DEADLINE_SHARD,
            RunsKeys.DEADLINE_AT,
            *SLOT_WAIT,
            *(() if checks else ("checks",)),
        )
        return self._transition(job, run_id, lambda item: _at(item, from_status, attempt), sets, removes)

    def end_lease(self, job: str, run_id: str, *, attempt: int, now: datetime) -> Run:
        return self._transition(job, run_id, _running_at(attempt), {"lease_until": instant_text(now)}, ())

    def heartbeat(
        self, job: str, run_id: str, *, attempt: int, lease_until: datetime | None, progress: Progress | None = None
    ) -> Run:
        sets: Item = progress.values() if progress is not None else {}
        if lease_until is not None:
            lease = instant_text(lease_until)
            sets |= {"lease_until": lease, RunsKeys.LEASE_EXPIRES_AT: lease}
        return self._transition(job, run_id, _running_at(attempt), sets, ())

    def started_work(self, job: str, run_id: str, *, attempt: int, work: str) -> Run:
        return self._transition(job, run_id, _running_at(attempt), {"work": truncate(work, MAX_OUTPUT)}, ())

    def deadline_reported(self, job: str, run_id: str) -> bool:
        return self._removed_if(job, run_id, lambda item: RunsKeys.DEADLINE_SHARD in item, RunsKeys.DEADLINE_SHARD)

    def note_anomaly(self, job: str, run_id: str, text: str) -> None:
        def change(item: Item | None) -> Item | None:
            return {**item, "anomaly": text[:200]} if item is not None else None

        self.table.update(job, run_id, change)

    def note_held(
        self, job: str, run_id: str, *, reason: str | None = None, slot_team: str | None = None, since: datetime
    ) -> bool:
        sets: Item = {} if reason is None else {"reason": reason}
        if slot_team is not None:
            sets |= {RunsKeys.SLOT_WAIT_TEAM: slot_team, RunsKeys.SLOT_WAIT_SINCE: instant_text(since)}
        try:
            self._transition(job, run_id, lambda item: _at(item, RunStatus.SCHEDULED, 1), sets, ())
        except StaleAttempt:
            return False
        return True

    def slot_waiters(self, team: str, *, limit: int) -> list[tuple[str, str]]:
        waiting = self.table.query_index(RunsKeys.SLOT_WAIT_INDEX, team, "\uffff")
        return [(str(item[RunsKeys.PK]), str(item[RunsKeys.SK])) for item in itertools.islice(waiting, limit)]

    def take_slot_waiter(self, job: str, run_id: str) -> Run | None:
        def waiting(item: Item) -> bool:
            return RunsKeys.SLOT_WAIT_TEAM in item and item.get("status") == RunStatus.SCHEDULED.value

        try:
            return self._transition(job, run_id, waiting, {}, SLOT_WAIT)
        except StaleAttempt:
            return None

    def clear_wake(self, job: str, run_id: str, *, attempt: int) -> bool:
        def waiting(item: Item) -> bool:
            return RunsKeys.WAKE_SHARD in item and int(item["attempt"]) == attempt

        return self._removed_if(job, run_id, waiting, RunsKeys.WAKE_SHARD)

    # ------------------------------------------------------------------------------ DAG tasks

    def set_workflow(self, job: str, run_id: str, *, graph: dict[str, Any], execution_arn: str) -> str:
        def change(item: Item | None) -> Item:
            if item is None:
                raise ConditionFailed
            item.setdefault("graph", graph)
            item.setdefault("execution_arn", execution_arn)
            return item

        try:
            updated = self.table.update(job, run_id, change)
        except ConditionFailed:
            raise StaleAttempt(f"{job} {run_id}: no such run") from None
        assert updated is not None
        return str(updated["execution_arn"])

    # ---------------------------------------------------------------------------- internals

    def _transition(self, job: str, run_id: str, allowed: Check, sets: Item, removes: tuple[str, ...]) -> Run:
        def change(item: Item | None) -> Item:
            if item is None or not allowed(item):
                raise ConditionFailed
            item |= sets
            for name in removes:
                item.pop(name, None)
            return item

        try:
            updated = self.table.update(job, run_id, change)
        except ConditionFailed:
            raise StaleAttempt(f"{job} {run_id}: the stored run is not in the expected state") from None
        assert updated is not None
        return Run.from_values(updated)

    def _removed_if(self, job: str, run_id: str, allowed: Check, *names: str) -> bool:
        """Take a run off a sparse index (both of its attributes) if ``allowed``; False if not."""
        pairs = {RunsKeys.DEADLINE_SHARD: RunsKeys.DEADLINE_AT, RunsKeys.WAKE_SHARD: RunsKeys.WAKE_AT}

        def change(item: Item | None) -> Item:
            if item is None or not allowed(item):
                raise ConditionFailed
            for name in names:
                item.pop(name, None)
                item.pop(pairs[name], None)
            return item

        try:
            self.table.update(job, run_id, change)
        except ConditionFailed:
            return False
        return True


SLOT_WAIT = (RunsKeys.SLOT_WAIT_TEAM, RunsKeys.SLOT_WAIT_SINCE)  # removed when the run starts or ends


def _at(item: Item, status: RunStatus, attempt: int) -> bool:
    return bool(item.get("status") == status.value and int(item.get("attempt", -1)) == attempt)


def _running_at(attempt: int) -> Check:
    return lambda item: _at(item, RunStatus.RUNNING, attempt)
