"""The dispatcher and the worker on the memory adapters: the pipeline's rules without moto.

The same paths run against moto in tests/aws; here they run in microseconds on an injected clock, and the
memory adapters are held to the AWS ones by the contract suite (tests/contract).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.worker import Worker
from jobsched.schedule.company import NO_COMPANY
from jobsched.schedule.fires import first_fire
from tests.helpers import Clock


class ScriptedTargets:
    """Answers each call with the next scripted result (then success), and counts calls per (run, attempt)."""

    def __init__(self, *results: TargetResult) -> None:
        self.results = list(results)
        self.calls: list[tuple[str, int]] = []

    def execute(self, target: Any, context: RunContext) -> TargetResult:
        self.calls.append((context.run_id, context.attempt))
        return self.results.pop(0) if self.results else TargetResult("succeeded", output="ok")


class Crash(Exception):
    pass


class Pipeline:
    def __init__(self, body: dict[str, Any], targets: ScriptedTargets) -> None:
        self.clock = Clock("2027-01-04T08:59:30Z")
        self.jobs, self.runs = MemoryJobs(), MemoryRuns()
        self.queues, self.escalations = MemoryWorkQueues(self.clock), MemoryEscalations()
        spec = JobSpec.model_validate({"name": "job", "team": "data", "target": {"type": "callback"}} | body)
        now = self.clock()
        self.jobs.create(
            spec,
            now=now,
            principal="test",
            cursor=now,
            next_visit_at=first_fire(spec, registered_at=now, after=now, company=NO_COMPANY),
        )
        self.dispatcher = Dispatcher(self.jobs, self.runs, self.queues, escalations=self.escalations)
        self.worker = Worker(self.jobs, self.runs, self.queues, self.escalations, targets, self.clock)

    def deliver(self, at: str) -> list[RunMessage]:
        """Every message visible at ``at``, in order; each is handed to the worker once."""
        self.clock.now = parse_instant(at)
        taken = [queued.message for queued in self.queues.receive("normal", limit=100)]
        messages = [message for message in taken if isinstance(message, RunMessage)]
        for message in messages:
            self.worker.process(message)
        return messages


LAMBDA = {"type": "lambda", "function": "echo"}


def test_a_tick_sends_each_instant_once_delayed_to_it_and_the_worker_runs_it_once() -> None:
    targets = ScriptedTargets()
    pipeline = Pipeline({"schedule": {"expression": "* * * * *"}, "target": LAMBDA}, targets)
    report = pipeline.dispatcher.tick(pipeline.clock())
    again = pipeline.dispatcher.tick(pipeline.clock())  # a second tick (or dispatcher) sends nothing twice
    assert report.messages_sent >= 14 and again.messages_sent == 0
    assert pipeline.deliver("2027-01-04T08:59:59Z") == []  # delayed to its instant
    [first] = pipeline.deliver("2027-01-04T09:00:00Z")
    assert first.run_id == "20270104T090000Z"
    pipeline.worker.process(first)  # SQS delivers at least once: the redelivery meets the claim
    run = pipeline.runs.get("data/job", first.run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.attempt == 1
    assert targets.calls == [(first.run_id, 1)]


def test_a_failed_attempt_is_retried_after_its_backoff_and_a_last_failure_pages_once() -> None:
    failed = TargetResult("failed", error="boom", retryable=True)
    targets = ScriptedTargets(failed, failed)
    body = {
        "schedule": {"expression": "0 9 * * *"},
        "target": LAMBDA,
        "retry": {"max_attempts": 2, "backoff": {"initial": "30s", "max": "30s", "jitter": "none"}},
    }
    pipeline = Pipeline(body, targets)
    pipeline.dispatcher.tick(pipeline.clock())
    [first] = pipeline.deliver("2027-01-04T09:00:00Z")
    run = pipeline.runs.get("data/job", first.run_id)
    assert run is not None and run.status is RunStatus.RETRYING and run.next_attempt_at is not None
    assert pipeline.deliver("2027-01-04T09:00:29Z") == []  # the retry waits for its backoff
    [retry] = pipeline.deliver("2027-01-04T09:00:30Z")
    assert retry.attempt == 2
    run = pipeline.runs.get("data/job", first.run_id)
    assert run is not None and run.status is RunStatus.FAILED and run.error == "boom"
    assert targets.calls == [(first.run_id, 1), (first.run_id, 2)]
    assert [event["kind"] for event in pipeline.escalations.events] == ["run_failed"]


@pytest.mark.parametrize("step", ["slots", "claim", "execute", "record"])
def test_a_worker_that_dies_after_any_step_leaves_a_run_that_ends_once(step: str) -> None:
    """The message comes back after a crash (SQS's visibility timeout); the run still ends SUCCEEDED, and the
    target runs once, or twice only when the crash came after it ran and before its result was stored (the
    lease runs out and the next attempt takes over: at-least-once, fenced by the attempt)."""
    targets = ScriptedTargets()
    pipeline = Pipeline({"schedule": {"expression": "0 9 * * *"}, "target": LAMBDA | {"timeout": "1m"}}, targets)
    crashed: list[str] = []

    def crash_once(name: str) -> None:
        if name == step and not crashed:
            crashed.append(name)
            raise Crash(name)

    pipeline.worker.after_step = crash_once
    pipeline.dispatcher.tick(pipeline.clock())
    with pytest.raises(Crash):
        pipeline.deliver("2027-01-04T09:00:00Z")
    at = parse_instant("2027-01-04T09:00:00Z")
    message = RunMessage.scheduled(job="data/job", team="data", at=at, fire_at=at, spec_version=1)
    for minutes in (0, 2, 4, 6):  # redeliveries; the heartbeat checker would time out a dead lease meanwhile
        pipeline.clock.now = at + timedelta(minutes=minutes)
        pipeline.worker.process(message)
        for queued in pipeline.queues.receive("normal", limit=10):
            if isinstance(queued.message, RunMessage):
                pipeline.worker.process(queued.message)
    run = pipeline.runs.get("data/job", message.run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED, run
    executed = len(targets.calls)
    assert executed == (2 if step == "execute" else 1), targets.calls
