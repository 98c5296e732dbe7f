"""Distributed maps on moto's Step Functions interpreter: a list too long for a task's output (beyond the inline
map's 1,000 items) is an object in the team's bucket, named by an upstream's output or by the spec; the worker
reads it once as the team and counts it, and Step Functions' ItemReader reads the items from S3."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from jobsched.core.item_lists import MAX_DISTRIBUTED_ITEMS
from jobsched.core.names import OWNER_TAG
from jobsched.core.runs import RunStatus, TaskStatus
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import Clock, FakeLambdas, Stack
from tests.aws.test_dag import (
    FIRST,
    dag_job,
    drive,
    execution,
    finished,
    lambda_task,
    rerun,
    run_of,
    start_run,
    tasks_of,
)

LISTS = "data-lists"


def bucket(name: str = LISTS, team: str = "data") -> Any:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=name)
    s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": OWNER_TAG, "Value": team}]})
    return s3


def distributed(over: str, *, tolerated: float = 0, form: str | None = None, **extra: Any) -> dict[str, Any]:
    spec = {"over": over, "mode": "distributed", "max_concurrency": 50, "tolerated_failure_percentage": tolerated}
    return {
        "name": "each",
        "depends_on": ["list"],
        "map": spec | ({"format": form} if form else {}),
        "target": {"type": "lambda", "function": "part", "payload": {"n": "{{ item.n }}"}},
        **extra,
    }


def listing(lambdas: FakeLambdas, uri: str, *, failing: frozenset[int] = frozenset()) -> list[Any]:
    calls: list[Any] = []

    def part(event: Any) -> Any:
        n = event["payload"]["n"]
        calls.append(n)
        if n in failing:
            raise RuntimeError(f"part {n} is corrupt")
        return {"rows": 1}

    lambdas.functions |= {"list": lambda event: {"manifest": uri}, "part": part, "report": lambda event: {"ok": 1}}
    return calls


def test_a_distributed_map_runs_1100_items_of_the_teams_object_within_its_tolerance(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    s3 = bucket()
    s3.put_object(Bucket=LISTS, Key="runs/parts.json", Body=json.dumps([{"n": n} for n in range(1100)]))
    calls = listing(lambdas, f"s3://{LISTS}/runs/parts.json", failing=frozenset({100, 600, 1000}))
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("list", function="list"),
            distributed("{{ tasks.list.output.manifest }}", tolerated=1),
            lambda_task("report", "each", function="report"),
        ),
    )
    drive(dag_stack, finished(dag_stack), seconds=240)
    tasks = tasks_of(dag_stack)
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED, tasks["each"]
    assert tasks["each"].output == '{"items": 1100, "succeeded": 1097, "failed": 3}'
    items = {name: state for name, state in tasks.items() if name.startswith("each[")}
    assert len(items) == 1100
    failed = {name for name, state in items.items() if state.status is TaskStatus.FAILED}
    assert failed == {"each[100]", "each[600]", "each[1000]"}
    assert sorted(calls) == list(range(1100))  # every item once (no retry policy)
    assert tasks["report"].status is TaskStatus.SUCCEEDED
    view = ApiClient(dag_stack).call("GET", f"/teams/data/jobs/etl/runs/{FIRST}", principal=team_role("data")).body
    each = next(task for task in view["tasks"] if task["name"] == "each")
    assert each["items"] == {"total": 1100, "succeeded": 1097, "failed": 3, "running": 0}
    history = dag_stack.stepfunctions.get_execution_history(executionArn=run_of(dag_stack).execution_arn)
    assert any(event["type"] == "MapRunStarted" for event in history["events"])  # a Map Run: the distributed mode


def test_a_csv_object_named_by_the_spec_is_read_for_the_runs_date_one_item_a_row(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    s3 = bucket()
    s3.put_object(Bucket=LISTS, Key="accounts/2027-01-04.csv", Body=b"account,region\n111,eu-west-1\n222,us-east-1\n")
    s3.put_object(Bucket=LISTS, Key="accounts/2027-01-03.csv", Body=b"account,region\n999,eu-west-1\n")
    seen: list[Any] = []

    def part(event: Any) -> Any:
        seen.append(event["payload"])
        return {}

    lambdas.functions |= {"list": lambda event: {}, "part": part}
    task = distributed(f"s3://{LISTS}/accounts/{{logical_date:%Y-%m-%d}}.csv", form="csv")
    task["target"]["payload"] = {"account": "{{ item.account }}", "region": "{{ item.region }}"}
    start_run(dag_stack, clock, dag_job(lambda_task("list", function="list"), task))
    drive(dag_stack, finished(dag_stack), seconds=60)
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    assert sorted(seen, key=str) == [
        {"account": "111", "region": "eu-west-1"},
        {"account": "222", "region": "us-east-1"},
    ]


def test_an_empty_list_succeeds_with_no_items_and_what_follows_runs(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    bucket().put_object(Bucket=LISTS, Key="runs/none.json", Body=b"[]")
    calls = listing(lambdas, f"s3://{LISTS}/runs/none.json")
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("list", function="list"),
            distributed("{{ tasks.list.output.manifest }}"),
            lambda_task("report", "each", function="report"),
        ),
    )
    drive(dag_stack, finished(dag_stack), seconds=60)
    tasks = tasks_of(dag_stack)
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED and calls == []
    assert tasks["each"].output == '{"items": 0, "succeeded": 0, "failed": 0}'
    assert execution(dag_stack)["status"] == "SUCCEEDED"


@pytest.mark.parametrize(
    ("uri", "body", "error"),
    [
        ("s3://ads-lists/runs/parts.json", None, "S3 bucket 'ads-lists' belongs to another team; team 'data' may not"),
        (f"s3://{LISTS}/runs/absent.json", None, "no such object"),
        (f"s3://{LISTS}/runs/parts.json", b'{"parts": []}', "the object holds a JSON object, not a list"),
        (
            f"s3://{LISTS}/runs/parts.json",
            json.dumps([{"n": n} for n in range(MAX_DISTRIBUTED_ITEMS + 1)]).encode(),
            f"more than {MAX_DISTRIBUTED_ITEMS} items; at most {MAX_DISTRIBUTED_ITEMS}",
        ),
        ("/etc/passwd", None, "'/etc/passwd' is not s3://bucket/key"),
    ],
    ids=["another-teams-bucket", "absent", "not-a-list", "too-many-items", "not-an-s3-uri"],
)
def test_an_object_the_map_may_not_or_cannot_run_over_fails_its_task_unretried_and_calls_nothing(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas, uri: str, body: bytes | None, error: str
) -> None:
    s3 = bucket()
    bucket("ads-lists", team="ads").put_object(Bucket="ads-lists", Key="runs/parts.json", Body=b'[{"n": 1}]')
    if body is not None:
        s3.put_object(Bucket=LISTS, Key="runs/parts.json", Body=body)
    calls = listing(lambdas, uri)
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("list", function="list"),
            distributed("{{ tasks.list.output.manifest }}", retry={"max_attempts": 3}),
        ),
    )
    drive(dag_stack, finished(dag_stack), seconds=60)
    each = tasks_of(dag_stack)["each"]
    assert each.status is TaskStatus.FAILED and each.attempt == 1, each
    assert each.error is not None and error in each.error
    assert run_of(dag_stack).status is RunStatus.FAILED and calls == []


def test_put_refuses_a_distributed_map_over_another_teams_bucket_on_its_field(dag_stack: Stack) -> None:
    bucket("ads-lists", team="ads")
    job = dag_job(lambda_task("list"), distributed("s3://ads-lists/accounts.json"))
    refused = ApiClient(dag_stack).call("PUT", "/teams/data/jobs/etl", job, principal=team_role("data"))
    assert refused.status == 422, refused.body
    [error] = refused.body["error"]["errors"]
    assert (error["field"], error["code"]) == ("dag.tasks[1].map.over", "resource_not_owned")
    bad = dag_job(lambda_task("list"), distributed("https://ads.example/accounts.json"))
    refused = ApiClient(dag_stack).call("PUT", "/teams/data/jobs/etl", bad, principal=team_role("data"))
    assert refused.status == 422 and refused.body["error"]["errors"][0]["code"] == "invalid_map", refused.body


def test_a_distributed_map_re_executed_from_its_failure_reads_the_object_again_and_runs_every_item_anew(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    s3 = bucket()
    s3.put_object(Bucket=LISTS, Key="runs/parts.json", Body=json.dumps([{"n": n} for n in range(20)]))
    listing(lambdas, f"s3://{LISTS}/runs/parts.json", failing=frozenset({3, 11}))
    start_run(
        dag_stack, clock, dag_job(lambda_task("list", function="list"), distributed("{{ tasks.list.output.manifest }}"))
    )
    drive(dag_stack, finished(dag_stack), seconds=60)
    assert run_of(dag_stack).status is RunStatus.FAILED
    assert tasks_of(dag_stack)["each"].error == "2 of 20 items failed (10%; tolerated 0%)"
    s3.put_object(Bucket=LISTS, Key="runs/parts.json", Body=json.dumps([{"n": n} for n in range(25)]))  # grew
    calls = listing(lambdas, f"s3://{LISTS}/runs/parts.json")
    rerun(dag_stack, clock, principal="p", from_failure=True)
    dag_stack.pump()
    drive(dag_stack, finished(dag_stack), seconds=60)
    tasks = tasks_of(dag_stack)
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED and tasks["list"].attempt == 1  # kept, not called again
    items = [state for name, state in tasks.items() if name.startswith("each[")]
    assert len(items) == 25 and all(state.status is TaskStatus.SUCCEEDED for state in items)
    assert {state.attempt for state in items} == {2}  # past the first execution's attempts, its 20 items' and new
    assert sorted(calls) == list(range(25))
    assert tasks["each"].output == '{"items": 25, "succeeded": 25, "failed": 0}'
