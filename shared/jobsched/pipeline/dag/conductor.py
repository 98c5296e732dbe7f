"""The conductor of a DAG run: one execution per run, and each task message walked through the stage rooms, each
of which answers with a verdict (``readiness``, ``inputs``) or does its writes (``recording``, ``run_end``).

Order of writes per task message, and what a crash between them leaves (the message comes back):
1. park (WAITING + token) when dependencies are unfinished; then dependencies are read again, so a
   dependency that finished meanwhile is never missed (it reads our WAITING after its own write);
2. claim (conditional -> RUNNING attempt): one claimer per attempt;
3. execute the target (idempotency key: run id + task + attempt), through ``attempts`` as a run's attempt is;
4. record the outcome, conditional on (RUNNING, attempt): a late result of an old attempt is refused;
5. report the outcome to the task token; a redelivered message finds the outcome recorded and reports it
   again (Step Functions ignores a second report of a finished token);
6. advance: release parked tasks whose dependencies have all finished; finish the run when every task has.
Step Functions owns retries, backoff and timeouts of each task; the run record owns what happened.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from jobsched.core.messages import TASK_TERMINAL, DagTaskFailure, DagTaskMessage
from jobsched.core.outcome import Outcome
from jobsched.core.records import StoredJob
from jobsched.core.references import referenced_tasks
from jobsched.core.run_records import Run, RunContext, TargetResult, TaskState
from jobsched.core.runs import LEASE_MARGIN, TERMINAL, RunMessage, TaskStatus, instant_text
from jobsched.core.spec import ApprovalTarget, DagTask, JobSpec
from jobsched.dag.definition import (
    TIMEOUT_ERRORS,
    TaskNode,
    attempt_timeout,
    execution_input,
    graph_from_values,
    graph_of,
    graph_to_values,
    task_budget,
)
from jobsched.paging.escalation_events import Alerts
from jobsched.pipeline.attempts import Attempts, AttemptSteps, Executed, Held
from jobsched.pipeline.dag import readiness
from jobsched.pipeline.dag.ends import TaskEnds
from jobsched.pipeline.dag.inputs import Inputs
from jobsched.pipeline.dag.readiness import DataReadiness, Fail, Hold, Lost, Report, Skip
from jobsched.pipeline.dag.recording import TaskRecords
from jobsched.pipeline.dag.run_end import RunEnd
from jobsched.pipeline.dag.turn import NO_ITEM, TaskTurn, Unresolved, task_of
from jobsched.pipeline.usage import UsageMeter
from jobsched.pipeline.waiting import Waits
from jobsched.ports import DataChecksPort, JobsPort, TaskRunsPort, WorkflowsPort, WorkQueuesPort
from jobsched.watch.breaker import breaker_owner

TASK_STEPS = AttemptSteps(claimed="claim_task", executed="execute_task")
TASK_UNKNOWN = "jobsched.UnknownTask"


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
    meter: UsageMeter | None = None  # each task attempt's usage, for the team's chargeback

    def _metered(self, spec: JobSpec, target: Any) -> Callable[[RunContext, TargetResult], None] | None:
        meter = self.meter
        return None if meter is None else (lambda context, result: meter.attempt(spec, target, context, result))

    @property
    def inputs(self) -> Inputs:
        return Inputs(self.runs, self.objects)

    @property
    def readiness(self) -> DataReadiness:
        return DataReadiness(self.runs, self.waits)

    @property
    def records(self) -> TaskRecords:
        return TaskRecords(self.runs, self.workflows, self.alerts, self.after_step)

    @property
    def run_end(self) -> RunEnd:
        return RunEnd(self.runs, self.queues, self.alerts, self.clock, self.records)

    @property
    def ends(self) -> TaskEnds:
        """A task's ends from outside (a callback, an approval, a stop) and its parked heartbeats."""
        return TaskEnds(self.jobs, self.runs, self.workflows, self.records, self.run_end, self.clock)

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

    # ------------------------------------------------------------------------------ task messages

    def process_task(self, message: DagTaskMessage) -> Outcome:
        found = self._found(message)
        if isinstance(found, Outcome):
            return found
        return self.conduct(TaskTurn.of(message, found, self.clock()))

    def conduct(self, turn: TaskTurn) -> Outcome:
        """One task message's turn through the stages, each answering with a verdict or doing its writes."""
        message = turn.message
        assert message is not None
        tasks = self._records_for(turn)
        if message.map_done:
            return self._judge_map(turn, tasks)
        mine = tasks.get(turn.record)
        if mine is not None and mine.attempt > turn.attempt:
            return turn.outcome("duplicate", f"task is at attempt {mine.attempt}")
        if mine is not None and mine.attempt == turn.attempt and mine.status is not TaskStatus.WAITING:
            return self._again(turn, mine)
        if message.item_index is not None:  # one item of a map task that started: its dependencies are done
            # The upstream outputs it reads were final before its map started: the read above serves.
            return self._execute_resolved(turn, item=message.item, states=tasks)
        assert turn.run.graph is not None
        node = graph_from_values(turn.run.graph)[turn.record]
        decision = self._dependencies(turn, node, tasks)
        if decision == "wait":
            return turn.outcome("waiting", "parked until its dependencies finish")
        if decision == "skip":
            self._skip(turn)
            return turn.outcome("skipped", f"task {turn.record} skipped")
        return self._start(turn, node)

    def _found(self, message: DagTaskMessage) -> tuple[StoredJob, Run, DagTask] | Outcome:
        """The job, the run and the task a message names, or why it is not there to run."""
        stored = self.jobs.get(message.job, consistent=False)
        run = self.runs.get(message.job, message.run_id)
        priority = stored.spec.priority if stored else "normal"
        if run is None or run.graph is None:
            return Outcome("superseded", "no such DAG run", priority=priority)
        if run.status in TERMINAL:
            return Outcome("duplicate", f"run is {run.status.value}", run=run, priority=priority)
        task = task_of(stored.spec if stored else None, message.task)
        if stored is None or task is None or message.task not in graph_from_values(run.graph):
            self.workflows.fail(message.token, TASK_UNKNOWN, f"task {message.task} is not in the job any more")
            return Outcome("failed", f"unknown task {message.task}", run=run, priority=priority)
        return stored, run, task

    def _records_for(self, turn: TaskTurn) -> dict[str, TaskState]:
        """The task records a message needs. One item of a map reads only its own and its payload's upstreams,
        never the partition that holds every item (that read, once per item, grows with the square of the list)."""
        run = turn.run
        if not turn.is_item:
            return self.runs.tasks(run.job, run.run_id)
        upstream = referenced_tasks(getattr(turn.task.target, "payload", None))
        return self.runs.task_states(run.job, run.run_id, [turn.record, *sorted(upstream)])

    def _dependencies(self, turn: TaskTurn, node: TaskNode, tasks: dict[str, TaskState]) -> str:
        """Run, skip, or wait for the dependencies (parked with the token until they finish)."""
        decision = readiness.dependencies(node, tasks)
        if decision != "wait":
            return decision
        mine = tasks.get(turn.record)
        if mine is None or mine.status is not TaskStatus.WAITING:
            self.records.park(turn)
            self.after_step("park")
        # Read again after parking: a dependency finishing in between either sees our WAITING item
        # (and releases us) or finished before this read (and we go on now). Never neither.
        return readiness.dependencies(node, self.runs.tasks(turn.run.job, turn.run.run_id))

    def _start(self, turn: TaskTurn, node: TaskNode) -> Outcome:
        """A task whose dependencies allow it to run: its data waited for, its inputs resolved, then executed."""
        verdict = self.readiness.data(turn, node)
        if isinstance(verdict, Skip):
            self._skip(turn, verdict.reason)
            return turn.outcome("skipped", f"task {turn.record} skipped: its wait timed out")
        if isinstance(verdict, Fail):
            return self._fail_unclaimed(turn, verdict.reason)
        if isinstance(verdict, Hold):
            if verdict.park:
                self.records.park(turn)
            return replace(verdict.outcome, run=turn.run, priority=turn.priority)
        if turn.task.map is not None:
            return self._resolve_map(turn)
        return self._execute_resolved(turn)

    def _execute_resolved(
        self, turn: TaskTurn, *, item: Any = NO_ITEM, states: dict[str, TaskState] | None = None
    ) -> Outcome:
        """Execute the task (or one map item) with its payload's references resolved; fail it, unretried, when
        they cannot be."""
        payload = self.inputs.payload(turn, item=item, states=states)
        if isinstance(payload, Unresolved):
            return self._fail_unclaimed(turn, payload.error)
        return self._execute(turn, payload)

    def _execute(self, turn: TaskTurn, payload: Any) -> Outcome:
        """Claim this attempt of the task (one claimer per attempt), execute it, record the result."""
        run, task = turn.run, turn.task

        def context(_: Run) -> RunContext:
            return RunContext(
                job=run.job,
                team=run.team,
                run_id=run.run_id,
                attempt=turn.attempt,
                scheduled_at=instant_of(turn),
                correlation_id=run.correlation_id,
                task=turn.record,  # an item's own idempotency key: run id + task[index] + attempt
                trigger=run.trigger,
                payload_override=payload,
                critical=turn.spec.tier == "critical",
            )

        lease_until = turn.now + attempt_timeout(task) + LEASE_MARGIN
        attempt = self.attempts.execute(
            task.target,
            breaker_owner(turn.spec),
            turn.now,
            claim=lambda: self._claim(turn, lease_until),
            context=context,
            steps=TASK_STEPS,
            checks=task.checks,
            metered=self._metered(turn.spec, task.target),
        )
        if isinstance(attempt, Held):
            self.attempts.breakers.holding(attempt.breaker, f"{run.job}/{run.run_id}#{turn.record}")
            return replace(attempt.outcome, run=run, priority=turn.priority)
        if not isinstance(attempt, Executed):
            return attempt
        if attempt.result.outcome == "pending" and isinstance(task.target, ApprovalTarget):
            self.alerts.approval_requested(run, turn.record, task.target.message)
            return turn.outcome("pending", f"task {turn.record} waits for approval")
        if attempt.result.outcome == "pending":
            return turn.outcome("pending", f"task {turn.record} waits for its callback")
        return self.finish(turn, attempt.result)

    def _claim(self, turn: TaskTurn, lease_until: datetime) -> Run | Outcome:
        if not self.records.claim(turn, lease_until):
            return turn.outcome("duplicate", "another worker claimed this attempt")
        return turn.run

    def finish(self, turn: TaskTurn, result: TargetResult) -> Outcome:
        """Record the attempt's outcome, then release what waits on it (an item's releases nothing)."""
        return self.run_end.task_ended(turn, result)

    def _fail_unclaimed(self, turn: TaskTurn, error: str) -> Outcome:
        """Fail a task that never started (its wait timed out, or it may not wait on what it names): claimed, so
        one delivery fails it, then recorded as a failure no retry can mend."""
        claimed = self._claim(turn, turn.now + LEASE_MARGIN)
        if isinstance(claimed, Outcome):
            return claimed
        return self.finish(turn, TargetResult("failed", error=error, retryable=False))

    def _skip(self, turn: TaskTurn, *reason: str) -> None:
        self.records.skip(turn, *reason)
        self.run_end.advance(turn.run, turn.stored)

    def _again(self, turn: TaskTurn, mine: TaskState) -> Outcome:
        """A message for an attempt already past WAITING: redelivery, or recovery after a crash."""
        verdict = readiness.redelivered(turn, mine)
        if isinstance(verdict, Report):
            self.records.report_again(turn, mine)
            if mine.status is TaskStatus.RETRYING:
                return turn.outcome("duplicate", f"task {mine.name} retry reported again")
            # The outcome is recorded; the report or the advance may not have happened (crash): both repeated.
            if not turn.is_item:
                self.run_end.advance(turn.run, turn.stored)
            return turn.outcome("duplicate", f"task {mine.name} is {mine.status.value}")
        if isinstance(verdict, Lost):
            return self.finish(replace(turn, attempt=mine.attempt), TargetResult("failed", error=verdict.error))
        return verdict

    # ------------------------------------------------------------------------------ map tasks

    def _resolve_map(self, turn: TaskTurn) -> Outcome:
        """A map task whose dependencies are done: its list, read from the upstream output, is the answer to its
        first state; the Map state then sends one message per item. The task stays RUNNING until it is judged."""
        answer = self.inputs.map_answer(turn)
        if isinstance(answer, Unresolved):
            return self._fail_unclaimed(turn, answer.error)
        claimed = self._claim(turn, turn.now + task_budget(turn.spec, turn.task))
        if isinstance(claimed, Outcome):
            return claimed
        self.workflows.succeed(turn.token, answer)
        count = len(answer["items"]) if "items" in answer else answer["count"]
        return turn.outcome("pending", f"task {turn.task.name}: {count} items")

    def _judge_map(self, turn: TaskTurn, tasks: dict[str, TaskState]) -> Outcome:
        """Every item has ended: the map task succeeds if no more than its tolerated share of items failed.
        The Map state's results say which (an item caught after its last failure or time-out is {"failed": true})."""
        mapped = turn.task.map
        assert mapped is not None and turn.message is not None
        mine = tasks.get(turn.task.name)
        if mine is None or mine.status is not TaskStatus.RUNNING:
            if mine is not None and mine.status in TASK_TERMINAL:
                self.workflows.succeed(turn.token, {"task": turn.task.name, "status": mine.status.value})
            return turn.outcome("duplicate", f"map task {turn.task.name} already judged")
        results = turn.message.results or []
        failed = sum(1 for result in results if isinstance(result, dict) and result.get("failed"))
        share = 100.0 * failed / len(results) if results else 0.0
        summary = json.dumps({"items": len(results), "succeeded": len(results) - failed, "failed": failed})
        self.records.end_unreported_items(turn, tasks)
        if share <= mapped.tolerated_failure_percentage:
            result = TargetResult("succeeded", output=summary)
        else:
            tolerated = f"{mapped.tolerated_failure_percentage:g}%"
            error = f"{failed} of {len(results)} items failed ({share:.0f}%; tolerated {tolerated})"
            result = TargetResult("failed", output=summary, error=error, retryable=False)
        return self.finish(replace(turn, attempt=mine.attempt), result)

    # ------------------------------------------------------------------------------ the machine's reports

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
        ended = TaskState(notice.task, status, attempt=0, error=detail)
        self.records.ended_by_machine(run, stored.spec, ended, now=self.clock())
        task = task_of(stored.spec, notice.task)
        if task is not None and isinstance(task.target, ApprovalTarget):
            self.alerts.approval_decided(run, notice.task, f"nobody decided: {status.value.lower()}")
        self.run_end.advance(run, stored)
        return Outcome("failed", f"task {notice.task} {status.value.lower()}", run=run, priority=stored.spec.priority)


def instant_of(turn: TaskTurn) -> str:
    """The run's instant as its messages name it."""
    return turn.message.scheduled_at if turn.message is not None else instant_text(turn.run.scheduled_at)
