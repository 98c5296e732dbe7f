"""A DAG run's task records on the Runs table: one item per task (and map item) under the run's task partition,
its outputs under their own, each transition conditional on the task's status and attempt."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobsched.adapters.aws.dynamo import (
    every_item,
    from_item,
    to_item,
    to_values,
    update_if,
)
from jobsched.adapters.aws.runs_table import RunsTable, with_checks
from jobsched.adapters.items import (
    output_partition,
    task_partition,
)
from jobsched.core.checks import CheckResult
from jobsched.core.messages import TASK_TERMINAL
from jobsched.core.names import RunsKeys
from jobsched.core.run_records import TASK_PREFIX, TaskOutput, TaskState, lease_shard
from jobsched.core.runs import (
    MAX_OUTPUT,
    TaskStatus,
    instant_text,
    truncate,
)


class TaskRecordsStore(RunsTable):
    # ------------------------------------------------------------------------------ DAG tasks

    def tasks(self, job: str, run_id: str) -> dict[str, TaskState]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": RunsKeys.PK},
            "ExpressionAttributeValues": to_values({":pk": task_partition(job, run_id)}),
            "ConsistentRead": True,
        }
        tasks = (TaskState.from_values(values) for values in every_item(self.db, **request))
        return {task.name: task for task in tasks}

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
        """WAITING with the attempt's token, unless the task already is at this attempt or beyond.

        ``heartbeat_at``: the state has HeartbeatSeconds, so the task goes on the leases index and the
        heartbeat checker heartbeats it from then on while it waits for its dependencies."""
        update = "SET #status = :waiting, attempt = :attempt, #token = :token, parked_at = :now, #ttl = :ttl"
        values: dict[str, Any] = {
            ":waiting": TaskStatus.WAITING.value,
            ":attempt": attempt,
            ":token": token,
            ":now": instant_text(now),
            ":ttl": expires_at,
        }
        if heartbeat_at is not None:
            update += ", lease_shard = :shard, lease_expires_at = :beat"
            values |= {":shard": lease_shard(job, f"{run_id}/{task}"), ":beat": instant_text(heartbeat_at)}
        return self._task_update(job, run_id, task, update, "attribute_not_exists(#sk) OR attempt < :attempt", values)

    def parked_heartbeat_sent(self, job: str, run_id: str, task: str, *, attempt: int, next_at: datetime) -> bool:
        """Move a parked task's next heartbeat; False if it stopped waiting meanwhile."""
        return self._task_update(
            job,
            run_id,
            task,
            "SET lease_expires_at = :next",
            "attempt = :attempt AND #status = :waiting AND attribute_exists(lease_shard)",
            {":next": instant_text(next_at), ":attempt": attempt, ":waiting": TaskStatus.WAITING.value},
        )

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
        """-> RUNNING ``attempt``: from nothing, from this attempt parked, or from an earlier unfinished attempt
        (the state machine started a new one, so the old one is over). Only one claimer wins."""
        return self._task_update(
            job,
            run_id,
            task,
            "SET #status = :running, attempt = :attempt, #token = :token, started_at = :now, lease_until = :lease,"
            " #ttl = :ttl REMOVE #error, lease_shard, lease_expires_at",
            "attribute_not_exists(#sk) OR (attempt < :attempt AND NOT #status IN (:t0, :t1, :t2, :t3, :t4))"
            " OR (attempt = :attempt AND #status = :waiting)",
            {
                ":running": TaskStatus.RUNNING.value,
                ":waiting": TaskStatus.WAITING.value,
                ":attempt": attempt,
                ":token": token,
                ":now": instant_text(now),
                ":lease": instant_text(lease_until),
                ":ttl": expires_at,
                **_terminal_values(),
            },
        )

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
        """Record a task's outcome. With ``attempt``: only while that attempt runs (fencing: a late result
        of an attempt the state machine gave up on changes nothing). Without: any unfinished task (skips,
        cancels, the state machine's own timeouts). False if the task had already moved on."""
        values: dict[str, Any] = {
            ":status": status.value,
            ":now": instant_text(now),
            ":ttl": expires_at,
            ":error": truncate(error),
            ":output": truncate(output, MAX_OUTPUT),
        }
        update, removed = with_checks(
            "SET #status = :status, finished_at = :now, #error = :error, #output = :output, #ttl = :ttl", values, checks
        )
        if attempt is not None:
            values |= {":attempt": attempt, ":running": TaskStatus.RUNNING.value}
            condition = "attempt = :attempt AND #status = :running"
        else:
            values |= {":zero": 0, **_terminal_values()}
            update += ", attempt = if_not_exists(attempt, :zero)"
            condition = "attribute_not_exists(#sk) OR NOT #status IN (:t0, :t1, :t2, :t3, :t4)"
        update += " REMOVE lease_until, lease_shard, lease_expires_at" + removed
        return self._task_update(job, run_id, task, update, condition, values)

    def retry_task(self, job: str, run_id: str, task: str, *, attempt: int, now: datetime, error: str) -> bool:
        """RUNNING ``attempt`` -> RETRYING: the state machine retries after its backoff."""
        return self._task_update(
            job,
            run_id,
            task,
            "SET #status = :retrying, finished_at = :now, #error = :error REMOVE lease_until",
            "attempt = :attempt AND #status = :running",
            {
                ":retrying": TaskStatus.RETRYING.value,
                ":running": TaskStatus.RUNNING.value,
                ":attempt": attempt,
                ":now": instant_text(now),
                ":error": truncate(error),
            },
        )

    def reset_tasks(self, job: str, run_id: str, tasks: Sequence[str]) -> None:
        """Finished tasks -> PENDING at their attempt, for a re-execution (one still unfinished is left as is)."""
        for task in tasks:
            self._task_update(
                job,
                run_id,
                task,
                "SET #status = :pending REMOVE #token, finished_at, #error, #output, checks, lease_until, parked_at",
                "#status IN (:t0, :t1, :t2, :t3, :t4)",
                {":pending": TaskStatus.PENDING.value, **_terminal_values()},
            )

    def put_task_output(self, job: str, run_id: str, task: str, *, attempt: int, text: str, expires_at: int) -> bool:
        """The output of ``attempt``, unless a later attempt's is already there (a late, stale writer)."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=to_item({RunsKeys.PK: output_partition(job, run_id), RunsKeys.SK: task}),
            UpdateExpression="SET attempt = :attempt, #text = :text, #ttl = :ttl",
            ConditionExpression="attribute_not_exists(attempt) OR attempt <= :attempt",
            ExpressionAttributeNames={"#text": "text", "#ttl": RunsKeys.TTL},
            ExpressionAttributeValues=to_values({":attempt": attempt, ":text": text, ":ttl": expires_at}),
        )

    def task_outputs(self, job: str, run_id: str, tasks: Sequence[str]) -> dict[str, TaskOutput]:
        """The outputs of ``tasks`` (at most 100: a DAG's limit), read strongly: each was written before its task
        was recorded finished, so a reader that saw the finish sees the output."""
        found = self._read_keys(job, run_id, output_partition(job, run_id), tasks)
        return {values[RunsKeys.SK]: TaskOutput(int(values["attempt"]), values["text"]) for values in found}

    def task_states(self, job: str, run_id: str, names: Sequence[str]) -> dict[str, TaskState]:
        """Some task records (a map item's own and its upstreams'), read strongly by key: an item's message reads
        these, never the whole partition (which holds every item of every map)."""
        found = self._read_keys(job, run_id, task_partition(job, run_id), [TASK_PREFIX + name for name in names])
        return {state.name: state for state in map(TaskState.from_values, found)}

    def _read_keys(self, job: str, run_id: str, partition: str, names: Sequence[str]) -> list[dict[str, Any]]:
        """The items of ``partition`` with these sort keys (at most 100: one BatchGetItem), read strongly."""
        keys = [to_item({RunsKeys.PK: partition, RunsKeys.SK: name}) for name in dict.fromkeys(names)]
        found: list[dict[str, Any]] = []
        if not keys:
            return found
        request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
        for _ in range(10):  # unprocessed keys (throttling) are asked again
            response = self.db.batch_get_item(RequestItems=request)
            found.extend(from_item(item) for item in response.get("Responses", {}).get(self.table, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return found
        raise RecordsUnread(f"{job} {run_id}: records still unprocessed after 10 reads (throttled)")

    def _task_update(
        self, job: str, run_id: str, task: str, update: str, condition: str, values: dict[str, Any]
    ) -> bool:
        names = {
            "#sk": RunsKeys.SK,
            "#status": "status",
            "#token": "token",
            "#error": "error",
            "#output": "output",
            "#ttl": RunsKeys.TTL,
        }
        used = {key: value for key, value in names.items() if key in update or key in condition}
        return update_if(
            self.db,
            TableName=self.table,
            Key=to_item({RunsKeys.PK: task_partition(job, run_id), RunsKeys.SK: TASK_PREFIX + task}),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=used,
            ExpressionAttributeValues=to_values(values),
        )


class RecordsUnread(RuntimeError):
    """The table kept throttling the read: the task message fails and comes back (nothing was written)."""


def _terminal_values() -> dict[str, str]:
    return {f":t{index}": status.value for index, status in enumerate(sorted(TASK_TERMINAL))}
