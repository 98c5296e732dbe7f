"""The lifecycle: every state change of a run or a DAG task is announced once, after its conditional write, to
the same subscribers, whoever wrote it."""

from __future__ import annotations

from jobsched.core.runs import RunStatus
from jobsched.pipeline.lifecycle import Change, StateChange
from tests.aws.harness import Clock, Stack
from tests.aws.test_dag import FIRST, JOB, dag_job, drive, finished, lambda_task, run_of, start_run


def heard_by(stack: Stack) -> list[StateChange]:
    heard: list[StateChange] = []
    stack.lifecycle.subscribe(heard.append)
    return heard


def test_a_task_end_and_its_run_end_reach_the_same_subscriber(dag_stack: Stack, clock: Clock) -> None:
    heard = heard_by(dag_stack)
    start_run(dag_stack, clock, dag_job(lambda_task("a"), lambda_task("b", "a")))
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    mine = [change for change in heard if change.job == JOB and change.run_id == FIRST]
    tasks = [(change.change, change.task, change.attempt) for change in mine if change.task is not None]
    assert (Change.CLAIMED, "a", 1) in tasks and (Change.FINISHED, "a", 1) in tasks
    assert tasks.index((Change.FINISHED, "a", 1)) < tasks.index((Change.CLAIMED, "b", 1))
    runs = [(change.change, change.status) for change in mine if change.task is None]
    assert runs == [(Change.CLAIMED, "RUNNING"), (Change.FINISHED, "SUCCEEDED")]
    # The run's end is heard after its last task's, once, with the record the write left.
    assert mine[-1].run is not None and mine[-1].run.status is RunStatus.SUCCEEDED
    assert [change.task for change in mine if change.change is Change.FINISHED] == ["a", "b", None]


def test_a_run_is_heard_once_per_change_even_when_its_message_comes_twice(stack: Stack, clock: Clock) -> None:
    heard = heard_by(stack)
    calls: list[int] = []

    def flaky(event: object) -> dict[str, str]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first attempt fails")
        return {"ok": "yes"}

    stack.lambdas.functions["flaky"] = flaky  # before the job: its function is made for the team
    clock.set("2027-01-04T08:59:30Z")
    stack.register(
        {
            "name": "flaky",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "flaky"},
            "retry": {"max_attempts": 2, "backoff": {"initial": "10s", "max": "10s", "jitter": "none"}},
        }
    )
    stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    stack.pump(deliveries=2)  # every message delivered twice
    clock.set("2027-01-04T09:00:15Z")
    stack.pump(deliveries=2)
    changes = [(change.change, change.attempt) for change in heard if change.job == "ops/flaky"]
    assert changes == [
        (Change.CLAIMED, 1),
        (Change.RETRYING, 1),
        (Change.CLAIMED, 2),
        (Change.FINISHED, 2),
    ]
