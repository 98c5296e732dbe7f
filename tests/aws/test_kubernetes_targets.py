"""Kubernetes targets: the Job manifest checked against the Kubernetes schema, one execution of the deployment's
state machine per attempt (named by it), the run ended only by that execution's end, the lease's end stopping
it, and another team's cluster or namespace refused.

moto records StartExecution but cannot run ``eks:runJob.sync`` (nothing here runs a Kubernetes Job): the tests
hand the intake the Step Functions Execution Status Change AWS would send. What is executed and what is only
validated is said in the README."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3
import kubernetes_validate
import pytest

from jobsched.adapters.aws.kubernetes_jobs import KubernetesJobs
from jobsched.core.events import CONTAINER_TRIGGER, EventEnvelope
from jobsched.core.kubernetes import SECRET_KEY, job_manifest, state_machine_definition
from jobsched.core.names import Env
from jobsched.core.run_records import RunContext
from jobsched.core.runs import RunStatus
from jobsched.core.spec import JobSpec, KubernetesTarget
from jobsched.pipeline.worker import heartbeat_checker
from jobsched.tenancy.ownership import TeamGrants
from jobsched.wiring import run_callbacks
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import ACCOUNT, KUBERNETES_MACHINE, REGION, Clock, Stack

KUBERNETES_VERSION = "1.33.0"  # the schema the manifests are checked against (EKS's supported versions)


def kubernetes_job(team: str = "data", **target: Any) -> dict[str, Any]:
    return {
        "name": "train",
        "team": team,
        "retry": {"max_attempts": 1},
        "target": {
            "type": "kubernetes",
            "cluster": f"{team}-eks",
            "namespace": f"{team}-jobs",
            "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1.4",
            "command": ["python", "-m", "train"],
            "args": ["--epochs", "3"],
            "environment": {"MODE": "full"},
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
            "service_account": "trainer",
            "timeout": "30m",
            **target,
        },
    }


def cluster(team: str) -> None:
    eks = boto3.client("eks", region_name=REGION)
    eks.create_cluster(
        name=f"{team}-eks",
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        tags={"jobsched-team": team},
    )


@pytest.fixture
def machine(stack: Stack) -> Any:
    """The deployment's kubernetes state machine (CDK creates it; here, in moto)."""
    stepfunctions = boto3.client("stepfunctions", region_name=REGION)
    stepfunctions.create_state_machine(
        name=KUBERNETES_MACHINE.rsplit(":", 1)[-1],
        definition=json.dumps(state_machine_definition()),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/jobsched-test-kubernetes-jobs",
    )
    return stepfunctions


def context(attempt: int = 1) -> RunContext:
    return RunContext(
        job="data/train",
        team="data",
        run_id="20270104T090000Z",
        attempt=attempt,
        scheduled_at="2027-01-04T09:00:00Z",
        correlation_id="c-1",
        checkpoint='{"epoch":2}',
    )


