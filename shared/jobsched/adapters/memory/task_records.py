"""A DAG run's task records in memory: one item per task (and map item) under the run's task partition, its
outputs under their own, each transition conditional on the task's status and attempt, as in
``aws.task_records`` (the contract suite runs both)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from jobsched.adapters.items import output_partition, task_partition
from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.core.checks import CheckResult
from jobsched.core.messages import TASK_TERMINAL
from jobsched.core.names import RunsKeys
from jobsched.core.run_records import TASK_PREFIX, TaskOutput, TaskState, lease_shard
from jobsched.core.runs import MAX_OUTPUT, TaskStatus, instant_text, truncate


class MemoryTaskRecords:
    table: MemoryTable

    def tasks(self, job: str, run_id: str) -> dict[str, TaskState]:
        found = (TaskState.from_values(item) for item in self.table.partition(task_partition(job, run_id)))
        return {task.name: task for task in found}

    def park_task(
        self,
        job: str,
        run_id: str,
        task: str,
        *,
        attempt: int,
        token: str,
        now: datetime,
        expires_at: int,
        heartbeat_at: datetime | None = None,
    ) -> bool:
        sets: Item = {
            "status": TaskStatus.WAITING.value,
            "attempt": attempt,
            "token": token,
            "parked_at": instant_text(now),
            RunsKeys.TTL: expires_at,
        }
        if heartbeat_at is not None:
            sets |= {
                RunsKeys.LEASE_SHARD: lease_shard(job, f"{run_id}/{task}"),
                RunsKeys.LEASE_EXPIRES_AT: instant_text(heartbeat_at),
            }
        return self._task_update(job, run_id, task, lambda item: item is None or int(item["attempt"]) < attempt, sets)

    def parked_heartbeat_sent(self, job: str, run_id: str, task: str, *, attempt: int, next_at: datetime) -> bool:
        def waiting(item: Item | None) -> bool:
            return item is not None and _task_at(item, TaskStatus.WAITING, attempt) and RunsKeys.LEASE_SHARD in item

        return self._task_update(job, run_id, task, waiting, {RunsKeys.LEASE_EXPIRES_AT: instant_text(next_at)})

    def claim_task(
        self,
        job: str,
        run_id: str,
        task: str,
        *,
        attempt: int,
        token: str,
        now: datetime,
        lease_until: datetime,
        expires_at: int,
    ) -> bool:
        def claimable(item: Item | None) -> bool:
            if item is None:
                return True
            current = int(item["attempt"])
            unfinished = TaskStatus(item["status"]) not in TASK_TERMINAL
            return (current < attempt and unfinished) or _task_at(item, TaskStatus.WAITING, attempt)

        sets: Item = {
            "status": TaskStatus.RUNNING.value,
            "attempt": attempt,
            "token": token,
            "started_at": instant_text(now),
            "lease_until": instant_text(lease_until),
            RunsKeys.TTL: expires_at,
        }
        removes = ("error", RunsKeys.LEASE_SHARD, RunsKeys.LEASE_EXPIRES_AT)
        return self._task_update(job, run_id, task, claimable, sets, removes)

    def finish_task(
        self,
        job: str,
        run_id: str,
        task: str,
        *,
        status: TaskStatus,
        now: datetime,
        expires_at: int,
        attempt: int | None = None,
        output: str | None = None,
        error: str | None = None,
        checks: Sequence[CheckResult] = (),
    ) -> bool:
        def unfinished(item: Item | None) -> bool:
            if attempt is not None:
                return item is not None and _task_at(item, TaskStatus.RUNNING, attempt)
            return item is None or TaskStatus(item["status"]) not in TASK_TERMINAL

        sets: Item = {
            "status": status.value,
            "finished_at": instant_text(now),
            "error": truncate(error),
            "output": truncate(output, MAX_OUTPUT),
            RunsKeys.TTL: expires_at,
        }
        if checks:
            sets["checks"] = [check.as_values() for check in checks]
        removes = ("lease_until", RunsKeys.LEASE_SHARD, RunsKeys.LEASE_EXPIRES_AT, *(() if checks else ("checks",)))
        return self._task_update(job, run_id, task, unfinished, sets, removes, default_attempt=0)

    def retry_task(self, job: str, run_id: str, task: str, *, attempt: int, now: datetime, error: str) -> bool:
        def running(item: Item | None) -> bool:
            return item is not None and _task_at(item, TaskStatus.RUNNING, attempt)

        sets: Item = {"status": TaskStatus.RETRYING.value, "finished_at": instant_text(now), "error": truncate(error)}
        return self._task_update(job, run_id, task, running, sets, ("lease_until",))

    def reset_tasks(self, job: str, run_id: str, tasks: Sequence[str]) -> None:
        """Finished tasks -> PENDING at their attempt, for a re-execution (one still unfinished is left as is)."""

        def finished(item: Item | None) -> bool:
            return item is not None and TaskStatus(item["status"]) in TASK_TERMINAL

        for task in tasks:
            sets: Item = {"status": TaskStatus.PENDING.value}
            removes = ("token", "finished_at", "error", "output", "checks", "lease_until", "parked_at")
            self._task_update(job, run_id, task, finished, sets, removes)

    def put_task_output(self, job: str, run_id: str, task: str, *, attempt: int, text: str, expires_at: int) -> bool:
        """The output of ``attempt``, unless a later attempt's is already there (a late, stale writer)."""

        def change(item: Item | None) -> Item:
            if item is not None and int(item["attempt"]) > attempt:
                raise ConditionFailed
            pk = output_partition(job, run_id)
            return {RunsKeys.PK: pk, RunsKeys.SK: task, "attempt": attempt, "text": text, RunsKeys.TTL: expires_at}

        try:
            self.table.update(output_partition(job, run_id), task, change)
        except ConditionFailed:
            return False
        return True

    def task_states(self, job: str, run_id: str, names: Sequence[str]) -> dict[str, TaskState]:
        keys = [(task_partition(job, run_id), TASK_PREFIX + name) for name in dict.fromkeys(names)]
        found = (TaskState.from_values(item) for item in (self.table.get_batch(keys) if keys else []))
        return {task.name: task for task in found}

    def task_outputs(self, job: str, run_id: str, tasks: Sequence[str]) -> dict[str, TaskOutput]:
        keys = [(output_partition(job, run_id), task) for task in dict.fromkeys(tasks)]
        items = self.table.get_batch(keys) if keys else []
        return {item[RunsKeys.SK]: TaskOutput(int(item["attempt"]), item["text"]) for item in items}

    def _task_update(
        self,
        job: str,
        run_id: str,
        task: str,
        allowed: Callable[[Item | None], bool],
        sets: Item,
        removes: tuple[str, ...] = (),
        *,
        default_attempt: int | None = None,
    ) -> bool:
        """One task item's conditional update; False (not an exception) when ``allowed`` refuses."""
        pk, sk = task_partition(job, run_id), TASK_PREFIX + task

        def change(item: Item | None) -> Item:
            if not allowed(item):
                raise ConditionFailed
            updated: Item = dict(item or {RunsKeys.PK: pk, RunsKeys.SK: sk})
            if default_attempt is not None:
                updated.setdefault("attempt", default_attempt)
            updated |= {name: value for name, value in sets.items() if value is not None}
            for name in (*removes, *(name for name, value in sets.items() if value is None)):
                updated.pop(name, None)
            return updated

        try:
            self.table.update(pk, sk, change)
        except ConditionFailed:
            return False
        return True


def _task_at(item: Item, status: TaskStatus, attempt: int) -> bool:
    return bool(item.get("status") == status.value and int(item.get("attempt", -1)) == attempt)
