"""AWS Batch targets against moto: one job per attempt without a client token (found by its name before any
submit, never submitted again when SubmitJob's answer is lost), the run ended only by its own job's Batch Job
State Change (an array job by its parent), the lease's end reconciled, cancel and time-out terminating the job,
and another team's queue or definition refused.

moto (patched, tests/conftest.py) keeps a submitted job RUNNING until it is terminated; the tests hand the intake
the state change AWS would send (its detail is DescribeJobs' job)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError

from jobsched.adapters.aws.container_logs import ContainerLogs
from jobsched.adapters.aws.logs import InsightsLogs
from jobsched.core.events import CONTAINER_TRIGGER, EventEnvelope
from jobsched.core.runs import RunStatus
from jobsched.core.spec import JobSpec
from jobsched.core.tz import UTC
from jobsched.pipeline.ends import AttemptRef
from jobsched.pipeline.manual_runs import trigger_run
from jobsched.pipeline.worker import heartbeat_checker
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import ACCOUNT, REGION, Clock, Stack, run_context


def queue_and_definition(team: str, *, queue: str | None = None, definition: str = "reindex") -> Any:
    batch = boto3.client("batch", region_name=REGION)
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName=f"{team}-batch", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    environment = batch.create_compute_environment(
        computeEnvironmentName=f"{team}-compute", type="UNMANAGED", state="ENABLED", serviceRole=role
    )["computeEnvironmentArn"]
    tags = {"jobsched-team": team}
    batch.create_job_queue(
        jobQueueName=queue or f"{team}-queue",
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
        tags=tags,
    )
    batch.register_job_definition(
        jobDefinitionName=definition,
        type="container",
        containerProperties={"image": "example/reindex:1", "vcpus": 1, "memory": 512, "command": ["reindex"]},
        tags=tags,
    )
    return batch


def batch_job(team: str = "data", **target: Any) -> dict[str, Any]:
    return {
        "name": "reindex",
        "team": team,
        "retry": {"max_attempts": 1},
        "target": {
            "type": "batch",
            "job_queue": f"{team}-queue",
            "job_definition": "reindex",
            "container": {"command": ["reindex", "--date", "today"], "environment": {"MODE": "full"}, "vcpus": 2},
            "timeout": "30m",
            **target,
        },
    }


def jobs_of(batch: Any, queue: str = "data-queue") -> list[dict[str, Any]]:
    listed = batch.list_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": ["jobsched-*"]}])
    ids = [job["jobId"] for job in listed["jobSummaryList"]]
    return batch.describe_jobs(jobs=ids)["jobs"] if ids else []


def state_change(job: dict[str, Any], status: str, **detail: Any) -> EventEnvelope:
    """The Batch Job State Change EventBridge delivers when a job ends (through the deployment's rule)."""
    body = json.loads(json.dumps(job, default=str)) | {"status": status} | detail
    event = {
        "version": "0",
        "id": "6c2b3d77-0000-0000-0000-000000000000",
        "source": "aws.batch",
        "detail-type": "Batch Job State Change",
        "time": "2027-01-04T09:05:00Z",
        "detail": body,
    }
    return EventEnvelope.model_validate({"jobsched": {"job": "", "trigger": CONTAINER_TRIGGER}, "event": event})


def environment_of(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["container"]["environment"]}


def test_the_spec_bounds_a_batch_run_and_refuses_it_in_a_dag() -> None:
    for bad, code in (
        ({"container": {"environment": {"JOBSCHED_RUN_ID": "x"}}}, "reserved_env_name"),
        ({"container": {"command": ["x" * 9000]}}, "command_too_large"),
        ({"job_queue": "../other"}, "invalid_job_queue"),
        ({"job_definition": "reindex:latest"}, "invalid_job_definition"),
        ({"array_size": 1}, "greater_than_equal"),
        ({"array_size": 10_001}, "less_than_equal"),
        ({"timeout": "30s"}, "timeout"),
    ):
        with pytest.raises(ValueError) as refused:
            JobSpec.model_validate(batch_job(**bad))
        assert code in str(refused.value), (bad, str(refused.value))
    dag = {"name": "d", "team": "data", "dag": {"tasks": [{"name": "a", "target": batch_job()["target"]}]}}
    with pytest.raises(ValueError, match="container_task_in_dag"):
        JobSpec.model_validate(dag)


def test_one_job_per_attempt_however_often_delivered_and_its_own_state_change_ends_the_run(stack: Stack) -> None:
    batch = queue_and_definition("data")
    run_id = stack.register_and_trigger(batch_job())
    [job] = jobs_of(batch)
    assert job["jobName"].startswith("jobsched-") and job["status"] == "RUNNING"
    told = environment_of(job)
    assert told["JOBSCHED_RUN_ID"] == run_id and told["JOBSCHED_ATTEMPT"] == "1" and told["MODE"] == "full"
    assert job["container"]["command"] == ["reindex", "--date", "today"]
    run = stack.runs.get("data/reindex", run_id)
    assert run is not None and run.status is RunStatus.RUNNING and job["jobId"] in (run.work or "")
    # The message again, and the adapter called again for the same attempt: still one job (found by its name).
    stack.worker.process(run.to_message())
    context = run_context(run)
    assert stack.targets.execute(JobSpec.model_validate(batch_job()).target, context).outcome == "pending"
    assert len(jobs_of(batch)) == 1
    # A job another team submitted with a copied environment ends nothing; the job's own end does.
    forged = state_change(job | {"jobId": "f" * 36, "jobName": "jobsched-forged"}, "SUCCEEDED")
    assert stack.intake.receive(forged, now=stack.clock()).action == "dropped"
    assert stack.intake.receive(state_change(job, "SUCCEEDED"), now=stack.clock()).action == "ended"
    done = stack.runs.get("data/reindex", run_id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert stack.intake.receive(state_change(job, "SUCCEEDED"), now=stack.clock()).action == "duplicate"


def test_a_lost_submit_answer_is_never_submitted_again_and_the_job_still_ends_the_run(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SubmitJob reached Batch but its answer was lost: no retry, no failure (a retry would submit a second job):
    the run waits, and the job's state change, matched by its name on the job's queue, ends it."""
    batch = queue_and_definition("data")
    client = stack.sessions.client("data", "batch")
    submit = client.submit_job

    def submitted_then_lost(**request: Any) -> Any:
        submit(**request)
        raise ReadTimeoutError(endpoint_url="https://batch.us-east-1.amazonaws.com")

    monkeypatch.setattr(client, "submit_job", submitted_then_lost)
    monkeypatch.setattr(client, "get_paginator", _nothing_listed_once(client.get_paginator))  # ListJobs lags
    run_id = stack.register_and_trigger(batch_job())
    [job] = jobs_of(batch)
    run = stack.runs.get("data/reindex", run_id)
    assert run is not None and run.status is RunStatus.RUNNING and job["jobId"] not in (run.work or "")
    assert "unanswered" in (run.work or "")
    stack.pump()
    assert len(jobs_of(batch)) == 1
    ended = stack.intake.receive(
        state_change(job, "FAILED", statusReason="Essential container exited"), now=stack.clock()
    )
    assert ended.action == "ended"
    failed = stack.runs.get("data/reindex", run_id)
    assert failed is not None and failed.status is RunStatus.FAILED and "job failed" in (failed.error or "")


def _nothing_listed_once(paginator: Any) -> Any:
    calls = {"n": 0}

    def listed(name: str) -> Any:
        calls["n"] += 1
        if name == "list_jobs" and calls["n"] <= 2:  # before the submit and right after it: not visible yet

            class Empty:
                def paginate(self, **_: Any) -> list[dict[str, Any]]:
                    return [{"jobSummaryList": []}]

            return Empty()
        return paginator(name)

    return listed


def test_an_array_job_ends_by_its_parent_and_its_childrens_changes_end_nothing(stack: Stack) -> None:
    batch = queue_and_definition("data")
    run_id = stack.register_and_trigger(batch_job(array_size=3))
    parent = next(job for job in jobs_of(batch) if ":" not in job["jobId"])
    assert parent["arrayProperties"]["size"] == 3
    child = parent | {"jobId": parent["jobId"] + ":0", "arrayProperties": {"index": 0}}
    assert stack.intake.receive(state_change(child, "SUCCEEDED"), now=stack.clock()).action == "dropped"
    running = stack.runs.get("data/reindex", run_id)
    assert running is not None and running.status is RunStatus.RUNNING
    summary = {"size": 3, "statusSummary": {"SUCCEEDED": 2, "FAILED": 1}}
    failed = state_change(parent, "FAILED", arrayProperties=summary, statusReason="Array child job failed")
    assert stack.intake.receive(failed, now=stack.clock()).action == "ended"
    done = stack.runs.get("data/reindex", run_id)
    assert done is not None and done.status is RunStatus.FAILED
    assert "1 failed" in (done.error or "") and "2 succeeded" in (done.error or ""), done.error


def test_an_out_of_memory_job_is_not_retried(stack: Stack) -> None:
    batch = queue_and_definition("data")
    document = batch_job() | {"retry": {"max_attempts": 3, "backoff": {"initial": "1m", "jitter": "none"}}}
    run_id = stack.register_and_trigger(document)
    [job] = jobs_of(batch)
    oom = {"exitCode": 137, "reason": "OutOfMemoryError: Container killed due to memory usage"}
    stack.intake.receive(state_change(job, "FAILED", container=job["container"] | oom), now=stack.clock())
    failed = stack.runs.get("data/reindex", run_id)
    assert failed is not None and failed.status is RunStatus.FAILED and "out of memory" in (failed.error or "")


def test_the_lease_end_terminates_a_running_job_and_a_lost_state_change_is_read_back(
    stack: Stack, clock: Clock
) -> None:
    batch = queue_and_definition("data")
    run_id = stack.register_and_trigger(batch_job(timeout="10m"))
    clock.advance(timedelta(minutes=11))
    heartbeat_checker(stack.runs, stack.worker).check(clock())
    [job] = jobs_of(batch)
    assert job["status"] == "FAILED" and "timed out after 10m" in job.get("statusReason", "")
    run = stack.runs.get("data/reindex", run_id)
    assert run is not None and run.status is RunStatus.TIMED_OUT
    # A job that ended while its state change was lost: read back at the lease's end.
    second = stack.register_and_trigger(batch_job(timeout="10m") | {"name": "reindex-2"})
    [other] = [j for j in jobs_of(batch) if j["jobId"] != job["jobId"]]
    stack.sessions.client("data", "batch").terminate_job(jobId=other["jobId"], reason="Host EC2 terminated")
    clock.advance(timedelta(minutes=11))
    heartbeat_checker(stack.runs, stack.worker).check(clock())
    ended = stack.runs.get("data/reindex-2", second)
    assert ended is not None and ended.status is RunStatus.FAILED and "Host EC2 terminated" in (ended.error or "")


def test_cancel_terminates_the_job(stack: Stack) -> None:
    batch = queue_and_definition("data")
    run_id = stack.register_and_trigger(batch_job())
    stack.worker.ends.stop(AttemptRef("data/reindex", run_id), "cancelled by request")
    [job] = jobs_of(batch)
    assert job["status"] == "FAILED" and job.get("statusReason") == "jobsched: cancelled"


def test_another_teams_queue_or_definition_is_refused_at_put_and_at_run(stack: Stack) -> None:
    queue_and_definition("payments", definition="payments-reindex")
    api = ApiClient(stack)
    refused = api.call(
        "PUT", "/teams/data/jobs/reindex", batch_job(job_queue="payments-queue"), principal=team_role("data")
    )
    [why] = refused.body["error"]["errors"]
    assert refused.status == 422 and why["code"] == "resource_not_owned" and why["field"] == "target.job_queue"
    queue_and_definition("data", definition="reindex")
    refused = api.call(
        "PUT", "/teams/data/jobs/reindex", batch_job(job_definition="payments-reindex"), principal=team_role("data")
    )
    assert refused.status == 422 and refused.body["error"]["errors"][0]["field"] == "target.job_definition"
    # Re-tagged after it was stored: the run is refused before anything is submitted.
    run_id = stack.register_and_trigger(batch_job())
    batch = boto3.client("batch", region_name=REGION)
    [first] = jobs_of(batch)
    stack.intake.receive(state_change(first, "SUCCEEDED"), now=stack.clock())
    arn = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/data-queue"
    batch.tag_resource(resourceArn=arn, tags={"jobsched-team": "payments"})
    second = trigger_run(stack.jobs, stack.runs, stack.queues, "data/reindex", now=stack.clock(), principal="t")
    stack.pump()
    run = stack.runs.get("data/reindex", second.run_id)
    assert run is not None
    assert run.status is RunStatus.FAILED and "another team" in (run.error or ""), run.error
    assert len(jobs_of(batch)) == 1 and run_id != second.run_id


def test_the_run_logs_join_the_jobs_stream_only_from_a_log_group_tagged_for_the_team(
    stack: Stack, clock: Clock
) -> None:
    clock.now = datetime.now(UTC).replace(microsecond=0)  # CloudWatch Logs refuses events far from the real time
    batch = queue_and_definition("data")
    run_id = stack.register_and_trigger(batch_job())
    [job] = jobs_of(batch)
    stream = job["container"]["logStreamName"]
    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName="/aws/batch/job")  # Batch's default group: every job of the account
    logs.create_log_stream(logGroupName="/aws/batch/job", logStreamName=stream)
    at = int(clock().timestamp() * 1000)
    logs.put_log_events(
        logGroupName="/aws/batch/job", logStreamName=stream, logEvents=[{"timestamp": at, "message": "shard 0 done"}]
    )
    stack.intake.receive(state_change(job, "SUCCEEDED"), now=clock())
    api = ApiClient(stack)
    api.services.logs = InsightsLogs(())
    api.services.container_logs = ContainerLogs(stack.sessions, stack.guard)
    path = f"/teams/data/jobs/reindex/runs/{run_id}/logs"

    def said() -> list[str]:
        lines = api.call("GET", path, principal=team_role("data")).body["lines"]
        return [line["message"] for line in lines if line["component"] == "container:job"]

    [refused] = said()
    assert refused.startswith("not shown: log group '/aws/batch/job'"), refused
    arn = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/batch/job"
    logs.tag_resource(resourceArn=arn, tags={"jobsched-team": "data"})
    assert said() == ["shard 0 done"]
