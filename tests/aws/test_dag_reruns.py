"""Re-execution of DAG runs on moto's Step Functions interpreter: from the failure (succeeded tasks and their
outputs kept), named tasks with or without their downstream tasks, on the same run id and instant with new
fenced attempts, audited; two concurrent re-executions start one; a late result of the old execution is
refused."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest

from jobsched.console.actions import ActionStores, handle_action
from jobsched.console.widget import Viewer, WidgetControls, render_widget
from jobsched.core.run_records import StaleAttempt
from jobsched.core.runs import RunStatus, TaskStatus
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.manual_runs import start_backfill
from jobsched.pipeline.reruns import RerunRefused, RerunUnsupported, RunInFlight
from tests.aws.api_client import ApiClient, cli_as, team_role
from tests.aws.harness import Clock, FakeLambdas, Stack, at
from tests.aws.test_dag import (
    FIRST,
    JOB,
    callback_task,
    complete,
    dag_job,
    drive,
    finished,
    lambda_task,
    rerun,
    run_of,
    start_run,
    tasks_of,
)

ACTIONS_FN = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-test-ConsoleActions"
LOAD = {
    "name": "load",
    "depends_on": ["transform"],
    "target": {"type": "lambda", "function": "load", "payload": {"files": "{{ tasks.extract.output.files }}"}},
}


@pytest.fixture
def pipeline(lambdas: FakeLambdas) -> dict[str, Any]:
    """extract -> transform (down until fixed) -> load, which reads extract's output."""
    state = {"transform_up": False, "extracted": 0}

    def extract(event: Any) -> Any:
        state["extracted"] += 1
        return {"files": [f"part-{state['extracted']}.csv"]}

    def transform(event: Any) -> Any:
        if not state["transform_up"]:
            raise RuntimeError("warehouse is down")
        return {"ok": True}

    lambdas.functions |= {"extract": extract, "transform": transform, "load": lambda event: {"ok": True}}
    return state


def ran_once(stack: Stack, clock: Clock) -> None:
    start_run(
        stack,
        clock,
        dag_job(
            lambda_task("extract", function="extract"), lambda_task("transform", "extract", function="transform"), LOAD
        ),
    )
    drive(stack, finished(stack))


def failed_run(stack: Stack, clock: Clock) -> None:
    ran_once(stack, clock)
    assert run_of(stack).status is RunStatus.FAILED
    assert {n: s.status for n, s in tasks_of(stack).items()} == {
        "extract": TaskStatus.SUCCEEDED,
        "transform": TaskStatus.FAILED,
        "load": TaskStatus.SKIPPED,
    }


def test_from_failure_keeps_the_succeeded_task_and_its_output_and_runs_the_rest(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas, pipeline: dict[str, Any]
) -> None:
    failed_run(dag_stack, clock)
    before = {name: state.attempt for name, state in tasks_of(dag_stack).items()}  # load: 0 or 1 (skipped)
    pipeline["transform_up"] = True
    reopened = rerun(dag_stack, clock, from_failure=True)
    assert reopened.status is RunStatus.RETRYING and reopened.rerun_tasks == ["transform", "load"]
    dag_stack.pump()
    drive(dag_stack, finished(dag_stack))
    run = run_of(dag_stack)
    assert (run.status, run.run_id, run.attempt) == (RunStatus.SUCCEEDED, FIRST, 2)  # same run and instant
    tasks = tasks_of(dag_stack)
    assert {n: (s.status, s.attempt) for n, s in tasks.items()} == {
        "extract": (TaskStatus.SUCCEEDED, 1),  # kept: not executed again
        "transform": (TaskStatus.SUCCEEDED, 2),  # a new attempt, after the first execution's
        "load": (TaskStatus.SUCCEEDED, before["load"] + 1),
    }
    assert pipeline["extracted"] == 1
    [(_, load)] = [(n, e) for n, e in lambdas.calls if n == "load"]
    assert load["payload"] == {"files": ["part-1.csv"]}  # the kept output of the first execution's extract
    history = ApiClient(dag_stack).call("GET", "/teams/data/jobs/etl/history").body["entries"]
    entry = next(e for e in history if e["action"] == "rerun")
    assert entry["principal"] == "data-oncall"
    details = entry["details"]
    assert (details["from_failure"], details["tasks"], details["was"]) == (True, ["load", "transform"], "FAILED")


def test_named_tasks_rerun_alone_or_with_their_downstream_tasks(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas, pipeline: dict[str, Any]
) -> None:
    pipeline["transform_up"] = True
    ran_once(dag_stack, clock)
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED

    assert rerun(dag_stack, clock, tasks=("transform",)).rerun_tasks == ["transform"]  # a succeeded run: allowed
    dag_stack.pump()
    drive(dag_stack, finished(dag_stack))
    assert {n: s.attempt for n, s in tasks_of(dag_stack).items()} == {"extract": 1, "transform": 2, "load": 1}

    assert rerun(dag_stack, clock, tasks=("extract",), downstream=True).rerun_tasks == ["extract", "transform", "load"]
    dag_stack.pump()
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    assert {n: s.attempt for n, s in tasks_of(dag_stack).items()} == {"extract": 2, "transform": 3, "load": 2}
    loads = [e["payload"] for n, e in lambdas.calls if n == "load"]
    assert loads[-1] == {"files": ["part-2.csv"]}  # the new extract's output, not the first one's


