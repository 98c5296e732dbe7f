"""Fan-out over a list on moto's Step Functions interpreter: a map task runs its target once per item of a list
an upstream task returned (an inline Map state), at most max_concurrency at once, each item retried by the
task's policy; it succeeds while the items that failed stay within the tolerated percentage."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.console import run_page
from jobsched.core.runs import RunStatus, TaskStatus
from tests.aws.api_client import ApiClient, cli_as, team_role
from tests.aws.harness import Clock, FakeLambdas, Stack
from tests.aws.test_dag import (
    FIRST,
    dag_job,
    drive,
    finished,
    lambda_task,
    rerun,
    run_of,
    start_run,
    tasks_of,
    transitions,
)


def map_task(tolerated: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": "each",
        "depends_on": ["list"],
        "map": {
            "over": "{{ tasks.list.output.parts }}",
            "max_concurrency": 5,
            "tolerated_failure_percentage": tolerated,
        },
        "target": {"type": "lambda", "function": "part", "payload": {"part": "{{ item.key }}", "n": "{{ item.n }}"}},
        **extra,
    }


def fifty_parts(lambdas: FakeLambdas, *, failing: set[int]) -> dict[str, list[int]]:
    calls: dict[str, list[int]] = {"part": []}

    def part(event: Any) -> Any:
        n = event["payload"]["n"]
        calls["part"].append(n)
        if n in failing:
            raise RuntimeError(f"part {n} is corrupt")
        return {"rows": n}

    lambdas.functions |= {
        "list": lambda event: {"parts": [{"key": f"part-{n:02d}.csv", "n": n} for n in range(50)]},
        "part": part,
        "report": lambda event: {"ok": True},
    }
    return calls


def test_a_map_over_50_items_with_2_failing_succeeds_within_a_10_percent_tolerance(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fifty_parts(lambdas, failing={7, 31})
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("list", function="list"),
            map_task(10, retry={"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}}),
            lambda_task("report", "each", function="report"),
        ),
    )
    drive(dag_stack, finished(dag_stack), seconds=120)
    tasks = tasks_of(dag_stack)
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    assert tasks["each"].status is TaskStatus.SUCCEEDED and tasks["report"].status is TaskStatus.SUCCEEDED
    items = {name: state for name, state in tasks.items() if name.startswith("each[")}
    assert len(items) == 50
    failed = sorted(name for name, state in items.items() if state.status is TaskStatus.FAILED)
    assert failed == ["each[31]", "each[7]"]
    assert {state.attempt for name, state in items.items() if name in failed} == {2}  # each retried by the policy
    assert sorted(calls["part"]) == sorted([*range(50), 7, 31])  # every item once, the failing ones twice
    assert tasks["each"].output == '{"items": 50, "succeeded": 48, "failed": 2}'
    view = ApiClient(dag_stack).call("GET", f"/teams/data/jobs/etl/runs/{FIRST}", principal=team_role("data")).body
    assert [task["name"] for task in view["tasks"]] == ["list", "each", "report"]  # items grouped under their task
    each = next(task for task in view["tasks"] if task["name"] == "each")
    assert each["items"] == {"total": 50, "succeeded": 48, "failed": 2, "running": 0}
    code, printed = cli_as(ApiClient(dag_stack), team_role("data"), monkeypatch)("run", "data/etl", FIRST)
    assert code == 0 and "48/50 ok, 2 failed" in printed, printed  # `jobsched run`'s task table
    page = run_page.gantt(run_of(dag_stack), tasks, ["list", "each", "report"], clock())
    assert "[50 items: 48 succeeded, 2 failed, 0 running]" in page
    # 1 (Parallel) + list + report + map: its list, the Map state, 50 items, 2 retries, 2 caught, its judgement
    assert transitions(dag_stack) == 1 + 1 + 1 + (1 + 1 + 50 + 2 + 2 + 1)


def test_a_map_whose_failures_pass_its_tolerance_fails_and_skips_what_follows(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    fifty_parts(lambdas, failing={0, 8, 16, 24, 32, 40})  # spaced: five failures in a row would open the circuit
    start_run(
        dag_stack,
        clock,
        dag_job(lambda_task("list", function="list"), map_task(10), lambda_task("report", "each", function="report")),
    )
    drive(dag_stack, finished(dag_stack), seconds=120)
    tasks = tasks_of(dag_stack)
    assert tasks["each"].status is TaskStatus.FAILED
    assert tasks["each"].error == "6 of 50 items failed (12%; tolerated 10%)"
    assert tasks["report"].status is TaskStatus.SKIPPED
    assert run_of(dag_stack).status is RunStatus.FAILED


def test_a_map_over_something_that_is_not_a_list_fails_clearly(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    lambdas.functions |= {"list": lambda event: {"parts": "all of them"}, "part": lambda event: {}}
    start_run(dag_stack, clock, dag_job(lambda_task("list", function="list"), map_task(0)))
    drive(dag_stack, finished(dag_stack))
    each = tasks_of(dag_stack)["each"]
    assert each.status is TaskStatus.FAILED and each.error == "map over {{ tasks.list.output.parts }}: str, not a list"


def test_a_map_re_executed_from_its_failure_runs_every_item_again_on_new_attempts(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    calls = fifty_parts(lambdas, failing={0, 8, 16, 24, 32, 40})
    start_run(dag_stack, clock, dag_job(lambda_task("list", function="list"), map_task(10)))
    drive(dag_stack, finished(dag_stack), seconds=120)
    assert run_of(dag_stack).status is RunStatus.FAILED
    lambdas.functions["part"] = lambda event: {"rows": 1}
    rerun(dag_stack, clock, principal="p", from_failure=True)
    dag_stack.pump()
    drive(dag_stack, finished(dag_stack), seconds=120)
    tasks = tasks_of(dag_stack)
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED and tasks["list"].attempt == 1  # kept
    items = [state for name, state in tasks.items() if name.startswith("each[")]
    assert len(items) == 50 and all(s.status is TaskStatus.SUCCEEDED and s.attempt == 2 for s in items)
    assert len(calls["part"]) == 50  # the first execution's calls; the second's went to the new function