def test_the_job_manifest_is_valid_for_kubernetes_and_names_the_run() -> None:
    full = JobSpec.model_validate(kubernetes_job()).target
    minimal = JobSpec.model_validate(
        {
            "name": "m",
            "team": "data",
            "target": {"type": "kubernetes", "cluster": "c", "namespace": "data", "image": "busybox"},
        }
    ).target
    assert isinstance(full, KubernetesTarget) and isinstance(minimal, KubernetesTarget)
    environment = [
        {"name": "JOBSCHED_RUN_ID", "value": "20270104T090000Z"},
        {"name": "JOBSCHED_CHECKPOINT", "value": "{}"},
    ]
    for target in (full, minimal):
        manifest = job_manifest(target, context(), "jobsched-0123abcd", environment)
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)  # raises on any unknown or bad field
    manifest = job_manifest(full, context(2), "jobsched-0123abcd", environment)
    annotations = manifest["metadata"]["annotations"]
    assert annotations["jobsched.io/run-id"] == "20270104T090000Z" and annotations["jobsched.io/attempt"] == "2"
    assert annotations["jobsched.io/expected-duration"] == "1800s"
    spec = manifest["spec"]
    assert (
        spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 1800 and spec["ttlSecondsAfterFinished"] == 3600
    )
    [container] = spec["template"]["spec"]["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    assert {"name": "MODE", "value": "full"} in container["env"] and environment[0] in container["env"]
    assert (
        spec["template"]["spec"]["serviceAccountName"] == "trainer" and manifest["metadata"]["namespace"] == "data-jobs"
    )


def test_the_spec_bounds_a_kubernetes_run() -> None:
    for bad, code in (
        ({"namespace": "Data_Jobs"}, "invalid_namespace"),
        ({"resources": {"limits": {"memory": "4 gigs"}}}, "invalid_quantity"),
        ({"image": "bad image"}, "invalid_image"),
        ({"environment": {"JOBSCHED_RUN_ID": "x"}}, "reserved_env_name"),
        ({"ttl_after_finished": "30d"}, "ttl_after_finished"),
        ({"cluster": "arn:aws:eks:us-east-1:1:cluster/x"}, "invalid_eks_cluster"),
    ):
        with pytest.raises(ValueError) as refused:
            JobSpec.model_validate(kubernetes_job(**bad))
        assert code in str(refused.value), (bad, str(refused.value))


def test_another_teams_cluster_or_namespace_is_refused_at_put(stack: Stack) -> None:
    cluster("payments")
    cluster("data")
    api = ApiClient(stack)
    for bad, field in (
        ({"cluster": "payments-eks"}, "target.cluster"),
        ({"namespace": "payments"}, "target.namespace"),
        ({"namespace": "kube-system"}, "target.namespace"),
        ({"namespace": "kube-anything"}, "target.namespace"),
        ({"namespace": "default"}, "target.namespace"),
        ({"namespace": "database"}, "target.namespace"),  # starts with the team's name, not granted
        ({"namespace": "data-ops"}, "target.namespace"),  # TEAM-..., but not granted: a prefix owns nothing
        ({"namespace": "data-eng"}, "target.namespace"),  # team data-eng's own namespace
        ({"namespace": "data-eng-jobs"}, "target.namespace"),  # granted to data-eng
        ({"service_account": "data-eng-admin"}, "target.service_account"),  # granted to data-eng only
        ({"service_account": "default-admin"}, "target.service_account"),  # granted to nobody
    ):
        refused = api.call("PUT", "/teams/data/jobs/train", kubernetes_job(**bad), principal=team_role("data"))
        [why] = refused.body["error"]["errors"]
        assert refused.status == 422 and why["code"] == "resource_not_owned" and why["field"] == field, refused.body
    fine: dict[str, Any]
    for fine in (dict[str, Any](), {"namespace": "data", "service_account": None}):
        stored = api.call("PUT", "/teams/data/jobs/train", kubernetes_job(**fine), principal=team_role("data"))
        assert stored.status in (200, 201), stored.body
    # Teams named "kube" and "default" own nothing of the system's, even their "own" names.
    for team in ("kube", "default"):
        stack.team_grants = TeamGrants.from_config({"kubernetes": {team: {"namespaces": [f"{team}-system"]}}})
        for namespace in ("kube-system", "default"):
            refused = api.call(
                "PUT",
                f"/teams/{team}/jobs/train",
                kubernetes_job(team=team, namespace=namespace, service_account=None),
                principal=team_role(team),
            )
            assert refused.status == 422, (team, namespace, refused.body)


def test_a_namespace_granted_twice_is_nobodys() -> None:
    grants = TeamGrants.from_config({"kubernetes": {"a": {"namespaces": ["shared"]}, "b": {"namespaces": ["shared"]}}})
    assert grants.namespace_refusal("shared", "a") is not None and grants.namespace_refusal("shared", "b") is not None
    assert grants.namespace_refusal("b", "a") is not None  # another team's own name, when that team has grants


def test_a_grant_withdrawn_refuses_the_next_run(stack: Stack, machine: Any) -> None:
    """Checked before every run too: a namespace the platform takes back starts nothing, and the run fails named."""
    cluster("data")
    stack.team_grants = TeamGrants.from_config({"kubernetes": {"data": {"service_accounts": ["trainer"]}}})
    run_id = stack.register_and_trigger(kubernetes_job())
    run = stack.runs.get("data/train", run_id)
    assert run is not None and run.status is RunStatus.FAILED and "namespace 'data-jobs'" in (run.error or "")
    assert executions(machine) == []


def executions(stepfunctions: Any) -> list[dict[str, Any]]:
    listed = stepfunctions.list_executions(stateMachineArn=KUBERNETES_MACHINE)["executions"]
    return [stepfunctions.describe_execution(executionArn=e["executionArn"]) for e in listed]


def status_change(execution: dict[str, Any], status: str, **detail: Any) -> EventEnvelope:
    body = {
        "executionArn": execution["executionArn"],
        "stateMachineArn": KUBERNETES_MACHINE,
        "name": execution["name"],
        "status": status,
        "input": execution["input"],
    } | detail
    event = {
        "version": "0",
        "id": "7d3e4f88-0000-0000-0000-000000000000",
        "source": "aws.states",
        "detail-type": "Step Functions Execution Status Change",
        "time": "2027-01-04T09:05:00Z",
        "detail": body,
    }
    return EventEnvelope.model_validate({"jobsched": {"job": "", "trigger": CONTAINER_TRIGGER}, "event": event})


def test_one_execution_per_attempt_and_its_own_end_ends_the_run(stack: Stack, machine: Any) -> None:
    cluster("data")
    run_id = stack.register_and_trigger(kubernetes_job())
    [execution] = executions(machine)
    assert execution["name"].startswith("jobsched-") and execution["status"] == "RUNNING"
    given = json.loads(execution["input"])
    assert given["jobsched"] == {"job": "data/train", "run_id": run_id, "attempt": 1, "team": "data"}
    assert given["cluster"]["name"] == "data-eks" and given["cluster"]["endpoint"].startswith("https://")
    kubernetes_validate.validate(given["job"], KUBERNETES_VERSION, strict=True)
    assert given["job"]["metadata"]["name"] == execution["name"]
    run = stack.runs.get("data/train", run_id)
    assert run is not None and execution["executionArn"] in (run.work or "")
    # Started again for the same attempt (a redelivery, the adapter called twice): the same execution.
    stack.worker.process(run.to_message())
    target = JobSpec.model_validate(kubernetes_job()).target
    again = RunContext(job=run.job, team="data", run_id=run_id, attempt=1, scheduled_at="x", correlation_id="c")
    assert stack.targets.execute(target, again).outcome == "pending"
    assert len(executions(machine)) == 1
    forged = execution | {"executionArn": execution["executionArn"] + "x", "name": "jobsched-forged"}
    assert stack.intake.receive(status_change(forged, "SUCCEEDED"), now=stack.clock()).action == "dropped"
    failed = status_change(execution, "FAILED", error="States.TaskFailed", cause="BackoffLimitExceeded: pod OOMKilled")
    assert stack.intake.receive(failed, now=stack.clock()).action == "ended"
    done = stack.runs.get("data/train", run_id)
    assert done is not None and done.status is RunStatus.FAILED and "BackoffLimitExceeded" in (done.error or "")


def test_the_lease_end_stops_the_execution_and_the_run_times_out(stack: Stack, machine: Any, clock: Clock) -> None:
    cluster("data")
    run_id = stack.register_and_trigger(kubernetes_job(timeout="10m"))
    clock.advance(timedelta(minutes=11))
    heartbeat_checker(stack.runs, stack.worker).check(clock())
    [execution] = executions(machine)
    assert execution["status"] == "ABORTED"
    run = stack.runs.get("data/train", run_id)
    assert run is not None and run.status is RunStatus.TIMED_OUT


def test_the_callback_token_reaches_the_pod_through_a_secret_never_through_the_job(
    stack: Stack, machine: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever may read Jobs in the namespace (or the execution's input, without the stack key) does not learn the
    token: the Job names a Secret the machine creates before it and deletes after it, whichever way it ended."""
    monkeypatch.setenv(Env.API_URL, "https://api.example.com/prod/")
    monkeypatch.setenv(Env.CALLBACK_SECRET, "test-secret-of-sufficient-length")  # what ApiClient verifies with
    stack.targets.kubernetes = KubernetesJobs(stack.sessions, KUBERNETES_MACHINE, callbacks=run_callbacks(clock))
    cluster("data")
    run_id = stack.register_and_trigger(kubernetes_job())
    [execution] = executions(machine)
    given = json.loads(execution["input"])
    secret = given["secret"]
    kubernetes_validate.validate(secret, KUBERNETES_VERSION, strict=True)
    kubernetes_validate.validate(given["job"], KUBERNETES_VERSION, strict=True)
    token = secret["stringData"][SECRET_KEY]
    assert secret["metadata"]["name"] == given["job"]["metadata"]["name"] == execution["name"]
    assert secret["metadata"]["namespace"] == given["job"]["metadata"]["namespace"] == "data-jobs"
    assert token not in json.dumps(given["job"]), "the Job a reader of Jobs sees carries no token"
    [container] = given["job"]["spec"]["template"]["spec"]["containers"]
    [told] = [e for e in container["env"] if e["name"] == "JOBSCHED_CALLBACK_TOKEN"]
    assert told == {
        "name": "JOBSCHED_CALLBACK_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": execution["name"], "key": SECRET_KEY}},
    }
    assert {"name": "JOBSCHED_API_URL", "value": "https://api.example.com/prod"} in container["env"]
    # The token the pod reads is its attempt's progress token: it reports, and it can never end the run.
    api = ApiClient(stack)
    said = api.callback("heartbeat", token, {"progress": 10, "checkpoint": {"epoch": 1}})
    assert said.status == 200, said.body
    forged = api.callback("complete", token, {"status": "succeeded"})
    assert forged.status == 403 and forged.body["error"]["code"] == "token_cannot_complete", forged.body
    assert stack.runs.get("data/train", run_id).status is RunStatus.RUNNING  # type: ignore[union-attr]


def test_every_way_through_the_machine_deletes_the_token_secret_it_created() -> None:
    """The machine's graph: from the Secret's creation, each path to an end passes a deletion of that Secret (the
    Job succeeded, failed, timed out), and the execution ends as the Job did."""
    definition = state_machine_definition()
    states: dict[str, dict[str, Any]] = definition["States"]

    def nexts(name: str) -> list[str]:
        state = states[name]
        found = [state["Next"]] if "Next" in state else []
        found += [c["Next"] for c in state.get("Catch", [])] + [c["Next"] for c in state.get("Choices", [])]
        return found + ([state["Default"]] if "Default" in state else [])

    def paths(name: str, walked: tuple[str, ...]) -> list[tuple[str, ...]]:
        here = (*walked, name)
        following = nexts(name)
        return [here] if not following else [p for n in following for p in paths(n, here)]

    created = [p for p in paths(definition["StartAt"], ()) if "CreateTokenSecret" in p]
    assert created, "the Secret is created when the input carries one"
    for path in created:
        deletions = [
            s
            for s in path[path.index("CreateTokenSecret") :]
            if states[s].get("Parameters", {}).get("Method") == "DELETE"
        ]
        assert deletions, path
    assert states["RunJob"]["Catch"][0]["ErrorEquals"] == ["States.ALL"]
    ends = {states[p[-1]]["Type"] for p in created}
    assert ends == {"Pass", "Fail"} and states["JobSucceeded"]["InputPath"] == "$.result"
    assert states["JobFailed"]["ErrorPath"] == "$.failure.Error"  # the Job's own error is the execution's