def test_two_concurrent_re_executions_start_one_and_a_rerun_asks_for_what_the_run_can_do(
    dag_stack: Stack, clock: Clock, pipeline: dict[str, Any]
) -> None:
    failed_run(dag_stack, clock)
    read = run_of(dag_stack)
    with pytest.raises(RerunUnsupported, match="no task nope in data/etl"):
        rerun(dag_stack, clock, tasks=("nope",))
    rerun(dag_stack, clock, from_failure=True)
    with pytest.raises(StaleAttempt):  # the second read FAILED too, but its conditional write loses
        dag_stack.runs.reopen(
            JOB,
            FIRST,
            expected_status=read.status,
            attempt=read.attempt,
            now=clock(),
            retention=timedelta(days=1),
            reason="second",
            rerun_tasks=["transform"],
        )
    with pytest.raises(RunInFlight):
        rerun(dag_stack, clock, from_failure=True)
    pipeline["transform_up"] = True
    dag_stack.pump()
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED, tasks_of(dag_stack)
    with pytest.raises(RerunRefused, match="no task failed"):
        rerun(dag_stack, clock, from_failure=True)


def test_a_late_result_of_the_old_execution_is_refused(dag_stack: Stack, clock: Clock) -> None:
    start_run(dag_stack, clock, dag_job(callback_task("wait")))
    drive(
        dag_stack,
        lambda: (
            tasks_of(dag_stack).get("wait") is not None and tasks_of(dag_stack)["wait"].status is TaskStatus.RUNNING
        ),
    )
    dag_stack.worker.ends.complete(
        AttemptRef(JOB, FIRST, 1, "wait"), Reported(succeeded=False, output=None, error="boom")
    )
    drive(dag_stack, finished(dag_stack))
    rerun(dag_stack, clock, from_failure=True)
    dag_stack.pump()
    drive(
        dag_stack,
        lambda: tasks_of(dag_stack)["wait"].attempt == 2 and tasks_of(dag_stack)["wait"].status is TaskStatus.RUNNING,
    )
    with pytest.raises(StaleAttempt):
        complete(dag_stack, "wait", attempt=1)  # the first execution's attempt is over
    complete(dag_stack, "wait", attempt=2)
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED


def test_the_api_and_jobsched_rerun_re_execute_from_the_failure(
    dag_stack: Stack, clock: Clock, pipeline: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    failed_run(dag_stack, clock)
    api = ApiClient(dag_stack)
    path = f"/teams/data/jobs/etl/runs/{FIRST}/rerun"
    unknown = api.call("POST", path, {"tasks": ["nope"]}, principal=team_role("data"))
    assert unknown.status == 422 and unknown.body["error"]["field"] == "tasks", unknown.body
    code, output = cli_as(api, team_role("data"), monkeypatch)("rerun", "data/etl", FIRST, "--from-failure")
    assert code == 0, output
    assert run_of(dag_stack).rerun_tasks == ["transform", "load"]
    busy = api.call("POST", path, {"from_failure": True}, principal=team_role("data"))
    assert busy.status == 409 and busy.body["error"]["code"] == "run_in_flight"


def test_the_console_run_page_re_executes_a_dag_run_from_its_failure(
    dag_stack: Stack, clock: Clock, pipeline: dict[str, Any]
) -> None:
    failed_run(dag_stack, clock)
    controls = WidgetControls(ACTIONS_FN, frozenset({"data"}))
    params = {"view": "run", "team": "data", "job": "etl", "run_id": FIRST}
    shown: dict[str, Any] = {"widgetContext": {"params": params}}
    page = render_widget(shown, dag_stack.jobs, dag_stack.runs, clock(), controls, viewer=Viewer("data"))
    bodies = [json.loads(body) for body in re.findall(r'<cwdb-action action="call"[^>]*>([^<]+)<', page)]
    assert [body["action"] for body in bodies] == ["rerun_from_failure", "rerun"]
    event = {**bodies[0], "widgetContext": {"forms": {"all": {}}, "params": params}}
    stores = ActionStores(dag_stack.jobs, dag_stack.runs, dag_stack.queues)
    done = handle_action(
        event, invoked_function_arn=f"{ACTIONS_FN}:team-data", request_id="r1", stores=stores, now=clock()
    )
    assert done.ok and done.status == 202 and "runs again: transform, load" in done.message, done
    assert run_of(dag_stack).rerun_tasks == ["transform", "load"]


def test_a_range_rerun_by_status_re_executes_a_failed_dag_run_in_a_new_execution(
    dag_stack: Stack, clock: Clock, pipeline: dict[str, Any]
) -> None:
    failed_run(dag_stack, clock)
    first_execution = run_of(dag_stack).execution_arn
    pipeline["transform_up"] = True
    start_backfill(
        dag_stack.jobs,
        JOB,
        start=at("2027-01-04T08:30:00Z"),
        end=at("2027-01-04T09:00:00Z"),
        max_in_flight=1,
        now=clock(),
        principal="data-oncall",
        statuses=frozenset({RunStatus.FAILED}),
    )
    dag_stack.tick()  # the dispatcher paces backfills: it reopens the run and sends its next attempt
    dag_stack.pump()
    drive(dag_stack, finished(dag_stack))
    run = run_of(dag_stack)
    assert run.status is RunStatus.SUCCEEDED and run.attempt == 2
    assert run.execution_arn is not None and run.execution_arn != first_execution  # a new execution ran it
    assert {name: state.status for name, state in tasks_of(dag_stack).items()} == {
        "extract": TaskStatus.SUCCEEDED,
        "transform": TaskStatus.SUCCEEDED,
        "load": TaskStatus.SUCCEEDED,
    }
    assert pipeline["extracted"] == 2  # a range rerun runs every task again
