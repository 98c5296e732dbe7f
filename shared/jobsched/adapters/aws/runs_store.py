"""The Runs table: one item per run, every transition conditional on status and attempt.

The attempt number is the fencing token. A result from attempt 2 cannot overwrite attempt 3, and a
second create of the same run id is refused. ``StaleAttempt`` names the conflict; the stored run is
never changed by a loser.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import (
    from_item,
    is_conditional_failure,
    to_item,
    to_values,
)
from jobsched.adapters.aws.run_indexes import SLOT_WAIT_ATTRIBUTES, RunIndexesStore
from jobsched.adapters.aws.run_queries import RunQueriesStore
from jobsched.adapters.aws.runs_table import with_checks
from jobsched.adapters.aws.task_records import TaskRecordsStore
from jobsched.adapters.items import (
    new_run_values,
    new_waiting_values,
    running_values,
    waiting_values,
)
from jobsched.core.checks import CheckResult
from jobsched.core.names import RunsKeys
from jobsched.core.records import Waiting
from jobsched.core.run_records import LOST_PREFIX, AttemptClaim, Progress, Run, lease_shard
from jobsched.core.runs import (
    MAX_OUTPUT,
    RunMessage,
    RunStatus,
    instant_text,
    moment_text,
    truncate,
)


class RunsStore(TaskRecordsStore, RunIndexesStore, RunQueriesStore):
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self.table = table_name
        self._client = dynamodb

    def get(self, job: str, run_id: str) -> Run | None:
        response = self.db.get_item(TableName=self.table, Key=self._key(job, run_id), ConsistentRead=True)
        item = response.get("Item")
        return Run.from_values(from_item(item)) if item else None

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
        """Create the run; None if it exists already (the caller reads what is there). ``deadline``: an
        unfinished run goes on the deadlines index until it finishes or its deadline is reported."""
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
        try:
            self.db.put_item(
                TableName=self.table,
                Item=to_item(values),
                ConditionExpression="attribute_not_exists(#run)",
                ExpressionAttributeNames={"#run": RunsKeys.SK},
            )
        except ClientError as error:
            if is_conditional_failure(error):
                return None
            raise
        return Run.from_values(values)

    def wait(
        self, message: RunMessage, waiting: Waiting, *, now: datetime, retention: timedelta, deadline: timedelta | None
    ) -> Run:
        """The run WAITING for its wait_for conditions: created so; moved there from SCHEDULED (created before
        its message came: an event's, an after trigger's, a manual run); or, already WAITING, what it waits for
        updated. StaleAttempt if it is past waiting (claimed, ended)."""
        created_values = new_waiting_values(message, waiting, now=now, retention=retention, deadline=deadline)
        try:
            self.db.put_item(
                TableName=self.table,
                Item=to_item(created_values),
                ConditionExpression="attribute_not_exists(#run)",
                ExpressionAttributeNames={"#run": RunsKeys.SK},
            )
            return Run.from_values(created_values)
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
        names = {"#status": "status"}
        values: dict[str, Any] = {
            ":scheduled": RunStatus.SCHEDULED.value,
            ":one": 1,
            ":since": instant_text(waiting.since),
        }
        sets = ["wait_started_at = if_not_exists(wait_started_at, :since)"]
        for index, (name, value) in enumerate(waiting_values(message.job, message.run_id, waiting).items()):
            names[f"#w{index}"] = name
            sets.append(f"#w{index} = :w{index}")
            values[f":w{index}"] = value
        values[":waiting"] = RunStatus.WAITING.value
        condition = "(#status = :scheduled OR #status = :waiting) AND attempt = :one"
        return self._transition(message.job, message.run_id, "SET " + ", ".join(sets), condition, names, values)

    # -------------------------------------------------------------------------- transitions

    def claim_attempt(self, job: str, run_id: str, claim: AttemptClaim) -> Run:
        """SCHEDULED/RETRYING (or RUNNING with an expired lease, after a crash) -> RUNNING ``claim.attempt``;
        also MISSED -> RUNNING for a run the audit recorded lost (``LOST_PREFIX``) whose message came after all."""
        names = {"#status": "status"}
        values = {
            ":expected": claim.expected_status.value,
            ":expected_attempt": claim.expected_attempt,
            ":running": RunStatus.RUNNING.value,
            ":attempt": claim.attempt,
        }
        running = running_values(job, run_id, claim.now, claim.lease_until, claim.external)
        sets = ["#status = :running", "attempt = :attempt"]
        for index, (name, value) in enumerate(running.items()):
            sets.append(f"{name} = :r{index}")
            values[f":r{index}"] = value
        condition = "#status = :expected AND attempt = :expected_attempt"
        if claim.require_expired_lease:
            condition += " AND lease_until <= :now"
            values[":now"] = instant_text(claim.now)
        if claim.expected_status is RunStatus.MISSED:
            condition += " AND begins_with(reason, :lost)"
            values[":lost"] = LOST_PREFIX
        if claim.expected_status in (RunStatus.SCHEDULED, RunStatus.MISSED) and claim.lateness_ms is not None:
            sets.append("lateness_ms = :lateness")
            values[":lateness"] = claim.lateness_ms
        # A run that waited for a slot loses its "waiting since ..." reason when it starts (a lost one, its
        # "lost: ..." reason and finish time).
        removed = "next_attempt_at, wake_shard, wake_at, reason, finished_at, waiting_for, " + SLOT_WAIT_ATTRIBUTES
        update = "SET " + ", ".join(sets) + " REMOVE " + removed
        return self._transition(job, run_id, update, condition, names, values)

    def to_retrying(
        self, job: str, run_id: str, *, attempt: int, now: datetime, next_attempt_at: datetime, error: str, wake: bool
    ) -> Run:
        """RUNNING ``attempt`` -> RETRYING; ``wake`` puts it on the wakeups index (delay > 15 minutes)."""
        names = {"#status": "status"}
        values: dict[str, Any] = {
            ":running": RunStatus.RUNNING.value,
            ":attempt": attempt,
            ":retrying": RunStatus.RETRYING.value,
            ":next": instant_text(next_attempt_at),
            ":error": truncate(error),
        }
        update = "SET #status = :retrying, next_attempt_at = :next, #error = :error"
        names["#error"] = "error"
        if wake:
            update += ", wake_shard = :wake_shard, wake_at = :next"
            values[":wake_shard"] = lease_shard(job, run_id)
        update += " REMOVE lease_shard, lease_expires_at"
        return self._transition(job, run_id, update, "#status = :running AND attempt = :attempt", names, values)

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
        """``from_status`` at ``attempt`` -> a terminal status. StaleAttempt if anything else is stored."""
        names = {"#status": "status", "#error": "error", "#output": "output", "#reason": "reason"}
        values = {
            ":from": from_status.value,
            ":attempt": attempt,
            ":status": status.value,
            ":finished": moment_text(now),
            ":error": truncate(error),
            ":output": truncate(output, MAX_OUTPUT),
        }
        sets = "SET #status = :status, finished_at = :finished, #error = :error, #output = :output"
        if reason is not None:
            sets += ", #reason = :reason"
            values[":reason"] = truncate(reason)
        else:
            names.pop("#reason")
        sets, removed = with_checks(sets, values, checks)
        update = sets + " REMOVE lease_shard, lease_expires_at, wake_shard, wake_at, deadline_shard, deadline_at, "
        update += SLOT_WAIT_ATTRIBUTES + removed
        return self._transition(job, run_id, update, "#status = :from AND attempt = :attempt", names, values)

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
        """A finished run (``expected_status`` at ``attempt``) -> RETRYING, due now, for a rerun: the next
        attempt's claim starts it, and the old attempt's late results stay refused (its attempt is past).
        It goes on the wakeups index, so the dispatcher sends the attempt if the rerun's message is lost;
        its expiry moves to ``now + retention`` so it outlives the rerun. ``downstream``: the rerun's
        attempt carries the jobs after it (``downstream_attempt``: their runs of the instant run again when
        this attempt finishes). ``rerun_tasks``: a DAG run's re-execution, a new execution that runs these tasks
        again and keeps the others' outcomes and outputs."""
        values: dict[str, Any] = {
            ":from": expected_status.value,
            ":attempt": attempt,
            ":retrying": RunStatus.RETRYING.value,
            ":now": instant_text(now),
            ":shard": lease_shard(job, run_id),
            ":reason": truncate(reason),
            ":base": attempt,
            ":expires": int((now + retention).timestamp()),
        }
        carry = ", downstream_attempt = :carry" if downstream else ""
        if downstream:
            values[":carry"] = attempt + 1
        update = (
            "SET #status = :retrying, next_attempt_at = :now, wake_shard = :shard, wake_at = :now,"
            f" #reason = :reason, attempt_base = :base, #expires = :expires{carry} REMOVE finished_at"
            + ("" if downstream else ", downstream_attempt")
            # A succeeded run's work is done: its rerun starts afresh, not from its checkpoint.
            + (", checkpoint" if expected_status is RunStatus.SUCCEEDED else "")
            # A re-execution's start records its execution and the job's DAG as it is now.
            + (", execution_arn, graph" if rerun_tasks is not None else ", rerun_tasks")
        )
        if rerun_tasks is not None:
            update = update.replace(" REMOVE ", ", rerun_tasks = :again REMOVE ", 1)
            values[":again"] = list(rerun_tasks)
        names = {"#status": "status", "#reason": "reason", "#expires": RunsKeys.TTL}
        return self._transition(job, run_id, update, "#status = :from AND attempt = :attempt", names, values)

    def end_lease(self, job: str, run_id: str, *, attempt: int, now: datetime) -> Run:
        """The worker holding RUNNING ``attempt`` is known dead (its process is gone): its lease ends now."""
        return self._transition(
            job,
            run_id,
            "SET lease_until = :now",
            "#status = :running AND attempt = :attempt",
            {"#status": "status"},
            {":now": instant_text(now), ":running": RunStatus.RUNNING.value, ":attempt": attempt},
        )

    def heartbeat(
        self, job: str, run_id: str, *, attempt: int, lease_until: datetime | None, progress: Progress | None = None
    ) -> Run:
        """The RUNNING ``attempt`` is alive: its lease moved to ``lease_until`` (None: a container's lease is
        its timeout, never extended) and what it reported (``progress``) kept on the run."""
        names = {"#status": "status"}
        values: dict[str, Any] = {":running": RunStatus.RUNNING.value, ":attempt": attempt}
        sets = []
        if lease_until is not None:
            values[":lease"] = instant_text(lease_until)
            sets += ["lease_until = :lease", "lease_expires_at = :lease"]
        for index, (name, value) in enumerate((progress.values() if progress is not None else {}).items()):
            names[f"#p{index}"], values[f":p{index}"] = name, value
            sets.append(f"#p{index} = :p{index}")
        update = "SET " + ", ".join(sets)
        return self._transition(job, run_id, update, "#status = :running AND attempt = :attempt", names, values)

    def started_work(self, job: str, run_id: str, *, attempt: int, work: str) -> Run:
        """What the RUNNING ``attempt`` started outside (a container's task), named on the run and kept after it
        ends (its logs are found by it)."""
        names = {"#status": "status"}
        values = {":running": RunStatus.RUNNING.value, ":attempt": attempt, ":work": truncate(work, MAX_OUTPUT)}
        update = "SET #work = :work"
        names["#work"] = "work"
        return self._transition(job, run_id, update, "#status = :running AND attempt = :attempt", names, values)

    def set_workflow(self, job: str, run_id: str, *, graph: dict[str, Any], execution_arn: str) -> str:
        """Record a DAG run's graph and execution; returns the execution recorded first (a redelivery
        keeps the name chosen by the first delivery, so it starts or finds the same execution)."""
        response = self.db.update_item(
            TableName=self.table,
            Key=self._key(job, run_id),
            UpdateExpression=(
                "SET graph = if_not_exists(graph, :graph), execution_arn = if_not_exists(execution_arn, :arn)"
            ),
            ConditionExpression="attribute_exists(#run)",
            ExpressionAttributeNames={"#run": RunsKeys.SK},
            ExpressionAttributeValues=to_values({":graph": graph, ":arn": execution_arn}),
            ReturnValues="ALL_NEW",
        )
        return str(response["Attributes"]["execution_arn"]["S"])
