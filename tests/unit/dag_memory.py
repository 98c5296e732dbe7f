"""A DAG stack on the memory adapters: the worker's DAG stages driven by the in-memory Step Functions port, on an
injected clock, in microseconds (the same paths run on moto's interpreter in tests/aws/test_dag*.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues
from jobsched.adapters.memory.workflows import MemoryWorkflows
from jobsched.core.messages import DagTaskFailure, DagTaskMessage, WorkMessage, parse_work_message
from jobsched.core.names import PRIORITIES
from jobsched.core.outcome import Outcome
from jobsched.core.run_records import Run, RunContext, TargetResult, TaskState
from jobsched.core.spec import ApprovalTarget, CallbackTarget, JobSpec
from jobsched.dag.deployer import DagDeployer
from jobsched.pipeline.lifecycle import AnnouncedRuns, Lifecycle, StateChange
from jobsched.pipeline.manual_runs import trigger_run
from jobsched.pipeline.worker import Worker
from jobsched.ports import TaskRunsPort
from jobsched.schedule.company import NO_COMPANY
from jobsched.schedule.fires import first_fire
from tests.helpers import Clock

JOB = "data/etl"
VISIBILITY = timedelta(seconds=30)


class Crash(Exception):
    """A worker dying between two steps (raised by a crash-injection hook)."""


class TaskTargets:
    """Each task answers with its next scripted result (then success with ``outputs[task]`` or "{}"); callback
    and approval tasks wait, as the real executor's do. Calls are kept as (record, attempt, payload)."""

    def __init__(self) -> None:
        self.answers: dict[str, list[TargetResult]] = {}
        self.outputs: dict[str, Any] = {}
        self.calls: list[tuple[str, int, Any]] = []

    def execute(self, target: Any, context: RunContext) -> TargetResult:
        if isinstance(target, (CallbackTarget, ApprovalTarget)):
            return TargetResult("pending", output="waiting")
        record = context.task or ""
        self.calls.append((record, context.attempt, context.payload_override))
        scripted = self.answers.get(record.split("[", 1)[0])
        if scripted:
            return scripted.pop(0)
        output = json.dumps(self.outputs.get(record.split("[", 1)[0], {}))
        return TargetResult("succeeded", output=output, body=output)

    def records(self) -> list[str]:
        return [record for record, _, _ in self.calls]


class DagMemoryStack:
    def __init__(self, start: str = "2027-01-04T09:00:00Z") -> None:
        self.clock = Clock(start)
        self.heard: list[StateChange] = []
        self.jobs = MemoryJobs()
        self.runs: TaskRunsPort = AnnouncedRuns(MemoryRuns(), Lifecycle([self.heard.append]))
        self.queues, self.escalations = MemoryWorkQueues(self.clock), MemoryEscalations()
        self.workflows = MemoryWorkflows(self.clock, self._deliver)
        self.targets = TaskTargets()
        self.worker = Worker(
            self.jobs, self.runs, self.queues, self.escalations, self.targets, self.clock, workflows=self.workflows
        )
        self.outcomes: list[Outcome] = []
        self.crashes: list[str] = []
        # What the state machine sends to SQS (task messages and failure reports), each visible from its instant.
        self.machine: list[tuple[datetime, DagTaskMessage | DagTaskFailure]] = []

    def _deliver(self, queue_url: str, body: dict[str, Any]) -> None:
        message = parse_work_message(json.dumps(body))
        assert isinstance(message, (DagTaskMessage, DagTaskFailure)), message
        self.machine.append((self.clock(), message))

    def register(self, tasks: list[dict[str, Any]], **extra: Any) -> JobSpec:
        document = {"name": "etl", "team": "data", "retry": {"max_attempts": 1}, "dag": {"tasks": tasks}} | extra
        spec = JobSpec.model_validate(document)
        now = self.clock()
        self.jobs.create(
            spec,
            now=now,
            principal="test",
            cursor=now,
            next_visit_at=first_fire(spec, registered_at=now, after=now, company=NO_COMPANY),
        )
        DagDeployer(self.workflows, {priority: f"memory://{priority}" for priority in PRIORITIES}).deploy(spec)
        return spec

    def trigger(self) -> str:
        return trigger_run(self.jobs, self.runs, self.queues, JOB, now=self.clock(), principal="test").run_id

    def pump(self, *, deliveries: int = 1, rounds: int = 50) -> None:
        """Every visible message to the worker (each ``deliveries`` times) until the queues are empty."""
        for _ in range(rounds):
            self.workflows.advance()
            taken = self._visible()
            if not taken:
                return
            for message in taken:
                for _ in range(deliveries):
                    self._process(message)
        raise AssertionError(f"still busy after {rounds} rounds")

    def _visible(self) -> list[WorkMessage | DagTaskFailure]:
        now = self.clock()
        sent: list[WorkMessage | DagTaskFailure] = [message for at, message in self.machine if at <= now]
        self.machine = [(at, message) for at, message in self.machine if at > now]
        return sent + [queued.message for priority in PRIORITIES for queued in self.queues.receive(priority, limit=100)]

    def _process(self, message: WorkMessage | DagTaskFailure) -> None:
        """One delivery; a worker that dies leaves the message undeleted: SQS brings it back after its
        visibility timeout."""
        try:
            self.outcomes.append(self.worker.process_any(message))
        except Crash as crash:
            self.crashes.append(str(crash))
            if isinstance(message, (DagTaskMessage, DagTaskFailure)):
                self.machine.append((self.clock() + VISIBILITY, message))
            else:
                self.queues.send("normal", [(message, VISIBILITY)])

    def run(self, run_id: str) -> Run:
        run = self.runs.get(JOB, run_id)
        assert run is not None
        return run

    def tasks(self, run_id: str) -> dict[str, TaskState]:
        return self.runs.tasks(JOB, run_id)

    def statuses(self, run_id: str) -> dict[str, str]:
        return {name: state.status.value for name, state in self.tasks(run_id).items()}


def task(name: str, *depends_on: str, **extra: Any) -> dict[str, Any]:
    target = extra.pop("target", {"type": "lambda", "function": "echo"})
    return {"name": name, "depends_on": list(depends_on), "target": target, **extra}
