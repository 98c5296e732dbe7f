"""ECS targets against moto: one task per attempt however the message is redelivered or the worker dies, the
run ended only by its own task's state change, the lease's end reconciled, cancel and time-out stopping the task.

moto records RunTask and runs nothing: the tests stop tasks and hand the intake the Task State Change AWS would
send (its detail is DescribeTasks' task, which is what EventBridge carries)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import date, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError

from infra.local.containers import team_network as network_of
from jobsched.adapters.aws.container_logs import ContainerLogs
from jobsched.adapters.aws.ecs_tasks import EcsTasks, unanswered
from jobsched.adapters.aws.logs import InsightsLogs
from jobsched.api.tokens import CallbackTokens, key_id
from jobsched.core.containers import attempt_token
from jobsched.core.events import CONTAINER_TRIGGER, EventEnvelope
from jobsched.core.names import Env
from jobsched.core.runs import RunStatus, instant_text
from jobsched.core.spec import JobSpec
from jobsched.core.traces import attempt_span_id, trace_id
from jobsched.core.tz import UTC
from jobsched.core.usage import TARGET_GB_SECONDS, TARGET_VCPU_SECONDS
from jobsched.pipeline.ends import AttemptRef
from jobsched.pipeline.manual_runs import trigger_run
from jobsched.pipeline.worker import heartbeat_checker
from jobsched.wiring import run_callbacks
from tests.aws.api_client import ApiClient, cli_as, team_role
from tests.aws.harness import REGION, Clock, Crash, Stack, run_context

NETWORK: dict[str, Any] = {"subnets": ["subnet-0123456789abcdef0"], "security_groups": ["sg-0123456789abcdef0"]}


@pytest.fixture(autouse=True)
def network(stack: Stack) -> None:
    """The team's subnet and security group (moto's RunTask checks that they exist)."""
    NETWORK.update(team_network("data"))


def team_network(team: str) -> dict[str, list[str]]:
    """A subnet and a security group tagged for ``team``."""
    return network_of(boto3.client("ec2", region_name=REGION), team, group=f"{team}-etl")


def cluster_and_definition(team: str, family: str = "nightly-etl") -> Any:
    ecs = boto3.client("ecs", region_name=REGION)
    tags = [{"key": "jobsched-team", "value": team}]
    ecs.create_cluster(clusterName=f"{team}-batch", tags=tags)
    ecs.register_task_definition(
        family=family,
        containerDefinitions=[{"name": "etl", "image": "example/etl:1", "memory": 512, "essential": True}],
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="256",
        memory="512",
        tags=tags,
        taskRoleArn=f"arn:aws:iam::123456789012:role/{team}-etl-task",
    )
    return ecs


TASK_SESSION = "arn:aws:sts::123456789012:assumed-role/data-etl-task/0123456789abcdef"  # the task's own credentials


def ecs_job(team: str = "data", **target: Any) -> dict[str, Any]:
    return {
        "name": "etl",
        "team": team,
        "retry": {"max_attempts": 1},
        "target": {
            "type": "ecs",
            "cluster": f"{team}-batch",
            "task_definition": "nightly-etl",
            "launch_type": "FARGATE",
            "network": NETWORK,
            "container": {"name": "etl", "command": ["python", "-m", "etl"], "environment": {"MODE": "full"}},
            "timeout": "30m",
            **target,
        },
    }


def tasks(ecs: Any, cluster: str = "data-batch") -> list[dict[str, Any]]:
    arns = (
        ecs.list_tasks(cluster=cluster)["taskArns"]
        + ecs.list_tasks(cluster=cluster, desiredStatus="STOPPED")["taskArns"]
    )
    return ecs.describe_tasks(cluster=cluster, tasks=arns)["tasks"] if arns else []


def state_change(task: dict[str, Any], exit_code: int | None, **detail: Any) -> EventEnvelope:
    """The ECS Task State Change EventBridge delivers for a stopped task (through the deployment's rule)."""
    body = json.loads(json.dumps(task, default=str)) | {"lastStatus": "STOPPED", "stopCode": "EssentialContainerExited"}
    body["containers"] = [{**c, "exitCode": exit_code} for c in body.get("containers") or [{"name": "etl"}]]
    event = {
        "version": "0",
        "id": "5b8b2fd6-0000-0000-0000-000000000000",
        "source": "aws.ecs",
        "detail-type": "ECS Task State Change",
        "time": "2027-01-04T09:05:00Z",
        "detail": body | detail,
    }
    return EventEnvelope.model_validate({"jobsched": {"job": "", "trigger": CONTAINER_TRIGGER}, "event": event})


def test_the_spec_bounds_what_a_container_run_may_ask() -> None:
    for bad, code in (
        ({"launch_type": "FARGATE", "network": None}, "fargate_needs_network"),
        ({"container": {"name": "etl", "environment": {"JOBSCHED_RUN_ID": "x"}}}, "reserved_env_name"),
        ({"container": {"name": "etl", "command": ["x" * 9000]}}, "command_too_large"),
        ({"cluster": "../other"}, "invalid_cluster"),
        ({"launch_type": "EC2", "capacity_provider": "spot"}, "launch_type_or_capacity_provider"),
    ):
        with pytest.raises(ValueError) as refused:
            JobSpec.model_validate(ecs_job(**bad))
        assert code in str(refused.value), (bad, str(refused.value))


def test_one_task_per_attempt_however_often_delivered_and_its_own_state_change_ends_the_run(stack: Stack) -> None:
    ecs = cluster_and_definition("data")
    run_id = stack.register_and_trigger(ecs_job())
    [task] = tasks(ecs)
    assert task["startedBy"].startswith("jobsched-")
    environment = {e["name"]: e["value"] for e in task["overrides"]["containerOverrides"][0]["environment"]}
    assert environment["JOBSCHED_RUN_ID"] == run_id and environment["JOBSCHED_ATTEMPT"] == "1"
    assert environment["MODE"] == "full" and environment["JOBSCHED_JOB"] == "data/etl"
    run = stack.runs.get("data/etl", run_id)
    assert run is not None and run.status is RunStatus.RUNNING and task["taskArn"] in (run.work or "")
    # The message again (SQS at least once), and the worker's own retry of the call: still one task.
    stack.worker.process(run.to_message())
    stack.targets.execute(JobSpec.model_validate(ecs_job()).target, run_context(run))
    assert len(tasks(ecs)) == 1
    # Another task that copies the run's environment ends nothing.
    assert stack.intake.receive(state_change(task | {"taskArn": task["taskArn"] + "x"}, 0), now=stack.clock()).reason
    ended = stack.intake.receive(state_change(task, 0), now=stack.clock())
    assert ended.action == "ended"
    done = stack.runs.get("data/etl", run_id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert stack.intake.receive(state_change(task, 0), now=stack.clock()).action == "duplicate"


def test_a_non_zero_exit_fails_the_run_with_its_code_and_an_oom_kill_is_not_retried(stack: Stack) -> None:
    ecs = cluster_and_definition("data")
    document = ecs_job() | {"retry": {"max_attempts": 3, "backoff": {"initial": "1m", "jitter": "none"}}}
    run_id = stack.register_and_trigger(document)
    [task] = tasks(ecs)
    stack.intake.receive(state_change(task, 3, stoppedReason="Essential container in task exited"), now=stack.clock())
    retrying = stack.runs.get("data/etl", run_id)
    assert retrying is not None and retrying.status is RunStatus.RETRYING
    assert "etl exited 3" in (retrying.error or "")
    stack.clock.advance(timedelta(minutes=5))
    outcomes = stack.pump()
    second = [t for t in tasks(ecs) if t["taskArn"] != task["taskArn"]]
    assert second, [(o.action, o.detail) for o in outcomes]
    assert len(second) == 1  # attempt 2: its own task
    oom = second[0] | {"containers": [{"name": "etl", "reason": "OutOfMemoryError: Container killed due to memory"}]}
    stack.intake.receive(state_change(oom, 137), now=stack.clock())
    failed = stack.runs.get("data/etl", run_id)
    assert failed is not None and failed.status is RunStatus.FAILED and "out of memory" in (failed.error or "")


def test_the_lease_end_stops_a_running_task_and_a_lost_state_change_is_read_back(stack: Stack, clock: Clock) -> None:
    ecs = cluster_and_definition("data")
    run_id = stack.register_and_trigger(ecs_job(timeout="10m"))
    assert len(tasks(ecs)) == 1
    clock.advance(timedelta(minutes=20))
    heartbeat_checker(stack.runs, stack.worker).check(clock())
    [stopped] = tasks(ecs)
    assert stopped["lastStatus"] == "STOPPED" and "timed out after 10m" in stopped.get("stoppedReason", "")
    run = stack.runs.get("data/etl", run_id)
    assert run is not None and run.status is RunStatus.TIMED_OUT


def test_a_containers_timeout_ends_it_at_the_limit_in_its_own_words_without_the_checker(
    stack: Stack, clock: Clock
) -> None:
    """#46: slow-export's 15 s timeout ended its run at 71 s as "attempt 1 lost: no result before its lease
    expired". The start sends the run's message again, due at the timeout: its delivery stops the task and ends
    the attempt "timed out after 15s", with no heartbeat check needed."""
    ecs = cluster_and_definition("data")
    run_id = stack.register_and_trigger(ecs_job(timeout="15s"))
    started = stack.runs.get("data/etl", run_id)
    assert started is not None and started.status is RunStatus.RUNNING and started.started_at is not None
    assert (f"{run_id}#1", 16) in stack.queues.requested_delays, "the watch is due a second after the timeout"
    clock.advance(timedelta(seconds=10))
    stack.pump()
    assert stack.runs.get("data/etl", run_id).status is RunStatus.RUNNING  # type: ignore[union-attr]
    clock.advance(timedelta(seconds=6))
    stack.pump()  # the watch, delivered: no heartbeat_checker(...).check here
    [stopped] = tasks(ecs)
    assert stopped["lastStatus"] == "STOPPED" and "timed out after 15s" in stopped.get("stoppedReason", "")
    run = stack.runs.get("data/etl", run_id)
    assert run is not None and run.status is RunStatus.TIMED_OUT
    assert run.error == "timed out after 15s: the task was stopped"
    assert run.finished_at is not None and run.finished_at - started.started_at <= timedelta(seconds=17)


def test_cancel_stops_the_task(stack: Stack) -> None:
    ecs = cluster_and_definition("data")
    run_id = stack.register_and_trigger(ecs_job())
    stack.worker.ends.stop(AttemptRef("data/etl", run_id), "cancelled by request")
    [task] = tasks(ecs)
    assert task["lastStatus"] == "STOPPED" and task.get("stoppedReason") == "jobsched: cancelled"


def test_overlap_replace_stops_the_replaced_runs_task(stack: Stack, clock: Clock) -> None:
    ecs = cluster_and_definition("data")
    first = stack.register_and_trigger(ecs_job() | {"concurrency": {"max_running": 1, "overlap": "replace"}})
    clock.advance(timedelta(seconds=1))
    second = trigger_run(stack.jobs, stack.runs, stack.queues, "data/etl", now=clock(), principal="test").run_id
    stack.pump()
    replaced = stack.runs.get("data/etl", first)
    assert replaced is not None and replaced.status is RunStatus.CANCELLED

    def run_of(task: dict[str, Any]) -> str:
        [override] = task["overrides"]["containerOverrides"]
        return str(next(e["value"] for e in override["environment"] if e["name"] == "JOBSCHED_RUN_ID"))

    status = {run_of(task): (task["lastStatus"], task.get("stoppedReason", "")) for task in tasks(ecs)}
    assert status[first] == ("STOPPED", "jobsched: replaced by a newer run (overlap: replace)")
    assert status[second][0] != "STOPPED"


def test_another_teams_cluster_or_task_definition_is_refused_at_put_and_at_run(stack: Stack) -> None:
    ecs = cluster_and_definition("payments")
    api = ApiClient(stack)
    refused = api.call("PUT", "/teams/data/jobs/etl", ecs_job(cluster="payments-batch"), principal=team_role("data"))
    assert refused.status == 422, refused.body
    fields = {e["field"] for e in refused.body["error"]["errors"]}
    assert fields == {"target.cluster", "target.task_definition"}
    assert tasks(ecs, "payments-batch") == []


def test_another_teams_subnet_security_group_or_capacity_provider_is_refused_at_put_and_at_run(
    stack: Stack,
) -> None:
    """Security groups are the network boundary ("may reach beta's database"): team data's task never runs in
    team payments' subnet, with its group, or on its instances."""
    ecs = cluster_and_definition("data")
    theirs = team_network("payments")
    ecs.create_capacity_provider(
        name="payments-spot",
        autoScalingGroupProvider={"autoScalingGroupArn": f"arn:aws:autoscaling:{REGION}:123456789012:asg/x"},
        tags=[{"key": "jobsched-team", "value": "payments"}],
    )
    api = ApiClient(stack)
    for change, field in (
        ({"subnets": theirs["subnets"]}, "target.network.subnets[0]"),
        ({"security_groups": theirs["security_groups"]}, "target.network.security_groups[0]"),
    ):
        document = ecs_job(network=NETWORK | change)
        refused = api.call("PUT", "/teams/data/jobs/etl", document, principal=team_role("data"))
        assert refused.status == 422, refused.body
        assert [e["field"] for e in refused.body["error"]["errors"]] == [field]
    on_theirs = ecs_job(launch_type=None, capacity_provider="payments-spot")
    refused = api.call("PUT", "/teams/data/jobs/etl", on_theirs, principal=team_role("data"))
    assert [e["field"] for e in refused.body["error"]["errors"]] == ["target.capacity_provider"]
    assert api.call("PUT", "/teams/data/jobs/etl", ecs_job(), principal=team_role("data")).status in (200, 201)
    # At run time too: the group changed hands after the job was stored; the run fails named, no task starts.
    boto3.client("ec2", region_name=REGION).create_tags(
        Resources=NETWORK["security_groups"], Tags=[{"Key": "jobsched-team", "Value": "payments"}]
    )
    run = trigger_run(stack.jobs, stack.runs, stack.queues, "data/etl", now=stack.clock(), principal="test")
    stack.pump()
    failed = stack.runs.get("data/etl", run.run_id)
    assert failed is not None and failed.status is RunStatus.FAILED, failed
    assert "security group" in (failed.error or "") and "belongs to another team" in (failed.error or "")
    assert tasks(ecs) == []


def test_a_worker_that_dies_between_runtask_and_its_record_leaves_one_task_that_still_ends_the_run(
    stack: Stack, clock: Clock
) -> None:
    ecs = cluster_and_definition("data")

    def die_after_runtask(step: str) -> None:
        if step == "execute":
            raise Crash(step)

    stack.worker.after_step = die_after_runtask
    stack.register(ecs_job())
    run = trigger_run(stack.jobs, stack.runs, stack.queues, "data/etl", now=clock(), principal="test")
    stack.pump()
    assert stack.crashes == 1
    stack.worker.after_step = lambda step: None
    stack.pump()  # the message again: the run is RUNNING, its task is found, none is started
    [task] = tasks(ecs)
    recorded = stack.runs.get("data/etl", run.run_id)
    assert recorded is not None and recorded.status is RunStatus.RUNNING and not recorded.output
    # Its state change ends the run: the task was started by this attempt's token on the job's own cluster.
    assert stack.intake.receive(state_change(task, 0), now=clock()).action == "ended"
    done = stack.runs.get("data/etl", run.run_id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert stack.intake.receive(state_change(task, 1), now=clock()).action == "duplicate"  # redelivered: nothing


def test_an_unrecorded_task_ends_the_run_only_from_the_jobs_cluster_with_the_attempts_token() -> None:
    from jobsched.core.containers import attempt_token
    from jobsched.core.run_records import Run
    from jobsched.core.runs import parse_instant
    from jobsched.pipeline.containers import started_by_attempt

    spec = JobSpec.model_validate(ecs_job())
    at = parse_instant("2027-01-04T09:00:00Z")
    run = Run("data/etl", "r1", "data", RunStatus.RUNNING, 1, at, at, "manual", 1, "c")
    token = attempt_token("data/etl", "r1", 1)
    ours = {
        "startedBy": token,
        "clusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/data-batch",
        "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/nightly-etl:3",
    }
    assert started_by_attempt(spec, run, ours)
    foreign = "arn:aws:ecs:us-east-1:123456789012:task-definition/payments-etl:1"
    assert not started_by_attempt(spec, run, ours | {"taskDefinitionArn": foreign})
    assert not started_by_attempt(spec, run, {k: v for k, v in ours.items() if k != "taskDefinitionArn"})
    assert not started_by_attempt(spec, run, ours | {"clusterArn": "arn:aws:ecs:us-east-1:1:cluster/payments-batch"})
    assert not started_by_attempt(spec, run, ours | {"startedBy": attempt_token("data/etl", "r1", 2)})


def test_a_task_carrying_the_derivable_token_on_a_shared_cluster_ends_nothing_and_is_not_stopped(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attempt token is a digest anyone can compute. Another principal runs its own task definition on the
    shared cluster with the token as startedBy, in the window before the attempt recorded its work (its RunTask
    answer lost): its state change ends nothing, and the reconcile neither takes its result nor stops it."""
    ecs = boto3.client("ecs", region_name=REGION)
    ecs.create_cluster(clusterName="shared-batch", tags=[{"key": "jobsched-shared", "value": "true"}])
    cluster_and_definition("data", family="nightly-etl")
    ecs.register_task_definition(
        family="intruder",
        containerDefinitions=[{"name": "etl", "image": "evil/etl:1", "memory": 512}],
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="256",
        memory="512",
        tags=[{"key": "jobsched-team", "value": "payments"}],
    )
    with monkeypatch.context() as lost_answer:  # RunTask's answer lost: the attempt has no work recorded
        lost = unanswered(None, EndpointConnectionError(endpoint_url="ecs"))
        lost_answer.setattr(stack.targets.ecs, "start", lambda target, context: lost)
        run_id = stack.register_and_trigger(ecs_job(cluster="shared-batch", timeout="10m"))
    token = attempt_token("data/etl", run_id, 1)
    names_the_run: dict[str, Any] = {
        "launchType": "FARGATE",
        "networkConfiguration": {
            "awsvpcConfiguration": {"subnets": NETWORK["subnets"], "securityGroups": NETWORK["security_groups"]}
        },
        "overrides": {
            "containerOverrides": [
                {
                    "name": "etl",
                    "environment": [
                        {"name": "JOBSCHED_JOB", "value": "data/etl"},
                        {"name": "JOBSCHED_RUN_ID", "value": run_id},
                        {"name": "JOBSCHED_ATTEMPT", "value": "1"},
                    ],
                }
            ]
        },
    }
    [forged] = ecs.run_task(cluster="shared-batch", taskDefinition="intruder", startedBy=token, **names_the_run)[
        "tasks"
    ]
    described = ecs.describe_tasks(cluster="shared-batch", tasks=[forged["taskArn"]])["tasks"][0]
    assert stack.intake.receive(state_change(described, 0), now=clock()).action == "dropped"
    # Even naming the job's own definition, a task without the team's tags (RunTask gave it none) is not it.
    [copied] = ecs.run_task(cluster="shared-batch", taskDefinition="nightly-etl", startedBy=token, **names_the_run)[
        "tasks"
    ]
    copy = ecs.describe_tasks(cluster="shared-batch", tasks=[copied["taskArn"]])["tasks"][0]
    assert stack.intake.receive(state_change(copy, 0), now=clock()).action == "dropped"
    running = stack.runs.get("data/etl", run_id)
    assert running is not None and running.status is RunStatus.RUNNING
    clock.advance(timedelta(minutes=11))
    heartbeat_checker(stack.runs, stack.worker).check(clock())
    timed_out = stack.runs.get("data/etl", run_id)
    assert timed_out is not None and timed_out.status is RunStatus.TIMED_OUT
    left = ecs.describe_tasks(cluster="shared-batch", tasks=[forged["taskArn"], copied["taskArn"]])["tasks"]
    assert all(task.get("stoppedReason", "") == "" or "jobsched" not in task["stoppedReason"] for task in left)


def test_a_lost_state_change_is_read_back_at_the_lease_end(stack: Stack, clock: Clock) -> None:
    ecs = cluster_and_definition("data")
    run_id = stack.register_and_trigger(ecs_job(timeout="10m"))
    [task] = tasks(ecs)
    ecs.stop_task(cluster="data-batch", task=task["taskArn"], reason="Essential container in task exited")
    clock.advance(timedelta(minutes=20))
    heartbeat_checker(stack.runs, stack.worker).check(clock())
    run = stack.runs.get("data/etl", run_id)
    # Recorded from DescribeTasks (moto's stopped container reports exit 0), not timed out, nothing stopped again.
    assert run is not None and run.status is RunStatus.SUCCEEDED and "etl=0" in (run.output or "")
    [stopped] = tasks(ecs)
    assert stopped.get("stoppedReason") == "Essential container in task exited"


def test_ecs_tasks_in_a_dag_are_refused_for_now() -> None:
    document = {"name": "d", "team": "data", "dag": {"tasks": [{"name": "a", "target": ecs_job()["target"]}]}}
    with pytest.raises(ValueError, match="container_task_in_dag"):
        JobSpec.model_validate(document)


def environment_of(task: dict[str, Any]) -> dict[str, str]:
    [override] = task["overrides"]["containerOverrides"]
    return {e["name"]: e["value"] for e in override["environment"]}


def test_a_container_checkpoints_through_the_api_and_its_retry_resumes_from_the_checkpoint(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(Env.API_URL, "https://api.example.com/prod/")
    monkeypatch.setenv(Env.CALLBACK_SECRET, "test-secret-of-sufficient-length")  # what ApiClient verifies with
    stack.targets.ecs = EcsTasks(stack.sessions, run_callbacks(clock))  # as deployed: the worker signs the task's token
    api = ApiClient(stack)
    ecs = cluster_and_definition("data")
    retry = {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}}
    run_id = stack.register_and_trigger(ecs_job() | {"retry": retry})
    [first] = tasks(ecs)
    told = environment_of(first)
    assert told["JOBSCHED_API_URL"] == "https://api.example.com/prod" and "JOBSCHED_CHECKPOINT" not in told
    token = told["JOBSCHED_CALLBACK_TOKEN"]
    lease = stack.runs.get("data/etl", run_id).lease_until  # type: ignore[union-attr]
    clock.advance(timedelta(minutes=5))
    report = {"progress": 40, "message": "partition 12 of 30", "checkpoint": {"p": 12}}
    said = api.callback("heartbeat", token, report, principal=TASK_SESSION)
    assert said.status == 200, said.body
    assert said.body["progress"] | {"at": None} == {
        "at": None,
        "attempt": 1,
        "percent": 40.0,
        "message": "partition 12 of 30",
        "checkpoint": {"p": 12},
    }
    assert stack.runs.get("data/etl", run_id).lease_until == lease, "heartbeats never extend a container's timeout"  # type: ignore[union-attr]
    too_big = api.callback("heartbeat", token, {"checkpoint": {"rows": ["x" * 100] * 30}}, principal=TASK_SESSION)
    [refused] = too_big.body["error"]["errors"]
    assert too_big.status == 422 and refused["code"] == "checkpoint_too_large" and refused["field"] == "checkpoint"
    bad = api.callback("heartbeat", token, {"progress": 140}, principal=TASK_SESSION)
    assert bad.status == 422 and bad.body["error"]["errors"][0]["field"] == "progress", bad.body
    # Anyone who may DescribeTasks reads the token: its reports count only when signed by the task's own role
    # (which only the team's tasks can assume), and it can never end the run, even with forged output.
    for stranger in (None, "arn:aws:sts::123456789012:assumed-role/payments-ci/session", team_role("payments")):
        planted = api.callback("heartbeat", token, {"checkpoint": {"p": 29}}, principal=stranger)
        assert planted.status == 403 and planted.body["error"]["code"] == "not_the_task", planted.body
    assert stack.runs.get("data/etl", run_id).progress.checkpoint == '{"p":12}'  # type: ignore[union-attr]
    forged = api.callback("complete", token, {"status": "succeeded", "output": '{"rows": 1000000}'})
    assert forged.status == 403 and forged.body["error"]["code"] == "token_cannot_complete", forged.body
    # Nor can a token signed before tokens had purposes (v2: [job, run, attempt, expires]).
    legacy = legacy_token(api.tokens, "data/etl", run_id, 1, expires=clock() + timedelta(hours=2))
    refused = api.callback("complete", legacy, {"status": "succeeded"})
    assert refused.status == 403 and refused.body["error"]["code"] == "token_cannot_complete", refused.body
    assert stack.runs.get("data/etl", run_id).status is RunStatus.RUNNING  # type: ignore[union-attr]
    # Killed (a Spot reclaim, SIGKILL: exit 137): the retry's task is told where to resume.
    stack.intake.receive(state_change(first, 137), now=clock())
    clock.advance(timedelta(seconds=5))
    stack.pump()
    [second] = [t for t in tasks(ecs) if t["taskArn"] != first["taskArn"]]
    resumed = environment_of(second)
    assert resumed["JOBSCHED_ATTEMPT"] == "2" and json.loads(resumed["JOBSCHED_CHECKPOINT"]) == {"p": 12}
    # The first attempt's token speaks for that attempt only: its late reports are refused.
    assert api.callback("heartbeat", token, {"checkpoint": {"p": 13}}, principal=TASK_SESSION).status == 409
    # `jobsched heartbeat` inside the container: the token from its environment.
    monkeypatch.setenv("JOBSCHED_CALLBACK_TOKEN", resumed["JOBSCHED_CALLBACK_TOKEN"])
    jobsched = cli_as(api, TASK_SESSION, monkeypatch)
    code, out = jobsched("heartbeat", "--progress", "100", "--message", "all 30 partitions", "-o", "json")
    assert code == 0 and json.loads(out)["message"] == "all 30 partitions", out
    code, out = jobsched("heartbeat", "--checkpoint", "{p: 13")
    assert code == 2 and "not JSON" in out, out
    stack.intake.receive(state_change(second, 0), now=clock())
    done = api.call("GET", f"/teams/data/jobs/etl/runs/{run_id}", principal=team_role("data"))
    assert done.body["status"] == "SUCCEEDED" and done.body["progress"]["attempt"] == 2, done.body
    assert done.body["progress"]["checkpoint"] == {"p": 12}


def legacy_token(tokens: CallbackTokens, job: str, run_id: str, attempt: int, *, expires: datetime) -> str:
    """A callback token as signed before purposes (``v2``), still in flight during an upgrade."""
    key = tokens.ring.keys()[0]
    fields = [job, run_id, attempt, int(expires.timestamp())]
    payload = base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).decode().rstrip("=")
    signed = f"v2.{key_id(key)}.{payload}"
    signature = base64.urlsafe_b64encode(hmac.new(key, signed.encode(), hashlib.sha256).digest()).decode().rstrip("=")
    return f"{signed}.{signature}"


def test_a_container_run_without_the_apis_address_or_secret_starts_without_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(Env.API_URL, raising=False)
    assert run_callbacks() is None


def test_a_pause_with_cancel_running_stops_the_running_task_and_a_plain_pause_does_not(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ecs = cluster_and_definition("data")
    api = ApiClient(stack)
    run_id = stack.register_and_trigger(ecs_job())
    plain = api.call("POST", "/teams/data/jobs/etl/pause", {"reason": "db upgrade"}, principal=team_role("data"))
    assert plain.status == 200 and plain.body["cancelled_runs"] == []
    assert [t["lastStatus"] for t in tasks(ecs)] == ["RUNNING"]
    jobsched = cli_as(api, team_role("data"), monkeypatch)
    code, out = jobsched("pause", "data/etl", "--reason", "bad data upstream", "--cancel-running")
    assert code == 0 and f"cancelled: {run_id}" in out, out
    [task] = tasks(ecs)
    assert task["lastStatus"] == "STOPPED" and task.get("stoppedReason") == "jobsched: cancelled"
    run = stack.runs.get("data/etl", run_id)
    assert run is not None and run.status is RunStatus.CANCELLED
    history = api.call("GET", "/teams/data/jobs/etl/history", principal=team_role("data")).body
    assert any(e["action"] == "cancel" and e["details"]["run_id"] == run_id for e in history["entries"]), history


def test_the_run_logs_join_the_containers_own_stream_and_never_read_another_teams_log_group(
    stack: Stack, clock: Clock
) -> None:
    # CloudWatch Logs refuses events more than 2 hours ahead of the real time: this test runs at the real time.
    clock.now = datetime.now(UTC).replace(microsecond=0)
    ecs = cluster_and_definition("data")
    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName="/data/etl", tags={"jobsched-team": "data"})
    logs.create_log_group(logGroupName="/payments/secrets", tags={"jobsched-team": "payments"})
    awslogs = {"logDriver": "awslogs", "options": {"awslogs-group": "/data/etl", "awslogs-stream-prefix": "etl"}}
    foreign = {"logDriver": "awslogs", "options": {"awslogs-group": "/payments/secrets", "awslogs-stream-prefix": "x"}}
    ecs.register_task_definition(
        family="nightly-etl",
        containerDefinitions=[
            {"name": "etl", "image": "example/etl:2", "memory": 512, "logConfiguration": awslogs},
            {"name": "sidecar", "image": "example/peek:1", "memory": 128, "logConfiguration": foreign},
        ],
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="256",
        memory="1024",
        tags=[{"key": "jobsched-team", "value": "data"}],
    )
    run_id = stack.register_and_trigger(ecs_job())
    [task] = tasks(ecs)
    task_id = task["taskArn"].rsplit("/", 1)[-1]
    at = int(clock().timestamp() * 1000)
    for group, stream, message in (
        ("/data/etl", f"etl/etl/{task_id}", "loaded 1200 rows"),
        ("/payments/secrets", f"x/sidecar/{task_id}", "card 4111-1111"),
    ):
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[{"timestamp": at, "message": message}])
    stack.intake.receive(state_change(task, 0), now=clock())
    api = ApiClient(stack)
    api.services.logs = InsightsLogs(())  # no function log groups here: the container's lines only
    api.services.container_logs = ContainerLogs(stack.sessions, stack.guard)
    clock.advance(timedelta(minutes=1))
    lines = api.call("GET", f"/teams/data/jobs/etl/runs/{run_id}/logs", principal=team_role("data")).body["lines"]
    own = [(line["component"], line["message"]) for line in lines if line["component"].startswith("container:")]
    assert ("container:etl", "loaded 1200 rows") in own, lines
    assert not any("4111" in message for _, message in own), "another team's log group is never read"
    [refused] = [message for component, message in own if component == "container:sidecar"]
    assert refused.startswith("not shown: log group '/payments/secrets'"), refused


def test_a_task_iam_will_not_let_the_team_describe_is_skipped_not_fatal() -> None:
    """In AWS a team's session may describe only tasks tagged for its team, and DescribeTasks of a list holding
    another principal's task (one carrying the derivable token) is refused whole: each is then described alone,
    and the refused one is not the attempt's."""
    from botocore.exceptions import ClientError

    ours, theirs = (
        "arn:aws:ecs:us-east-1:123456789012:task/shared/ours",
        "arn:aws:ecs:us-east-1:123456789012:task/shared/x",
    )

    class Ecs:
        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def describe_tasks(self, *, cluster: str, tasks: list[str], include: list[str]) -> dict[str, Any]:
            self.calls.append(tasks)
            if theirs in tasks:
                raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "DescribeTasks")
            return {"tasks": [{"taskArn": arn} for arn in tasks]}

    fake = Ecs()
    assert EcsTasks._described(fake, "shared", [theirs, ours]) == [{"taskArn": ours}]
    assert fake.calls == [[theirs, ours], [theirs], [ours]]

    class Broken(Ecs):
        def describe_tasks(self, *, cluster: str, tasks: list[str], include: list[str]) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "DescribeTasks")

    with pytest.raises(ClientError):  # anything but a refusal is still the caller's to see
        EcsTasks._described(Broken(), "shared", [ours])


def test_a_fargate_task_is_metered_at_its_end_by_its_size_and_running_time_once(stack: Stack) -> None:
    """#50: a container run's own usage comes with its task's state change: 0.25 vCPU and 0.5 GB for ten minutes; the
    same state change delivered again adds nothing."""
    ecs = cluster_and_definition("data")
    stack.register_and_trigger(ecs_job())
    [task] = tasks(ecs)
    stopped = {"launchType": "FARGATE", "cpu": "256", "memory": "512",
               "startedAt": "2027-01-04T09:00:00Z", "stoppedAt": "2027-01-04T09:10:00Z"}  # fmt: skip
    assert stack.intake.receive(state_change(task, 0, **stopped), now=stack.clock()).action == "ended"
    assert stack.intake.receive(state_change(task, 0, **stopped), now=stack.clock()).action == "duplicate"
    [day] = stack.jobs.usage_between("data", date(2027, 1, 1), date(2027, 1, 31))
    assert day.counters[TARGET_VCPU_SECONDS] == pytest.approx(150.0)  # 0.25 vCPU x 600 s
    assert day.counters[TARGET_GB_SECONDS] == pytest.approx(300.0)
    assert day.target_type == "ecs" and day.counters["attempts"] == 1


def test_a_container_learns_its_runs_trace_from_its_environment(stack: Stack) -> None:
    """#50: TRACEPARENT and TRACESTATE in the task's environment (OpenTelemetry's environment carrier), naming the
    run's trace and the attempt's span; a job may not set them itself."""
    ecs = cluster_and_definition("data")
    run_id = stack.register_and_trigger(ecs_job())
    [task] = tasks(ecs)
    environment = {e["name"]: e["value"] for e in task["overrides"]["containerOverrides"][0]["environment"]}
    run = stack.runs.get("data/etl", run_id)
    assert run is not None
    trace = trace_id("data/etl", run_id, instant_text(run.scheduled_at))
    assert environment["TRACEPARENT"].startswith(f"00-{trace}-{attempt_span_id('data/etl', run_id, 1)}-")
    assert environment["TRACESTATE"] == f"jobsched={run_id}:1"
    with pytest.raises(ValueError, match="reserved_env_name"):
        JobSpec.model_validate(ecs_job(container={"name": "etl", "environment": {"traceparent": "00-x"}}))
