"""Approval tasks on moto's Step Functions interpreter: a DAG run waits for a person of the team, holding
nothing; the team's channel is paged with a link; approved (the tasks after it run and may read who approved),
rejected (FAILED, not retried, the tasks after it skipped, the run CANCELLED and nobody paged unless the task
asks) or timed out; the approver in the history."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from jobsched.console.actions import ActionStores, handle_action
from jobsched.console.widget import Viewer, WidgetControls, render_widget
from jobsched.core.messages import DagTaskFailure
from jobsched.core.run_records import StaleAttempt
from jobsched.core.runs import RunStatus, TaskStatus
from jobsched.dag.definition import compile_definition
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.pipeline.ends import AttemptRef, Reported
from tests.aws.api_client import ApiClient, cli_as, team_role
from tests.aws.harness import Clock, FakeLambdas, Stack
from tests.aws.test_dag import FIRST, JOB, dag_job, drive, finished, run_of, start_run, tasks_of

APPROVE = {
    "name": "approve",
    "target": {"type": "approval", "timeout": "2h", "message": "Delete the 40 snapshots listed in the report?"},
}
CLEANUP = {
    "name": "cleanup",
    "depends_on": ["approve"],
    "target": {
        "type": "lambda",
        "function": "cleanup",
        "payload": {"approved_by": "{{ tasks.approve.output.by }}", "why": "{{ tasks.approve.output.comment }}"},
    },
}
PATH = f"/teams/data/jobs/etl/runs/{FIRST}/tasks/approve"


@pytest.fixture
def waiting(dag_stack: Stack, clock: Clock, lambdas: FakeLambdas) -> Stack:
    """The run started; its approval task waits (RUNNING, its token held by the state, no Lambda running)."""
    lambdas.functions["cleanup"] = lambda event: {"deleted": 40}
    start_run(dag_stack, clock, dag_job(APPROVE, CLEANUP, retry={"max_attempts": 3}))
    drive(dag_stack, lambda: (t := tasks_of(dag_stack).get("approve")) is not None and t.status is TaskStatus.RUNNING)
    return dag_stack


def test_an_approval_pages_the_team_with_a_link_and_approved_the_tasks_after_it_run(
    waiting: Stack, lambdas: FakeLambdas, monkeypatch: pytest.MonkeyPatch
) -> None:
    [requested] = [e for e in waiting.escalations() if e["kind"] == "approval_requested"]
    assert requested["detail"] == "task approve waits for approval: Delete the 40 snapshots listed in the report?"
    waiting.escalator.handle(EscalationEvent.model_validate(requested))
    [page] = waiting.pages()
    assert page["subject"].startswith("[jobsched, approval] data/etl: approval requested")
    assert "severity: info" in page["message"] and f"/teams/data/jobs/etl/runs/{FIRST}" in page["message"]

    api = ApiClient(waiting)
    outsider = api.call("POST", f"{PATH}/approve", {"comment": "ok"}, principal=team_role("payments"))
    assert outsider.status == 403  # only the team's members decide
    code, output = cli_as(api, team_role("data"), monkeypatch)(
        "approve", "data/etl", FIRST, "approve", "--comment", "checked the list"
    )
    assert code == 0, output
    drive(waiting, finished(waiting))
    assert run_of(waiting).status is RunStatus.SUCCEEDED
    [(_, cleanup)] = [(n, e) for n, e in lambdas.calls if n == "cleanup"]
    assert cleanup["payload"] == {"approved_by": team_role("data"), "why": "checked the list"}
    approve = tasks_of(waiting)["approve"]
    assert json.loads(approve.output or "{}") == {
        "decision": "approved",
        "by": team_role("data"),
        "comment": "checked the list",
    }
    history = api.call("GET", "/teams/data/jobs/etl/history").body["entries"]
    entry = next(e for e in history if e["action"] == "approved")
    assert entry["principal"] == team_role("data") and entry["details"]["comment"] == "checked the list"
    again = api.call("POST", f"{PATH}/approve", principal=team_role("data"))
    assert again.status == 409 and again.body["error"]["code"] == "nothing_to_decide"


def test_a_rejected_approval_fails_unretried_and_skips_what_needs_it(waiting: Stack, lambdas: FakeLambdas) -> None:
    api = ApiClient(waiting)
    rejected = api.call("POST", f"{PATH}/reject", {"comment": "list is wrong"}, principal=team_role("data"))
    assert rejected.status == 200, rejected.body
    drive(waiting, finished(waiting))
    tasks = tasks_of(waiting)
    assert (tasks["approve"].status, tasks["approve"].attempt) == (TaskStatus.FAILED, 1)  # job retries 3: not used
    assert tasks["approve"].error == f"rejected by {team_role('data')}: list is wrong"
    assert tasks["cleanup"].status is TaskStatus.SKIPPED and not [n for n, _ in lambdas.calls if n == "cleanup"]
    # A decision, not a failure (#46): CANCELLED with who and why, the approval's page resolved, nobody paged.
    run = run_of(waiting)
    assert run.status is RunStatus.CANCELLED
    assert run.error == f"task approve rejected by {team_role('data')}: list is wrong"
    kinds = [event["kind"] for event in waiting.escalations()]
    assert "approval_decided" in kinds and not {"run_failed", "run_timed_out"} & set(kinds), kinds


def test_a_job_that_asks_is_paged_when_its_approval_is_rejected(dag_stack: Stack, clock: Clock) -> None:
    asks = APPROVE | {"target": {**APPROVE["target"], "page_on_reject": True}}  # type: ignore[dict-item]
    start_run(dag_stack, clock, dag_job(asks, CLEANUP))
    drive(dag_stack, lambda: (t := tasks_of(dag_stack).get("approve")) is not None and t.status is TaskStatus.RUNNING)
    rejected = ApiClient(dag_stack).call("POST", f"{PATH}/reject", {"comment": "no"}, principal=team_role("data"))
    assert rejected.status == 200, rejected.body
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.FAILED
    assert "run_failed" in [event["kind"] for event in dag_stack.escalations()]


def test_an_unanswered_approval_times_out_and_a_late_answer_changes_nothing(waiting: Stack) -> None:
    # The state's TimeoutSeconds (2 h + its margin) ends the wait; its Catch sends what it sends in AWS.
    run = run_of(waiting)
    notice = DagTaskFailure(
        job=JOB,
        team="data",
        run_id=FIRST,
        task="approve",
        error="States.Timeout",
        cause="",
        execution=run.execution_arn,
    )
    waiting.worker.dags.task_failed(notice)
    assert tasks_of(waiting)["approve"].status is TaskStatus.TIMED_OUT
    drive(waiting, finished(waiting))
    assert run_of(waiting).status is RunStatus.FAILED and tasks_of(waiting)["cleanup"].status is TaskStatus.SKIPPED
    late = ApiClient(waiting).call("POST", f"{PATH}/approve", principal=team_role("data"))
    assert late.status == 409
    kinds = [e["kind"] for e in waiting.escalations()]
    assert "approval_decided" in kinds


def test_an_approval_unanswered_past_its_states_timeout_ends_timed_out_through_the_interpreter(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    """The whole path as AWS runs it: the state's own TimeoutSeconds fires States.Timeout, its Catch reports to the
    worker, the task ends TIMED_OUT. The deployed definition's 2 h + margin is shortened to 2 s for the test."""
    lambdas.functions["cleanup"] = lambda event: {"deleted": 40}
    dag_stack.register(dag_job(APPROVE, CLEANUP))
    machine = dag_stack.workflows.machine_arn(JOB)
    definition = json.loads(dag_stack.stepfunctions.describe_state_machine(stateMachineArn=machine)["definition"])
    state = definition["States"]["all tasks"]["Branches"][0]["States"]["approve"]
    assert state["TimeoutSeconds"] == 2 * 3600 + 60
    state["TimeoutSeconds"] = 2
    dag_stack.stepfunctions.update_state_machine(stateMachineArn=machine, definition=json.dumps(definition))
    dag_stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    dag_stack.pump()
    drive(dag_stack, lambda: (t := tasks_of(dag_stack).get("approve")) is not None and t.status is TaskStatus.RUNNING)
    drive(dag_stack, finished(dag_stack), seconds=30)  # nobody answers
    tasks = tasks_of(dag_stack)
    assert tasks["approve"].status is TaskStatus.TIMED_OUT and tasks["cleanup"].status is TaskStatus.SKIPPED
    assert run_of(dag_stack).status is RunStatus.FAILED
    assert ApiClient(dag_stack).call("POST", f"{PATH}/approve", principal=team_role("data")).status == 409


