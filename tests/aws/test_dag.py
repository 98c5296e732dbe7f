"""DAG jobs on real state machines: moto's Step Functions interpreter runs the compiled definitions.

The interpreter runs in its own threads in real time (retry intervals, heartbeat timeouts of a second or
two); the worker runs on the virtual clock. ``drive`` pumps the work queue until a condition holds.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.errors import ExecutionNotOurs
from jobsched.core.names import OWNER_TAG
from jobsched.core.run_records import Run, StaleAttempt, TaskState
from jobsched.core.runs import RunStatus, TaskStatus
from jobsched.core.spec import JobSpec
from jobsched.dag.definition import compile_definition, definition_text
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.reruns import TaskSelection, rerun_run
from jobsched.pipeline.worker import heartbeat_checker
from tests.aws.harness import Clock, Stack

JOB = "data/etl"
FIRST = "20270104T090000Z"  # the first instant of the hourly schedule after the clock's start


def lambda_task(name: str, *depends_on: str, function: str = "echo", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "depends_on": list(depends_on),
        "target": {"type": "lambda", "function": function, "payload": {"task": name}},
        **extra,
    }


def callback_task(name: str, *depends_on: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "depends_on": list(depends_on), "target": {"type": "callback", "timeout": "1h"}, **extra}


def dag_job(*tasks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": "etl",
        "team": "data",
        "schedule": {"expression": "rate(1 hour)", "start_at": "2027-01-04T09:00:00Z"},
        "retry": {"max_attempts": 1},
        "dag": {"tasks": list(tasks)},
        **extra,
    }


def start_run(stack: Stack, clock: Clock, document: dict[str, Any]) -> JobSpec:
    spec = stack.register(document)
    stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    stack.pump()
    return spec


def drive(stack: Stack, done: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stack.pump()
        if done():
            return
        time.sleep(0.05)
    raise AssertionError(f"not done within {seconds} s: run {run_of(stack)}, tasks {tasks_of(stack)}")


def run_of(stack: Stack) -> Run:
    run = stack.runs.get(JOB, FIRST)
    assert run is not None
    return run


def tasks_of(stack: Stack) -> dict[str, TaskState]:
    return stack.runs.tasks(JOB, FIRST)


def status(stack: Stack) -> dict[str, str]:
    return {name: state.status.value for name, state in tasks_of(stack).items()}


def finished(stack: Stack) -> Callable[[], bool]:
    return lambda: run_of(stack).status not in (RunStatus.RUNNING, RunStatus.SCHEDULED)


def execution(stack: Stack) -> dict[str, Any]:
    arn = run_of(stack).execution_arn
    assert arn is not None
    deadline = time.monotonic() + 10
    while True:  # the interpreter's own threads end the execution a moment after the last report
        described: dict[str, Any] = stack.stepfunctions.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


def transitions(stack: Stack) -> int:
    execution(stack)
    arn = run_of(stack).execution_arn
    assert arn is not None
    return stack.workflows.billed_transitions(arn)


def rerun(stack: Stack, clock: Clock, principal: str = "data-oncall", **selection: Any) -> Any:
    """Re-execute the first run (``from_failure=True``, or ``tasks=[...]``, ``downstream=True``)."""
    return rerun_run(
        stack.jobs, stack.runs, stack.queues, JOB, FIRST, now=clock(), principal=principal,
        selection=TaskSelection(**selection),
    )  # fmt: skip


def complete(stack: Stack, task: str, *, succeeded: bool = True, attempt: int = 1) -> Run:
    return stack.worker.ends.complete(
        AttemptRef(JOB, FIRST, attempt, task),
        Reported(succeeded=succeeded, output="done" if succeeded else None, error="boom"),
    )


# --------------------------------------------------------------------------------- tests


def test_diamond_runs_each_task_once_after_its_dependencies(dag_stack: Stack, clock: Clock) -> None:
    start_run(
        dag_stack,
        clock,
        dag_job(lambda_task("a"), lambda_task("b", "a"), lambda_task("c", "a"), lambda_task("d", "b", "c")),
    )
    drive(dag_stack, finished(dag_stack))

    run = run_of(dag_stack)
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert status(dag_stack) == {name: "SUCCEEDED" for name in "abcd"}
    calls = [event["payload"]["task"] for name, event in dag_stack.lambdas.calls if name == "echo"]
    assert sorted(calls) == ["a", "b", "c", "d"]  # each task exactly once
    assert calls[0] == "a" and calls[-1] == "d"
    keys = {event["jobsched"]["idempotency_key"] for _, event in dag_stack.lambdas.calls}
    assert keys == {f"{FIRST}-{task}-1" for task in "abcd"}  # run id + task + attempt
    assert execution(dag_stack)["status"] == "SUCCEEDED"
    assert transitions(dag_stack) == 1 + 4  # the Parallel state and one per task: within tasks + 2


def test_a_slow_branch_does_not_hold_up_an_independent_one(dag_stack: Stack, clock: Clock) -> None:
    # Levels would be {slow, c} then {after-slow, d}: a level barrier would hold d until slow finishes.
    start_run(
        dag_stack,
        clock,
        dag_job(callback_task("slow"), lambda_task("after-slow", "slow"), lambda_task("c"), lambda_task("d", "c")),
    )
    drive(dag_stack, lambda: status(dag_stack).get("d") == "SUCCEEDED")
    assert status(dag_stack)["slow"] == "RUNNING"
    assert status(dag_stack)["after-slow"] == "WAITING"  # parked on its token, not started

    complete(dag_stack, "slow")
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    assert tasks_of(dag_stack)["after-slow"].status is TaskStatus.SUCCEEDED


def test_wide_fan_out_and_fan_in(dag_stack: Stack, clock: Clock) -> None:
    middle = [lambda_task(f"part-{index:02d}", "split") for index in range(48)]
    start_run(
        dag_stack,
        clock,
        dag_job(lambda_task("split"), *middle, lambda_task("merge", *(task["name"] for task in middle))),
    )
    drive(dag_stack, finished(dag_stack), seconds=60)

    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    assert len(status(dag_stack)) == 50 and set(status(dag_stack).values()) == {"SUCCEEDED"}
    merge = tasks_of(dag_stack)["merge"]
    assert merge.started_at is not None
    assert all(
        state.finished_at and state.finished_at <= merge.started_at
        for state in tasks_of(dag_stack).values()
        if state.name != "merge"
    )
    assert transitions(dag_stack) == 1 + 50


def test_a_task_retried_by_the_state_machine_succeeds_on_attempt_3(dag_stack: Stack, clock: Clock) -> None:
    attempts: list[int] = []

    def flaky(event: dict[str, Any]) -> dict[str, Any]:
        attempts.append(event["jobsched"]["attempt"])
        if event["jobsched"]["attempt"] < 3:
            raise RuntimeError(f"attempt {event['jobsched']['attempt']} fails")
        return {"ok": True}

    dag_stack.lambdas.functions["flaky"] = flaky
    retry = {"max_attempts": 4, "backoff": {"initial": "1s", "multiplier": 1.5, "max": "2s"}}
    start_run(dag_stack, clock, dag_job(lambda_task("a"), lambda_task("b", "a", function="flaky", retry=retry)))
    drive(dag_stack, finished(dag_stack))

    assert attempts == [1, 2, 3]
    b = tasks_of(dag_stack)["b"]
    assert (b.status, b.attempt) == (TaskStatus.SUCCEEDED, 3)
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    assert transitions(dag_stack) == 1 + 2 + 2  # +1 per retry: within tasks + 2 + retries


def test_a_callback_task_without_heartbeats_times_out_and_its_late_result_is_refused(
    dag_stack: Stack, clock: Clock
) -> None:
    start_run(
        dag_stack,
        clock,
        dag_job(callback_task("load", heartbeat_timeout="1s"), lambda_task("report", "load")),
    )
    drive(dag_stack, finished(dag_stack))

    load = tasks_of(dag_stack)["load"]
    assert load.status is TaskStatus.TIMED_OUT and "Timeout" in (load.error or "")
    assert tasks_of(dag_stack)["report"].status is TaskStatus.SKIPPED
    run = run_of(dag_stack)
    assert run.status is RunStatus.FAILED and "load timed_out" in (run.error or "")
    with pytest.raises(StaleAttempt):
        complete(dag_stack, "load")
    assert tasks_of(dag_stack)["load"].status is TaskStatus.TIMED_OUT
    escalations = dag_stack.escalations()
    assert [event["run_id"] for event in escalations] == [FIRST]


def test_heartbeats_keep_a_callback_task_alive(dag_stack: Stack, clock: Clock) -> None:
    start_run(dag_stack, clock, dag_job(callback_task("load", heartbeat_timeout="2s")))
    drive(dag_stack, lambda: status(dag_stack).get("load") == "RUNNING")
    for _ in range(4):  # 4 s in all: twice the heartbeat timeout
        time.sleep(1)
        dag_stack.worker.ends.heartbeat(AttemptRef(JOB, FIRST, 1, "load"))
    assert status(dag_stack)["load"] == "RUNNING"
    complete(dag_stack, "load")
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED


def test_a_failed_task_skips_its_downstream_while_others_finish_and_cleanup_runs(
    dag_stack: Stack, clock: Clock
) -> None:
    dag_stack.lambdas.functions["broken"] = lambda event: (_ for _ in ()).throw(ValueError("bad input"))
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("extract", function="broken"),
            lambda_task("transform", "extract"),
            lambda_task("load", "transform"),
            lambda_task("audit"),
            lambda_task("audit-report", "audit"),
            lambda_task("cleanup", "load", "audit-report", trigger_rule="all_done"),
        ),
    )
    drive(dag_stack, finished(dag_stack))

    assert status(dag_stack) == {
        "extract": "FAILED",
        "transform": "SKIPPED",
        "load": "SKIPPED",
        "audit": "SUCCEEDED",
        "audit-report": "SUCCEEDED",
        "cleanup": "SUCCEEDED",
    }
    run = run_of(dag_stack)
    assert run.status is RunStatus.FAILED
    assert run.error is not None and run.error.startswith("task extract failed") and "bad input" in run.error
    called = {event["payload"]["task"] for _, event in dag_stack.lambdas.calls}
    assert "transform" not in called and "load" not in called
    assert [event["kind"] for event in dag_stack.escalations()] == ["run_failed"]
    assert execution(dag_stack)["status"] == "SUCCEEDED"  # failures are caught: the run record says FAILED


def test_cancelling_a_run_stops_the_execution_and_cancels_unfinished_tasks(dag_stack: Stack, clock: Clock) -> None:
    start_run(dag_stack, clock, dag_job(lambda_task("a"), callback_task("b", "a"), lambda_task("c", "b")))
    drive(dag_stack, lambda: status(dag_stack).get("b") == "RUNNING")

    stopped: list[dict[str, Any]] = []
    stop = dag_stack.stepfunctions.stop_execution

    def spy(**request: Any) -> Any:
        stopped.append(request)
        return stop(**request)

    # moto marks the stop but its interpreter keeps the execution RUNNING while a task waits on its token
    # (AWS reports ABORTED at once), so the test checks the request the scheduler makes.
    dag_stack.stepfunctions.stop_execution = spy
    cancelled = dag_stack.worker.ends.stop(AttemptRef(JOB, FIRST), "cancelled by request")
    assert cancelled.status is RunStatus.CANCELLED
    assert [request["executionArn"] for request in stopped] == [run_of(dag_stack).execution_arn]
    assert status(dag_stack) == {"a": "SUCCEEDED", "b": "CANCELLED", "c": "CANCELLED"}
    with pytest.raises(StaleAttempt):
        complete(dag_stack, "b")
    dag_stack.pump()
    assert run_of(dag_stack).status is RunStatus.CANCELLED


def test_a_repeated_start_of_the_same_run_starts_one_execution(dag_stack: Stack, clock: Clock) -> None:
    dag_stack.register(dag_job(lambda_task("a"), lambda_task("b", "a")))
    dag_stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    dag_stack.pump(deliveries=3)  # the run message delivered three times
    drive(dag_stack, finished(dag_stack))

    machine = dag_stack.workflows.machine_arn(JOB)
    executions = dag_stack.stepfunctions.list_executions(stateMachineArn=machine)["executions"]
    [execution] = executions
    assert re.fullmatch(FIRST + r"-[0-9a-f]{16}", execution["name"]), "the run id and an unguessable part"
    arn = run_of(dag_stack).execution_arn
    assert arn is not None
    started = json.loads(dag_stack.stepfunctions.describe_execution(executionArn=arn)["input"])
    assert dag_stack.workflows.start(arn, started) == arn  # this run's own start is adopted
    with pytest.raises(ExecutionNotOurs):
        dag_stack.workflows.start(arn, {**started, "run_id": "someone-else"})
    assert len(dag_stack.stepfunctions.list_executions(stateMachineArn=machine)["executions"]) == 1
    assert sorted(event["payload"]["task"] for _, event in dag_stack.lambdas.calls) == ["a", "b"]


def test_a_crash_after_recording_a_task_is_completed_by_the_redelivery(dag_stack: Stack, clock: Clock) -> None:
    from tests.aws.harness import Crash

    crashed: list[str] = []

    def crash_once(step: str) -> None:
        if step == "record_task" and not crashed:
            crashed.append(step)
            raise Crash(step)

    dag_stack.worker.after_step = crash_once
    dag_stack.register(dag_job(lambda_task("a"), lambda_task("b", "a")))
    dag_stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    drive(dag_stack, lambda: bool(crashed))
    drive(dag_stack, finished(dag_stack))  # the message comes back: report again, then advance

    assert crashed and run_of(dag_stack).status is RunStatus.SUCCEEDED
    assert sorted(event["payload"]["task"] for _, event in dag_stack.lambdas.calls) == ["a", "b"]


def test_the_definition_follows_the_spec_and_an_unchanged_apply_changes_nothing(dag_stack: Stack) -> None:
    document = dag_job(lambda_task("a"), lambda_task("b", "a"))
    spec = dag_stack.register(document)
    deployed = dag_stack.workflows.definition(JOB)
    assert deployed is not None
    assert json.loads(deployed) == compile_definition(spec, queue_url=dag_stack.queue_urls["normal"])
    assert dag_stack.dags.deploy(spec) is False  # same spec, same definition: no update

    changed = dag_stack.register(dag_job(lambda_task("a"), lambda_task("b", "a"), lambda_task("c", "b")))
    updated = dag_stack.workflows.definition(JOB)
    assert updated is not None and updated != deployed
    branches = json.loads(updated)["States"]["all tasks"]["Branches"]
    assert [branch["StartAt"] for branch in branches] == ["a", "b", "c"]
    assert definition_text(compile_definition(changed, queue_url=dag_stack.queue_urls["normal"])) == definition_text(
        json.loads(updated)
    )

    stored = dag_stack.jobs.get(JOB)
    assert stored is not None
    from jobsched.registry.jobs import delete_job

    delete_job(dag_stack.jobs, stored, now=dag_stack.clock(), principal="test", dags=dag_stack.dags)
    assert dag_stack.workflows.definition(JOB) is None


def test_the_api_shows_task_states_and_takes_a_callback_task_result(dag_stack: Stack, clock: Clock) -> None:
    from tests.aws.api_client import ApiClient

    api = ApiClient(dag_stack)
    body = {k: v for k, v in dag_job(lambda_task("a"), callback_task("b", "a")).items() if k not in ("name", "team")}
    assert api.call("PUT", "/teams/data/jobs/etl", body).status == 201
    dag_stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    drive(dag_stack, lambda: status(dag_stack).get("b") == "RUNNING")

    view = api.call("GET", f"/teams/data/jobs/etl/runs/{FIRST}").body
    tasks = {task["name"]: task for task in view["tasks"]}
    assert [task["name"] for task in view["tasks"]] == ["a", "b"]
    assert tasks["a"]["status"] == "SUCCEEDED" and tasks["a"]["callback_token"] is None
    assert tasks["b"]["status"] == "RUNNING" and tasks["b"]["depends_on"] == ["a"]
    token = tasks["b"]["callback_token"]
    assert api.callback("heartbeat", token).status == 200
    kept_for_runs = api.callback("heartbeat", token, {"checkpoint": {"offset": 3}})  # said, not dropped silently
    assert kept_for_runs.status == 422 and kept_for_runs.body["error"]["code"] == "progress_not_kept_for_tasks"
    done = api.callback("complete", token, {"status": "succeeded", "output": "ok"})
    assert done.status == 200, done.body
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    again = api.callback("complete", token, {"status": "succeeded"})
    assert again.status == 409  # the attempt is over: its token changes nothing


def test_a_parked_task_with_heartbeat_seconds_is_kept_alive_while_it_waits(dag_stack: Stack, clock: Clock) -> None:

    start_run(dag_stack, clock, dag_job(callback_task("a"), callback_task("b", "a", heartbeat_timeout="3m")))
    drive(dag_stack, lambda: status(dag_stack) == {"a": "RUNNING", "b": "WAITING"})
    sent: list[str] = []
    beat = dag_stack.stepfunctions.send_task_heartbeat

    def spy(**request: Any) -> Any:
        sent.append(request["taskToken"])
        return beat(**request)

    dag_stack.stepfunctions.send_task_heartbeat = spy
    checker = heartbeat_checker(dag_stack.runs, dag_stack.worker)
    assert checker.check(clock()).parked_heartbeats == 0  # not due yet
    for _ in range(3):  # the state's HeartbeatSeconds is 180: a heartbeat each minute before it runs out
        clock.advance(timedelta(seconds=61))
        assert checker.check(clock()).parked_heartbeats == 1
    assert sent == [tasks_of(dag_stack)["b"].token] * 3

    complete(dag_stack, "a")
    drive(dag_stack, lambda: status(dag_stack)["b"] == "RUNNING")
    clock.advance(timedelta(minutes=5))
    assert checker.check(clock()).parked_heartbeats == 0  # running: off the index, its own heartbeats count
    complete(dag_stack, "b")
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED


def test_a_dag_task_cannot_invoke_another_teams_function(dag_stack: Stack, clock: Clock) -> None:
    """Tenant isolation holds for DAG tasks: the task fails, naming the function and the team; nothing is called."""
    dag_stack.function("other-team-load", {OWNER_TAG: "payments"})
    dag_stack.lambdas.functions["other-team-load"] = lambda event: {}
    start_run(dag_stack, clock, dag_job(lambda_task("a"), lambda_task("b", "a", function="other-team-load")))
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.FAILED
    b = tasks_of(dag_stack)["b"]
    assert b.status is TaskStatus.FAILED and "Lambda function 'other-team-load' belongs to another team" in (
        b.error or ""
    )
    assert [name for name, _ in dag_stack.lambdas.calls] == ["echo"], "only the team's own task ran"
