"""Waits for data against moto: the object's Object Created goes from S3 to EventBridge, through the job's wake
rule to the intake queue, and wakes the WAITING run; a DAG task waits the same way inside its state machine
(the reference's nightly: a first task waits for the file, the rest retry with backoff, a failure pages)."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from jobsched.core.runs import RunStatus, TaskStatus
from jobsched.pipeline.triggers import trigger_run
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import Clock, Stack
from tests.aws.test_dag import drive, lambda_task
from tests.aws.test_event_triggers import landing_bucket

READY = "s3://acme-landing/exports/{logical_date:%Y-%m-%d}/_SUCCESS"


def waiting_job(**extra: Any) -> dict[str, Any]:
    return {"target": {"type": "lambda", "function": "echo"}, "wait_for": [{"s3": READY}], **extra}


def test_another_teams_bucket_is_refused_at_put_on_the_wait_field(stack: Stack) -> None:
    landing_bucket(stack, "payments", "payments-landing")
    api = ApiClient(stack)
    document = waiting_job(wait_for=[{"s3": "s3://payments-landing/x/_SUCCESS"}])
    refused = api.call("PUT", "/teams/data/jobs/steal", document, principal=team_role("data"))
    assert refused.status == 422, refused.body
    [error] = refused.body["error"]["errors"]
    assert (error["field"], error["code"]) == ("wait_for[0].s3", "resource_not_owned")
    bad = api.call("PUT", "/teams/data/jobs/bad", waiting_job(wait_for=[{"s3": "s3://acme-landing/{oops}"}]))
    assert bad.status == 422 and bad.body["error"]["errors"][0]["field"] == "wait_for[0].s3"
    assert bad.body["error"]["errors"][0]["code"] == "invalid_s3_wait"


def test_a_run_waits_visibly_and_the_object_landing_in_s3_wakes_it_through_its_rule(stack: Stack) -> None:
    s3 = landing_bucket(stack, "data")
    api = ApiClient(stack)
    assert api.call("PUT", "/teams/data/jobs/load", waiting_job()).status == 201
    run = trigger_run(stack.jobs, stack.runs, stack.queues, "data/load", now=stack.clock(), principal="test")
    stack.pump()
    seen = api.call("GET", f"/teams/data/jobs/load/runs/{run.run_id}")
    day = run.scheduled_at.astimezone(UTC).strftime("%Y-%m-%d")
    assert seen.body["status"] == "WAITING", seen.body
    assert seen.body["waiting_for"] == [f"s3://acme-landing/exports/{day}/_SUCCESS"]
    s3.put_object(Bucket="acme-landing", Key=f"exports/{day}/other.csv", Body=b"x")  # under the prefix, not it
    s3.put_object(Bucket="acme-landing", Key=f"exports/{day}/_SUCCESS", Body=b"")
    received = stack.deliver_events()
    assert [r.action for r in received] == ["woke"], received  # the other key's suffix does not match the rule
    stack.pump()
    done = stack.runs.get("data/load", run.run_id)
    assert done is not None and done.status is RunStatus.SUCCEEDED and done.attempt == 1
    assert done.wait_started_at is not None and done.waiting_for is None
    assert stack.jobs.waiters("data/load", limit=10) == {}


def nightly(timeout: str = "2h") -> dict[str, Any]:
    """The reference's example as one job file: 03:00, a first task that waits for the file, tasks retried
    twice with exponential backoff, escalation when the DAG fails."""
    retried: dict[str, Any] = {
        "retry": {"max_attempts": 3, "backoff": {"initial": "1s", "multiplier": 2, "jitter": "none"}}
    }
    return {
        "name": "nightly",
        "team": "data",
        "schedule": {"expression": "0 3 * * *", "timezone": "Europe/Berlin"},
        "dag": {
            "tasks": [
                lambda_task("wait-for-file", wait_for=[{"s3": READY}], wait={"timeout": timeout}, **retried),
                lambda_task("load", "wait-for-file", **retried),
                lambda_task("report", "load", **retried),
            ]
        },
    }


def start_nightly(stack: Stack, clock: Clock, timeout: str = "2h") -> tuple[Any, str, str]:
    s3 = landing_bucket(stack, "data")
    stack.register(nightly(timeout))
    run = trigger_run(stack.jobs, stack.runs, stack.queues, "data/nightly", now=clock(), principal="test")
    day = run.scheduled_at.astimezone(ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d")
    return s3, run.run_id, day


def test_the_nightly_dag_waits_for_its_file_in_a_task_and_runs_when_it_lands(dag_stack: Stack, clock: Clock) -> None:
    s3, run_id, day = start_nightly(dag_stack, clock)

    def task(name: str) -> TaskStatus | None:
        state = dag_stack.runs.tasks("data/nightly", run_id).get(name)
        return state.status if state else None

    drive(dag_stack, lambda: task("wait-for-file") is TaskStatus.WAITING)
    assert task("load") in (None, TaskStatus.WAITING)
    s3.put_object(Bucket="acme-landing", Key=f"exports/{day}/_SUCCESS", Body=b"")
    assert [r.action for r in dag_stack.deliver_events()] == ["woke"]

    def finished() -> bool:
        run = dag_stack.runs.get("data/nightly", run_id)
        return run is not None and run.status is RunStatus.SUCCEEDED

    drive(dag_stack, finished)
    assert {name: state.status for name, state in dag_stack.runs.tasks("data/nightly", run_id).items()} == {
        "wait-for-file": TaskStatus.SUCCEEDED,
        "load": TaskStatus.SUCCEEDED,
        "report": TaskStatus.SUCCEEDED,
    }


def test_a_task_whose_file_never_lands_fails_at_its_wait_timeout_and_the_run_fails_and_pages(
    dag_stack: Stack, clock: Clock
) -> None:
    _, run_id, day = start_nightly(dag_stack, clock, timeout="5m")
    drive(dag_stack, lambda: run_task(dag_stack, run_id, "wait-for-file") is TaskStatus.WAITING)
    clock.advance(timedelta(minutes=6))  # the polls come due on the virtual clock; the last one times out

    def failed() -> bool:
        run = dag_stack.runs.get("data/nightly", run_id)
        return run is not None and run.status is RunStatus.FAILED

    drive(dag_stack, failed)
    state = dag_stack.runs.tasks("data/nightly", run_id)["wait-for-file"]
    assert state.status is TaskStatus.FAILED and state.attempt == 1  # a wait that timed out is not retried
    assert state.error == f"waited 5m for s3://acme-landing/exports/{day}/_SUCCESS"
    assert dag_stack.runs.tasks("data/nightly", run_id)["load"].status is TaskStatus.SKIPPED
    events = dag_stack.sqs.receive_message(QueueUrl=dag_stack.escalation_url, MaxNumberOfMessages=10)
    assert any('"run_failed"' in message["Body"] for message in events.get("Messages", []))


def run_task(stack: Stack, run_id: str, name: str) -> TaskStatus | None:
    state = stack.runs.tasks("data/nightly", run_id).get(name)
    return state.status if state else None