def test_an_approval_is_never_decided_with_a_callback_token_and_its_state_waits_without_retries(
    waiting: Stack,
) -> None:
    with pytest.raises(StaleAttempt, match="approved or rejected by a member of the team"):
        waiting.worker.ends.complete(
            AttemptRef(JOB, FIRST, 1, "approve"), Reported(succeeded=True, output="{}", error=None)
        )
    view = ApiClient(waiting).call("GET", f"/teams/data/jobs/etl/runs/{FIRST}", principal=team_role("data")).body
    assert next(t for t in view["tasks"] if t["name"] == "approve")["callback_token"] is None
    stored = waiting.jobs.get(JOB)
    assert stored is not None
    state = compile_definition(stored.spec, queue_url="q")["States"]["all tasks"]["Branches"][0]["States"]["approve"]
    assert "Retry" not in state and state["TimeoutSeconds"] == 2 * 3600 + 60
    bad = ApiClient(waiting).call("POST", f"/teams/data/jobs/etl/runs/{FIRST}/tasks/cleanup/approve")
    assert bad.status == 422 and bad.body["error"]["code"] == "not_an_approval"


def test_the_console_run_page_approves_a_waiting_approval_as_the_person_it_names(
    waiting: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    actions_fn = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-test-ConsoleActions"
    params = {"view": "run", "team": "data", "job": "etl", "run_id": FIRST}
    shown: dict[str, Any] = {"widgetContext": {"params": params}}
    controls = WidgetControls(actions_fn, frozenset({"data"}))
    page = render_widget(shown, waiting.jobs, waiting.runs, clock(), controls, viewer=Viewer("data"))
    bodies = [json.loads(body) for body in re.findall(r'<cwdb-action action="call"[^>]*>([^<]+)<', page)]
    assert [(b["action"], b["task"]) for b in bodies] == [("approve", "approve"), ("reject", "approve")]
    assert "Delete the 40 snapshots listed in the report?" in page
    stores = ActionStores(waiting.jobs, waiting.runs, waiting.queues, dags=waiting.worker.dags)
    event = {**bodies[0], "widgetContext": {"forms": {"all": {}}, "params": params}}
    done = handle_action(
        event, invoked_function_arn=f"{actions_fn}:team-data", request_id="r1", stores=stores, now=clock()
    )
    assert done.ok, done
    drive(waiting, finished(waiting))
    assert run_of(waiting).status is RunStatus.SUCCEEDED
    assert json.loads(tasks_of(waiting)["approve"].output or "{}")["by"].startswith("console:")
