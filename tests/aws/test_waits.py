"""Waits for data against moto: the object's Object Created goes from S3 to EventBridge, through the job's wake
rule to the intake queue, and wakes the WAITING run; a DAG task waits the same way inside its state machine
(the reference's nightly: a first task waits for the file, the rest retry with backoff, a failure pages)."""

from __future__ import annotations

import json
from datetime import UTC, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from jobsched.core.runs import RunStatus, TaskStatus
from jobsched.core.waits import per_prefix_wake_rules
from jobsched.pipeline.manual_runs import trigger_run
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
    # #46: a waiting task says what it waits for (it showed only WAITING).
    from tests.aws.api_client import ApiClient

    view = ApiClient(dag_stack).call("GET", f"/teams/data/jobs/nightly/runs/{run_id}").body
    reasons = {each["name"]: each["reason"] for each in view["tasks"]}
    assert reasons["wait-for-file"].startswith(f"waiting for data: s3://acme-landing/exports/{day}/_SUCCESS since ")
    assert reasons["load"].startswith("waiting for its dependencies: wait-for-file (WAITING)")
    assert reasons["report"].startswith("waiting for its dependencies: load (" + (task("load") or "PENDING") + ")")
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


def test_one_team_cannot_take_the_shared_bus_rules_and_waits_on_one_bucket_share_one_rule(stack: Stack) -> None:
    """The review's case: one DAG job of 60 tasks each waiting on 5 prefixes took the default bus's 300 rules, and
    every other team's s3 triggers and waits were refused. Now a bucket's waits share one wake rule, a job holds
    at most 10 rules on a shared bus, and a team at most its max_bus_rules (422 rule_quota)."""
    landing_bucket(stack, "data")
    api = ApiClient(stack)
    tasks = [
        lambda_task(
            f"t{index}",
            wait_for=[{"s3": f"s3://acme-landing/p{prefix}/{{logical_date:%Y-%m-%d}}/{index}"} for prefix in range(5)],
        )
        for index in range(60)
    ]
    greedy = {"schedule": {"expression": "0 3 * * *"}, "dag": {"tasks": tasks}}
    assert api.call("PUT", "/teams/data/jobs/greedy", greedy).status == 201
    listed = stack.events.list_rules(NamePrefix="jobsched-test-")["Rules"]
    assert len([r for r in listed if r.get("EventBusName", "default") == "default"]) == 1  # was 300
    # A job that needs more than its share of the shared bus: 11 tasks, each waiting on its own bucket.
    buckets = [f"data-drop-{index}" for index in range(14)]
    for bucket in buckets:
        landing_bucket(stack, "data", bucket)

    def job(triggers: list[str], waits: list[str]) -> dict[str, Any]:
        return {
            "triggers": [{"s3": {"bucket": bucket}} for bucket in triggers],
            "wait_for": [{"s3": f"s3://{bucket}/ready/{{logical_date:%Y-%m-%d}}"} for bucket in waits],
            "target": {"type": "lambda", "function": "echo"},
        }

    waits = [
        lambda_task(f"w{index}", wait_for=[{"s3": f"s3://{bucket}/ready/{{logical_date:%Y-%m-%d}}"}])
        for index, bucket in enumerate(buckets[:11])
    ]
    refused = api.call("PUT", "/teams/data/jobs/many", {"dag": {"tasks": waits}})
    assert refused.status == 422, refused.body
    [why] = refused.body["error"]["errors"]
    assert (why["field"], why["code"]) == ("wait_for", "rule_quota") and "a job may hold 10" in why["message"]
    # The team's share: each job within its own cap, the team's sum past max_bus_rules.
    stack.jobs.set_team_limits("data", {"max_bus_rules": 12})
    assert api.call("PUT", "/teams/data/jobs/nine", job(buckets[:5], buckets[5:9])).status == 201  # 1 + 9 rules
    refused = api.call("PUT", "/teams/data/jobs/three", job(buckets[9:12], []))
    assert refused.status == 422 and refused.body["error"]["errors"][0]["code"] == "rule_quota", refused.body
    assert "hold 10 rules" in refused.body["error"]["errors"][0]["message"]
    assert stack.jobs.get("data/three") is None
    # Another team is untouched by data's share.
    landing_bucket(stack, "payments", "payments-landing")
    theirs = {"triggers": [{"s3": {"bucket": "payments-landing"}}], "target": {"type": "lambda", "function": "echo"}}
    assert api.call("PUT", "/teams/payments/jobs/in", theirs).status == 201


def test_an_upgrade_removes_the_wake_rules_an_earlier_release_deployed_per_prefix(stack: Stack) -> None:
    landing_bucket(stack, "data")
    api = ApiClient(stack)
    document = waiting_job(
        wait_for=[{"s3": READY}, {"s3": "s3://acme-landing/imports/{logical_date:%Y-%m-%d}/_SUCCESS"}]
    )
    assert api.call("PUT", "/teams/data/jobs/load", document).status == 201
    stored = stack.jobs.get("data/load")
    assert stored is not None
    stack.rules.deploy("data/load", "data", per_prefix_wake_rules(stored.spec))  # as the release before left them
    assert len(stack.events.list_rules(NamePrefix="jobsched-test-")["Rules"]) == 3
    assert api.call("PUT", "/teams/data/jobs/load", document | {"description": "again"}).status == 200
    [kept] = stack.events.list_rules(NamePrefix="jobsched-test-")["Rules"]
    assert json.loads(kept["EventPattern"])["detail"]["object"] == {"key": [{"suffix": "/_SUCCESS"}]}
    stack.rules.deploy("data/load", "data", per_prefix_wake_rules(stored.spec))
    assert api.call("DELETE", "/teams/data/jobs/load").status in (200, 204)
    assert stack.events.list_rules(NamePrefix="jobsched-test-")["Rules"] == []
