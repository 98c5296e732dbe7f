"""DAG runs: start one execution per run, execute each task as a run's attempt is executed (``attempts``),
report to Step Functions.

Order of writes per task message, and what a crash between them leaves (the message comes back):
1. park (WAITING + token) when dependencies are unfinished; then dependencies are read again, so a
   dependency that finished meanwhile is never missed (it reads our WAITING after its own write);
2. claim (conditional -> RUNNING attempt): one claimer per attempt;
3. execute the target (idempotency key: run id + task + attempt);
4. record the outcome, conditional on (RUNNING, attempt): a late result of an old attempt is refused;
5. report the outcome to the task token; a redelivered message finds the outcome recorded and reports it
   again (Step Functions ignores a second report of a finished token);
6. advance: release parked tasks whose dependencies have all finished; finish the run when every task has.
Step Functions owns retries, backoff and timeouts of each task; the run record owns what happened.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.bounds import UnreadableJson
from jobsched.core.checks import CheckResult
from jobsched.core.errors import WorkflowsNotConfigured
from jobsched.core.item_lists import MAX_ITEMS_OBJECT_BYTES, BadItems, count_items, items_object
from jobsched.core.messages import TASK_TERMINAL, DagTaskFailure, DagTaskMessage
from jobsched.core.outcome import Outcome
from jobsched.core.records import ParkedTask, Run, RunContext, StaleAttempt, StoredJob, TargetResult, TaskState
from jobsched.core.references import (
    ITEM,
    MAX_TASK_OUTPUT,
    RUN_PAYLOAD,
    BadReference,
    MissingValue,
    has_reference,
    parse_output,
    referenced_tasks,
)
from jobsched.core.references import render as render_references
from jobsched.core.runs import LEASE_MARGIN, TERMINAL, RunMessage, RunStatus, TaskStatus, instant_text
from jobsched.core.spec import MAX_MAP_ITEMS, MAX_PAYLOAD_BYTES, ApprovalTarget, CallbackTarget, DagTask, JobSpec
from jobsched.core.templates import render_key
from jobsched.core.waits import key_zone
from jobsched.dag.definition import (
    TASK_FAILED,
    TASK_LOST,
    TIMEOUT_ERRORS,
    Decision,
    Graph,
    TaskNode,
    attempt_timeout,
    decide,
    execution_input,
    graph_from_values,
    graph_of,
    graph_to_values,
    run_result,
    task_budget,
    task_retry,
)
from jobsched.paging.escalation_events import Alerts
from jobsched.pipeline.attempts import Attempts, AttemptSteps, Executed, Held, judge
from jobsched.pipeline.waiting import Met, Refused, Waits
from jobsched.ports import DataChecksPort, JobsPort, TaskRunsPort, WorkflowsPort, WorkQueuesPort
from jobsched.tenancy.ownership import NotOwned
from jobsched.watch.breaker import breaker_owner

TASK_STEPS = AttemptSteps(claimed="claim_task", executed="execute_task")
TASK_FAILED_PERMANENTLY = "jobsched.TaskFailedPermanently"  # not retried: the request itself is wrong
TASK_UNKNOWN = "jobsched.UnknownTask"
# Distributed maps' objects read at once in one worker process (its batch runs on threads): each may hold up to
# MAX_ITEMS_OBJECT_BYTES and its text, so the worker's memory, shared by every team's runs, stays bounded.
OBJECT_READS = threading.BoundedSemaphore(2)
NO_ITEM = object()  # a task's payload is resolved without an item (only a map task's items have one)
MAX_RUN_CHECKS = 20  # failed task checks copied to a DAG run's record (each task's own are on its item)
# A parked task is heartbeated this long before its HeartbeatSeconds would run out (the checker ticks each
# minute; the spec requires heartbeat_timeout >= 3 minutes for tasks with dependencies).
PARKED_HEARTBEAT_LEAD = timedelta(minutes=2)


@dataclass
class DagRuns:
    jobs: JobsPort
    runs: TaskRunsPort  # the run store with DAG task records
    queues: WorkQueuesPort
    workflows: WorkflowsPort
    attempts: Attempts  # the circuit, the claim, the execution: as for a run
    alerts: Alerts
    clock: Callable[[], datetime]
    after_step: Callable[[str], None] = field(default=lambda step: None)  # crash-injection hook (tests)
    waits: Waits | None = None  # tasks with wait_for
    objects: DataChecksPort | None = None  # the team's objects distributed maps run over

    # ------------------------------------------------------------------------------ start

    def start(self, message: RunMessage, stored: StoredJob, run: Run) -> Outcome:
        """The run is claimed: record its graph and execution name, then start the execution.

        The name is the run id and a random part, recorded before the start: nobody can start an execution
        of that name ahead of the run, and a redelivery starts (or finds) the same one."""
        spec = stored.spec
        assert spec.dag is not None
        bases = [0] * len(spec.dag.tasks)
        if run.rerun_tasks is not None:  # a re-execution: its tasks to run again go back to PENDING first
            bases = self._prepare_rerun(run, spec, set(run.rerun_tasks))
        execution = self.runs.set_workflow(
            run.job,
            run.run_id,
            graph=graph_to_values(graph_of(spec.dag)),
            execution_arn=self.workflows.execution_arn(run.job, f"{run.run_id}-{secrets.token_hex(8)}"),
        )
        self.after_step("workflow")
        self.workflows.start(
            execution,
            execution_input(
                job=run.job,
                team=run.team,
                run_id=run.run_id,
                scheduled_at=message.scheduled_at,
                correlation_id=run.correlation_id,
                bases=bases,
            ),
        )
        self.after_step("execution")
        return Outcome("pending", f"execution {run.run_id} started", run=run)

    def _prepare_rerun(self, run: Run, spec: JobSpec, again: set[str]) -> list[int]:
        """Each task's attempt base for the new execution: a task to run again continues after its last attempt
        (base = that attempt, so its first is the next one); a kept task's message names its last attempt (base
        = attempt - 1), finds it SUCCEEDED and reports that, with its output kept. Tasks to run again are reset
        to PENDING first, so a downstream task never decides on their old outcome."""
        assert spec.dag is not None
        tasks = self.runs.tasks(run.job, run.run_id)
        # A map task's items share its base: past every attempt of the task and of each of its items.
        owner = {name: name.split("[", 1)[0] for name in tasks}
        self.runs.reset_tasks(run.job, run.run_id, sorted(name for name in tasks if owner[name] in again))
        self.after_step("reset_tasks")
        bases = []
        for task in spec.dag.tasks:
            attempts = [state.attempt for name, state in tasks.items() if owner[name] == task.name]
            attempt = max(attempts, default=0)
            bases.append(attempt if task.name in again else max(0, attempt - 1))
        return bases

    # ------------------------------------------------------------------------------ tasks

    def process_task(self, message: DagTaskMessage) -> Outcome:
        now = self.clock()
        stored = self.jobs.get(message.job, consistent=False)
        run = self.runs.get(message.job, message.run_id)
        priority = stored.spec.priority if stored else "normal"
        if run is None or run.graph is None:
            return Outcome("superseded", "no such DAG run", priority=priority)
        if run.status in TERMINAL:
            return Outcome("duplicate", f"run is {run.status.value}", run=run, priority=priority)
        graph = graph_from_values(run.graph)
        task = _task(stored.spec if stored else None, message.task)
        if stored is None or task is None or message.task not in graph:
            self.workflows.fail(message.token, TASK_UNKNOWN, f"task {message.task} is not in the job any more")
            return Outcome("failed", f"unknown task {message.task}", run=run, priority=priority)

        tasks = self._records_for(message, run, task)
        if message.map_done:
            return self._judge_map(message, stored, run, task, tasks, priority)
        mine = tasks.get(message.record)
        if mine is not None and mine.attempt > message.attempt:
            return Outcome("duplicate", f"task is at attempt {mine.attempt}", run=run, priority=priority)
        if mine is not None and mine.attempt == message.attempt and mine.status is not TaskStatus.WAITING:
            return self._again(message, stored, run, graph, mine, now)
        if message.item_index is not None:  # one item of a map task that started: its dependencies are done
            # The upstream outputs it reads were final before its map started: the read above serves.
            return self._execute_resolved(message, stored, run, task, now, priority, item=message.item, states=tasks)

        decision = self._decide(message, stored, run, graph[message.task], task, mine, tasks, now)
        if decision == "wait":
            return Outcome("waiting", "parked until its dependencies finish", run=run, priority=priority)
        if decision == "skip":
            self._skip_task(message, stored, run, now)
            return Outcome("skipped", f"task {message.task} skipped", run=run, priority=priority)
        return self._start(message, stored, run, graph[message.task], task, now, priority)

    def _records_for(self, message: DagTaskMessage, run: Run, task: DagTask) -> dict[str, TaskState]:
        """The task records a message needs. One item of a map reads only its own and its payload's upstreams,
        never the partition that holds every item (that read, once per item, grows with the square of the list)."""
        if message.item_index is None or message.map_done:
            return self.runs.tasks(run.job, run.run_id)
        upstream = referenced_tasks(getattr(task.target, "payload", None))
        return self.runs.task_states(run.job, run.run_id, [message.record, *sorted(upstream)])

    def _start(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        node: TaskNode,
        task: DagTask,
        now: datetime,
        priority: str,
    ) -> Outcome:
        """A task whose dependencies allow it to run: its data waited for, its inputs resolved, then executed."""
        if task.wait_for:
            held = self._wait_for_data(message, stored, run, node, task, now, priority)
            if held is not None:
                return held
        if task.map is not None:
            return self._resolve_map(message, stored, run, task, now, priority)
        return self._execute_resolved(message, stored, run, task, now, priority)

    def _execute_resolved(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        task: DagTask,
        now: datetime,
        priority: str,
        *,
        item: Any = NO_ITEM,
        states: dict[str, TaskState] | None = None,
    ) -> Outcome:
        """Execute the task (or one map item) with its payload's references resolved; fail it, unretried, when
        they cannot be."""
        inputs = self._resolved(run, getattr(task.target, "payload", None), item=item, states=states)
        if isinstance(inputs, Unresolved):
            return self._fail_unclaimed(message, stored, run, task, now, priority, inputs.error)
        return self._execute(message, stored, run, task, now, priority, payload=inputs)

    def _resolved(
        self, run: Run, value: Any, *, item: Any = NO_ITEM, states: dict[str, TaskState] | None = None
    ) -> Any:
        """``value`` (a payload, a map's list) with its references resolved from upstream outputs (and a map
        item's value); None when it has none; Unresolved saying why not. Only an upstream that SUCCEEDED has an
        output to read, and only the one its final attempt wrote. ``states``: the run's tasks when they were just
        read and cannot have changed since (otherwise they are read here)."""
        if value is None or not has_reference(value):
            return None
        names = referenced_tasks(value)
        if states is None:
            states = self.runs.tasks(run.job, run.run_id) if names else {}
        succeeded = {
            name: states[name].attempt
            for name in names
            if name in states and states[name].status is TaskStatus.SUCCEEDED
        }
        stored = self.runs.task_outputs(run.job, run.run_id, list(succeeded)) if succeeded else {}
        try:
            outputs = {
                name: parse_output(found.text) for name, found in stored.items() if found.attempt == succeeded.get(name)
            }
        except UnreadableJson as unreadable:
            return Unresolved(f"an upstream output cannot be read: {unreadable}")
        if item is not NO_ITEM:
            outputs[ITEM] = item
        outputs[RUN_PAYLOAD] = run.payload  # what a manual trigger passed ({{ run.payload... }})
        try:
            rendered = render_references(value, outputs)
        except (MissingValue, BadReference) as missing:  # a job stored before #32 may hold any {{ ... }} text
            return Unresolved(f"{missing}")
        size = len(json.dumps(rendered, separators=(",", ":")).encode())
        if size > MAX_PAYLOAD_BYTES:
            return Unresolved(f"payload of {size} bytes with its references resolved; at most {MAX_PAYLOAD_BYTES}")
        return rendered

    # ------------------------------------------------------------------------------ map tasks

    def _resolve_map(
        self, message: DagTaskMessage, stored: StoredJob, run: Run, task: DagTask, now: datetime, priority: str
    ) -> Outcome:
        """A map task whose dependencies are done: its list, read from the upstream output, is the answer to its
        first state; the Map state then sends one message per item. The task stays RUNNING until it is judged."""
        assert task.map is not None
        answer = self._inline_list(run, task) if task.map.mode == "inline" else self._items_object(run, stored, task)
        if isinstance(answer, Unresolved):
            return self._fail_unclaimed(message, stored, run, task, now, priority, answer.error)
        claimed = self._claim_task(
            message, stored, run, lease_until=now + task_budget(stored.spec, task), now=now, priority=priority
        )
        if isinstance(claimed, Outcome):
            return claimed
        self.workflows.succeed(message.token, answer)
        count = len(answer["items"]) if "items" in answer else answer["count"]
        return Outcome("pending", f"task {task.name}: {count} items", run=run, priority=priority)

    def _inline_list(self, run: Run, task: DagTask) -> dict[str, Any] | Unresolved:
        """An inline map's answer: the upstream's list itself."""
        assert task.map is not None
        over = task.map.over.strip()
        items = self._resolved(run, over)
        if isinstance(items, Unresolved):
            return items
        if not isinstance(items, list):
            return Unresolved(f"map over {over}: {type(items).__name__ if items is not None else 'null'}, not a list")
        if len(items) > MAX_MAP_ITEMS:
            return Unresolved(f"map over {over}: {len(items)} items; at most {MAX_MAP_ITEMS}")
        return {"items": items}

    def _items_object(self, run: Run, stored: StoredJob, task: DagTask) -> dict[str, Any] | Unresolved:
        """A distributed map's answer: the object Step Functions reads and how many items it holds. The object is
        read once here, as the team, on a bucket checked to be the team's, and every item is checked."""
        assert task.map is not None
        over = task.map.over.strip()
        named = task.map.named_object
        if named is not None:
            bucket, key = named[0], render_key(named[1], run.scheduled_at, key_zone(stored.spec))
        else:
            value = self._resolved(run, over)
            if isinstance(value, Unresolved):
                return value
            try:
                bucket, key = items_object(value)
            except BadItems as bad:
                return Unresolved(f"map over {over}: {bad}")
        if self.objects is None:
            raise WorkflowsNotConfigured("this worker reads no S3 objects: distributed maps cannot run")
        place = f"map over s3://{bucket}/{key}"
        try:
            with OBJECT_READS:
                data = self.objects.read_object(run.team, bucket, key, max_bytes=MAX_ITEMS_OBJECT_BYTES)
                if data is None:
                    return Unresolved(f"{place}: no such object")
                count = count_items(data, task.map.items_format)
        except (NotOwned, BadItems) as refused:
            return Unresolved(f"{place}: {refused}")
        return {"bucket": bucket, "key": key, "count": count}

    def _judge_map(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        task: DagTask,
        tasks: dict[str, TaskState],
        priority: str,
    ) -> Outcome:
        """Every item has ended: the map task succeeds if no more than its tolerated share of items failed.
        The Map state's results say which (an item caught after its last failure or time-out is {"failed": true})."""
        assert task.map is not None
        mine = tasks.get(task.name)
        if mine is None or mine.status is not TaskStatus.RUNNING:
            if mine is not None and mine.status in TASK_TERMINAL:
                self.workflows.succeed(message.token, {"task": task.name, "status": mine.status.value})
            return Outcome("duplicate", f"map task {task.name} already judged", run=run, priority=priority)
        results = message.results or []
        failed = sum(1 for result in results if isinstance(result, dict) and result.get("failed"))
        share = 100.0 * failed / len(results) if results else 0.0
        summary = json.dumps({"items": len(results), "succeeded": len(results) - failed, "failed": failed})
        now = self.clock()
        for name, state in tasks.items():  # items the state machine timed out never reported: they end here
            if name.startswith(f"{task.name}[") and state.status not in TASK_TERMINAL:
                self.runs.finish_task(
                    run.job,
                    run.run_id,
                    name,
                    status=TaskStatus.TIMED_OUT,
                    now=now,
                    expires_at=_expiry(run, stored.spec),
                )
        if share <= task.map.tolerated_failure_percentage:
            result = TargetResult("succeeded", output=summary)
        else:
            tolerated = f"{task.map.tolerated_failure_percentage:g}%"
            error = f"{failed} of {len(results)} items failed ({share:.0f}%; tolerated {tolerated})"
            result = TargetResult("failed", output=summary, error=error, retryable=False)
        return self._record(run, stored, task, mine.attempt, message.token, result, priority)

    def _wait_for_data(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        node: TaskNode,
        task: DagTask,
        now: datetime,
        priority: str,
    ) -> Outcome | None:
        """A task whose dependencies are done and whose wait_for is not met: parked with its token (as for its
        dependencies) and polled, woken by the events that may meet it; at its wait's end, failed or skipped.
        Its wait counts from when its last dependency finished, or when it was first held."""
        if self.waits is None:
            raise WorkflowsNotConfigured("this worker has no data checks configured: tasks with wait_for cannot run")
        tasks = self.runs.tasks(run.job, run.run_id)
        mine = tasks.get(message.task)
        held_since = [mine.parked_at] if mine is not None and mine.parked_at is not None else []
        finished = [tasks[name].finished_at for name in node.depends_on if name in tasks]
        since = max([moment for moment in [*held_since, *finished] if moment is not None], default=now)
        verdict = self.waits.before_task(message, stored.spec, run, task, mine, since=since, now=now)
        if verdict is None or isinstance(verdict, Met):
            return None
        if verdict == "skip":
            self._skip_task(message, stored, run, now, reason=f"its wait for data timed out ({task.wait or 'wait'})")
            return Outcome("skipped", f"task {message.task} skipped: its wait timed out", run=run, priority=priority)
        if isinstance(verdict, Refused):
            return self._fail_unclaimed(message, stored, run, task, now, priority, verdict.reason)
        if (mine is None or mine.status is not TaskStatus.WAITING) and verdict.wait is not None:
            self._park(message, stored, run, task, now)
        return replace(verdict, run=run, priority=priority)

    def _park(self, message: DagTaskMessage, stored: StoredJob, run: Run, task: DagTask, now: datetime) -> None:
        """WAITING with its token (its state keeps running): heartbeated meanwhile if the task has heartbeats."""
        self.runs.park_task(
            run.job,
            run.run_id,
            message.task,
            attempt=message.attempt,
            token=message.token,
            now=now,
            expires_at=_expiry(run, stored.spec),
            heartbeat_at=now + task.heartbeat_timeout - PARKED_HEARTBEAT_LEAD if task.heartbeat_timeout else None,
        )

    def _fail_unclaimed(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        task: DagTask,
        now: datetime,
        priority: str,
        error: str,
    ) -> Outcome:
        """Fail a task that never started (its wait timed out, or it may not wait on what it names): claimed, so
        one delivery fails it, then recorded as a failure no retry can mend."""
        claimed = self._claim_task(message, stored, run, lease_until=now + LEASE_MARGIN, now=now, priority=priority)
        if isinstance(claimed, Outcome):
            return claimed
        failed = TargetResult("failed", error=error, retryable=False)
        return self._record(run, stored, task, message.attempt, message.token, failed, priority, record=message.record)

    def _claim_task(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        *,
        lease_until: datetime,
        now: datetime,
        priority: str,
    ) -> Run | Outcome:
        """This attempt of the task, claimed by this call (one claimer per attempt), or why not."""
        claimed = self.runs.claim_task(
            run.job,
            run.run_id,
            message.record,
            attempt=message.attempt,
            token=message.token,
            now=now,
            lease_until=lease_until,
            expires_at=_expiry(run, stored.spec),
        )
        if not claimed:
            return Outcome("duplicate", "another worker claimed this attempt", run=run, priority=priority)
        return run

    def _execute(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        task: DagTask,
        now: datetime,
        priority: str,
        *,
        payload: Any = None,
    ) -> Outcome:
        """Claim this attempt of the task (one claimer per attempt), execute it, record the result."""

        def claim() -> Run | Outcome:
            lease_until = now + attempt_timeout(task) + LEASE_MARGIN
            return self._claim_task(message, stored, run, lease_until=lease_until, now=now, priority=priority)

        def context(_: Run) -> RunContext:
            return RunContext(
                job=run.job,
                team=run.team,
                run_id=run.run_id,
                attempt=message.attempt,
                scheduled_at=message.scheduled_at,
                correlation_id=run.correlation_id,
                task=message.record,  # an item's own idempotency key: run id + task[index] + attempt
                trigger=run.trigger,
                payload_override=payload,
            )

        attempt = self.attempts.execute(
            task.target,
            breaker_owner(stored.spec),
            now,
            claim=claim,
            context=context,
            steps=TASK_STEPS,
            checks=task.checks,
        )
        if isinstance(attempt, Held):
            self.attempts.breakers.holding(attempt.breaker, f"{run.job}/{run.run_id}#{message.record}")
            return replace(attempt.outcome, run=run, priority=priority)
        if not isinstance(attempt, Executed):
            return attempt
        if attempt.result.outcome == "pending" and isinstance(task.target, ApprovalTarget):
            self.alerts.approval_requested(run, message.task, task.target.message)
            return Outcome("pending", f"task {message.task} waits for approval", run=run, priority=priority)
        if attempt.result.outcome == "pending":
            return Outcome("pending", f"task {message.task} waits for its callback", run=run, priority=priority)
        return self._record(
            run, stored, task, message.attempt, message.token, attempt.result, priority, record=message.record
        )

    def _decide(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        node: TaskNode,
        task: DagTask,
        mine: TaskState | None,
        tasks: dict[str, TaskState],
        now: datetime,
    ) -> Decision:
        """Run, skip, or wait for the dependencies (parked with the token until they finish)."""
        decision = decide(node, _statuses(tasks))
        if decision != "wait":
            return decision
        if mine is None or mine.status is not TaskStatus.WAITING:
            self._park(message, stored, run, task, now)
            self.after_step("park")
        # Read again after parking: a dependency finishing in between either sees our WAITING item
        # (and releases us) or finished before this read (and we go on now). Never neither.
        return decide(node, _statuses(self.runs.tasks(run.job, run.run_id)))

    def _skip_task(
        self,
        message: DagTaskMessage,
        stored: StoredJob,
        run: Run,
        now: datetime,
        *,
        reason: str = "an upstream task did not succeed (trigger_rule all_success)",
    ) -> None:
        self.runs.finish_task(
            run.job,
            run.run_id,
            message.task,
            status=TaskStatus.SKIPPED,
            now=now,
            expires_at=_expiry(run, stored.spec),
            error=reason,
        )
        self.workflows.succeed(message.token, {"task": message.task, "status": TaskStatus.SKIPPED.value})
        self.advance(run, stored)

    def task_failed(self, notice: DagTaskFailure) -> Outcome:
        """The state machine gave up on a task (its last attempt failed or timed out): record it, go on."""
        stored = self.jobs.get(notice.job, consistent=False)
        run = self.runs.get(notice.job, notice.run_id)
        if run is None or stored is None or run.status in TERMINAL:
            return Outcome("duplicate", "run finished")
        if run.graph is None or (notice.execution is not None and notice.execution != run.execution_arn):
            # The run was re-executed since: this report is about a task of the execution before.
            return Outcome("superseded", f"a report of {notice.execution}, not the run's execution")
        status = TaskStatus.TIMED_OUT if notice.error in TIMEOUT_ERRORS else TaskStatus.FAILED
        detail = f"{notice.error}: {notice.cause}" if notice.cause else (notice.error or "failed")
        self.runs.finish_task(
            run.job,
            run.run_id,
            notice.task,
            status=status,
            now=self.clock(),
            expires_at=_expiry(run, stored.spec),
            error=detail,
        )
        task = _task(stored.spec, notice.task)
        if task is not None and isinstance(task.target, ApprovalTarget):
            self.alerts.approval_decided(run, notice.task, f"nobody decided: {status.value.lower()}")
        self.advance(run, stored)
        return Outcome("failed", f"task {notice.task} {status.value.lower()}", run=run, priority=stored.spec.priority)

    # ----------------------------------------------------------------- results from outside

    def complete_external(
        self,
        job: str,
        run_id: str,
        task_name: str,
        attempt: int,
        *,
        succeeded: bool,
        output: str | None,
        error: str | None,
        decision: bool = False,
    ) -> Run:
        """A callback task's result, or (``decision``) an approval task's answer: an approval is decided only
        through ``approvals.decide``, which checks the person, never with a callback token."""
        stored, run, state, task = self._running_task(job, run_id, task_name, attempt)
        if isinstance(task.target, ApprovalTarget) != decision:
            wanted = "approved or rejected by a member of the team" if not decision else "completed by its callback"
            raise StaleAttempt(f"{job} {run_id} task {task_name} is {wanted}")
        failed = TargetResult("failed", error=error, retryable=not decision)
        result = judge(TargetResult("succeeded", output=output), task.checks) if succeeded else failed
        assert state.token is not None
        self._record(run, stored, task, attempt, state.token, result, stored.spec.priority)
        return self.runs.get(job, run_id) or run

    def heartbeat_external(self, job: str, run_id: str, task_name: str, attempt: int) -> Run:
        _, run, state, task = self._running_task(job, run_id, task_name, attempt)
        if task.heartbeat_timeout is None:
            return run  # the state has no HeartbeatSeconds: nothing to extend, the attempt is still current
        if state.token is None or not self.workflows.heartbeat(state.token):
            raise StaleAttempt(f"{job} {run_id} task {task_name} attempt {attempt} is no longer waited for")
        return run

    def heartbeat_parked(self, parked: ParkedTask) -> bool:
        """Keep a parked task's state alive while it waits for its dependencies; False if it stopped waiting."""
        stored = self.jobs.get(parked.job, consistent=False)
        task = _task(stored.spec if stored else None, parked.task.name)
        state = parked.task
        if task is None or task.heartbeat_timeout is None or state.status is not TaskStatus.WAITING or not state.token:
            return False
        if not self.workflows.heartbeat(state.token):
            return False
        next_at = self.clock() + task.heartbeat_timeout - PARKED_HEARTBEAT_LEAD
        return self.runs.parked_heartbeat_sent(
            parked.job, parked.run_id, state.name, attempt=state.attempt, next_at=next_at
        )

    # ---------------------------------------------------------------- cancel and time out

    def stop(self, run: Run, spec: JobSpec, *, cause: str) -> None:
        """After the run was marked CANCELLED or TIMED_OUT: stop its execution, cancel unfinished tasks."""
        if run.execution_arn:
            self.workflows.stop(run.execution_arn, cause=cause)
        if run.graph is None:
            return
        tasks = self.runs.tasks(run.job, run.run_id)
        for name in graph_from_values(run.graph):
            current = tasks.get(name)
            if current is None or current.status not in TASK_TERMINAL:
                self.runs.finish_task(
                    run.job,
                    run.run_id,
                    name,
                    status=TaskStatus.CANCELLED,
                    now=self.clock(),
                    expires_at=_expiry(run, spec),
                    error=cause,
                )

    # ------------------------------------------------------------------------- internals

    def advance(self, run: Run, stored: StoredJob) -> None:
        """Release parked tasks that can now start; finish the run once every task has finished."""
        assert run.graph is not None
        graph = graph_from_values(run.graph)
        tasks = self.runs.tasks(run.job, run.run_id)
        statuses = _statuses(tasks)
        released = [
            (self._message(run, state), timedelta(0))
            for name, state in tasks.items()
            if state.status is TaskStatus.WAITING and name in graph and decide(graph[name], statuses) != "wait"
        ]
        if released:
            self.queues.send(stored.spec.priority, released)
        result = run_result(graph, statuses)
        if result is not None:
            self._finish_run(run, stored, graph, tasks, result)

    def _finish_run(
        self, run: Run, stored: StoredJob, graph: Graph, tasks: dict[str, TaskState], result: TaskStatus
    ) -> None:
        counts: dict[str, int] = {}
        for state in (tasks[name] for name in graph if name in tasks):  # the tasks, not a map task's items
            counts[state.status.value.lower()] = counts.get(state.status.value.lower(), 0) + 1
        summary = f"{len(graph)} tasks: " + ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
        failing = next(
            (
                tasks[name]
                for name in graph
                if tasks[name].status in (TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.CANCELLED)
            ),
            None,
        )
        status = RunStatus.SUCCEEDED if result is TaskStatus.SUCCEEDED else RunStatus.FAILED
        failed_checks = tasks_failed_checks(graph, tasks)
        error = None
        if failing is not None:
            error = f"task {failing.name} {failing.status.value.lower()}: {failing.error or 'no detail'}"
        if failing is not None and rejected_quietly(stored.spec, failing):
            # A person decided the rest should not run: a decision, not a failure (#46). No page.
            status, error = RunStatus.CANCELLED, f"task {failing.name} {failing.error}"
        try:
            finished = self.runs.finish(
                run.job,
                run.run_id,
                attempt=run.attempt,
                status=status,
                now=self.clock(),
                output=summary,
                error=error,
                checks=failed_checks,
            )
        except StaleAttempt:
            return  # finished by a concurrent task or a redelivery
        if status is RunStatus.FAILED:
            self.alerts.run_ended_badly(finished, f"DAG run failed: {error}")
        elif status is RunStatus.SUCCEEDED:
            # Each task's warnings were paged as it finished: the run's success only keeps the incident open.
            warned = any(check.severity == "warn" for check in failed_checks)
            self.alerts.succeeded(run, finished, stored.spec, already_warned=warned)

    def _record(
        self,
        run: Run,
        stored: StoredJob,
        task: DagTask,
        attempt: int,
        token: str,
        result: TargetResult,
        priority: str,
        *,
        record: str | None = None,
    ) -> Outcome:
        """An attempt's outcome on the task's record (``record``: one item of a map task), reported to its token."""
        now = self.clock()
        runs = self.runs
        name = record or task.name
        superseded = Outcome("superseded", f"task {name} attempt {attempt} is no longer running", priority=priority)

        def finish(status: TaskStatus, *, error: str | None = None) -> bool:
            expires_at = _expiry(run, stored.spec)
            return runs.finish_task(
                run.job,
                run.run_id,
                name,
                status=status,
                now=now,
                expires_at=expires_at,
                attempt=attempt,
                output=result.output,
                error=error,
                checks=result.checks,
            )

        # A map item's output is its own (the task's is its judgement): only a task's may be read downstream.
        if result.outcome == "succeeded" and name == task.name and name in stored.spec.dag_outputs():
            kept = self._keep_output(run, stored, name, attempt, result)
            if isinstance(kept, TargetResult):
                return self._record(run, stored, task, attempt, token, kept, priority, record=record)
            if not kept:
                return superseded
        if result.outcome == "succeeded":
            if not finish(TaskStatus.SUCCEEDED):
                return superseded
            self.after_step("record_task")
            self.alerts.checks_warned(run, result.checks, task=name)
            self.workflows.succeed(token, {"task": name, "status": TaskStatus.SUCCEEDED.value, "attempt": attempt})
            self._advance_after(name, task, run, stored)
            return Outcome("succeeded", f"task {name}", run=run, priority=priority)
        error = result.error or "failed"
        retry = result.retryable and attempt < task_retry(stored.spec, task).max_attempts
        if retry:
            recorded = runs.retry_task(run.job, run.run_id, name, attempt=attempt, now=now, error=error)
        else:
            recorded = finish(TaskStatus.FAILED, error=error)
        if not recorded:
            return superseded
        self.after_step("record_task")
        self.workflows.fail(token, TASK_FAILED if result.retryable else TASK_FAILED_PERMANENTLY, error)
        if retry:
            return Outcome("retrying", f"task {name} attempt {attempt} failed: {error}", run=run, priority=priority)
        self._advance_after(name, task, run, stored)
        return Outcome("failed", f"task {name}: {error}", run=run, priority=priority)

    def _advance_after(self, name: str, task: DagTask | None, run: Run, stored: StoredJob) -> None:
        """After a task's outcome, release what waits on it; an item's outcome releases nothing (its map task is
        judged once every item has ended), so it does not read the run's tasks."""
        if task is None or name == task.name:
            self.advance(run, stored)

    def _keep_output(
        self, run: Run, stored: StoredJob, name: str, attempt: int, result: TargetResult
    ) -> bool | TargetResult:
        """Store what a task returned for the downstream tasks that read it, before its success is recorded (a
        reader that sees the success finds the output). False: a later attempt's output is there already; a
        failed result: the output is too large to pass on."""
        text = result.body if result.body is not None else (result.output or "")
        size = len(text.encode())
        if size > MAX_TASK_OUTPUT:
            return TargetResult(
                "failed",
                error=f"output_too_large: {size} bytes, and at most {MAX_TASK_OUTPUT} pass to downstream tasks; write "
                "larger data to the team's S3 and return its s3:// URI",
                retryable=False,
                checks=result.checks,
            )
        return self.runs.put_task_output(
            run.job, run.run_id, name, attempt=attempt, text=text, expires_at=_expiry(run, stored.spec)
        )

    def _again(
        self, message: DagTaskMessage, stored: StoredJob, run: Run, graph: Graph, mine: TaskState, now: datetime
    ) -> Outcome:
        """A message for an attempt already past WAITING: redelivery, or recovery after a crash."""
        priority = stored.spec.priority
        if mine.status in TASK_TERMINAL:
            # The outcome is recorded; the report or the advance may not have happened (crash): repeat both.
            if mine.status in (TaskStatus.SUCCEEDED, TaskStatus.SKIPPED):
                self.workflows.succeed(message.token, {"task": mine.name, "status": mine.status.value})
            elif mine.status is TaskStatus.FAILED:
                self.workflows.fail(message.token, TASK_FAILED, mine.error or "failed")
            self._advance_after(mine.name, _task(stored.spec, message.task), run, stored)
            return Outcome("duplicate", f"task {mine.name} is {mine.status.value}", run=run, priority=priority)
        if mine.status is TaskStatus.RETRYING:
            self.workflows.fail(message.token, TASK_FAILED, mine.error or "failed")
            return Outcome("duplicate", f"task {mine.name} retry reported again", run=run, priority=priority)
        task = _task(stored.spec, message.task)  # an item's record is named task[index]; its task is the map task
        if task is not None and isinstance(task.target, CallbackTarget):
            return Outcome("duplicate", f"task {mine.name} waits for its callback", run=run, priority=priority)
        if mine.lease_until is not None and mine.lease_until > now:
            return Outcome(
                "waiting", "attempt in flight elsewhere", wait=mine.lease_until - now, run=run, priority=priority
            )
        # The worker running this attempt died. Step Functions retries it (or gives up) by its policy.
        if task is not None:
            return self._record(
                run,
                stored,
                task,
                mine.attempt,
                message.token,
                TargetResult("failed", error=f"{TASK_LOST}: attempt {mine.attempt} lost (its worker stopped)"),
                priority,
                record=mine.name,
            )
        return Outcome("duplicate", "task no longer in the job", run=run, priority=priority)

    def _running_task(
        self, job: str, run_id: str, task_name: str, attempt: int
    ) -> tuple[StoredJob, Run, TaskState, DagTask]:
        stored = self.jobs.get(job)
        run = self.runs.get(job, run_id)
        state = self.runs.tasks(job, run_id).get(task_name) if run else None
        task = _task(stored.spec if stored else None, task_name)
        if (
            stored is None
            or run is None
            or task is None
            or state is None
            or state.status is not TaskStatus.RUNNING
            or state.attempt != attempt
        ):
            now = f"{state.status.value} at attempt {state.attempt}" if state else "unknown"
            raise StaleAttempt(f"{job} {run_id} task {task_name} attempt {attempt} is not running (task is {now})")
        return stored, run, state, task

    @staticmethod
    def _message(run: Run, state: TaskState) -> DagTaskMessage:
        assert state.token is not None
        return DagTaskMessage(
            job=run.job,
            team=run.team,
            run_id=run.run_id,
            scheduled_at=instant_text(run.scheduled_at),
            correlation_id=run.correlation_id,
            task=state.name,
            retry_count=state.attempt - 1,
            token=state.token,
        )


@dataclass(frozen=True)
class Unresolved:
    """A task's payload whose references cannot be resolved: the task fails with this, not retried."""

    error: str


def _task(spec: JobSpec | None, name: str) -> DagTask | None:
    if spec is None or spec.dag is None:
        return None
    return next((task for task in spec.dag.tasks if task.name == name), None)


REJECTED_BY = "rejected by "  # how an approval's rejection begins its error (approvals.decide writes it)


def rejected_quietly(spec: JobSpec, failing: TaskState) -> bool:
    """The run's failing task is an approval a person rejected, and the job did not ask to be paged for it."""
    task = next((task for task in (spec.dag.tasks if spec.dag else []) if task.name == failing.name), None)
    return (
        task is not None
        and isinstance(task.target, ApprovalTarget)
        and not task.target.page_on_reject
        and failing.status is TaskStatus.FAILED
        and (failing.error or "").startswith(REJECTED_BY)
    )


def tasks_failed_checks(graph: Graph, tasks: dict[str, TaskState]) -> list[CheckResult]:
    """The checks its tasks failed, for the run record (named task: check), at most MAX_RUN_CHECKS."""
    failed = [
        CheckResult(f"{name}: {check['name']}", check["severity"], False, check.get("message", ""))
        for name in graph
        if name in tasks
        for check in tasks[name].checks or []
        if not check["passed"]
    ]
    return failed[:MAX_RUN_CHECKS]


def _statuses(tasks: dict[str, TaskState]) -> dict[str, TaskStatus]:
    return {name: state.status for name, state in tasks.items()}


def _expiry(run: Run, spec: JobSpec) -> int:
    return int((run.scheduled_at + spec.run_retention + timedelta(days=1)).timestamp())
