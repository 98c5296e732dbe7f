"""The batch/v1 Job a kubernetes target's attempt runs, and the input of the deployment's state machine that
runs it (``eks:runJob.sync``). Pure: the adapter starts the execution, the tests check the manifest against the
Kubernetes schema.

- One Job per attempt, named by the attempt's token (a DNS label), so a second start of the same attempt names
  the same Job and the same execution.
- Retries are the scheduler's (``backoffLimit: 0``); the Job's own deadline is the run's timeout
  (``activeDeadlineSeconds``), so Kubernetes stops the pod there even if the execution were lost; the finished
  Job stays ``ttl_after_finished`` for its logs.
- Annotations name the run, its attempt and its expected duration (for operators reading the cluster); labels
  name the team and mark the Job as the scheduler's.
- The attempt's callback token is never in the Job: the machine creates a Secret of the attempt's name first, the
  pod reads it by ``secretKeyRef`` (reading Secrets is its own RBAC verb, unlike reading Jobs), and the machine
  deletes it once the Job has ended, whichever way. The execution's input that carries it is encrypted with the
  stack's key (reading it back takes ``kms:Decrypt``); a Secret left by a stopped execution holds a token that
  expires with the run's timeout.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.names import OWNER_TAG, RunEnv
from jobsched.core.run_records import RunContext
from jobsched.core.spec import KubernetesTarget

ANNOTATION_PREFIX = "jobsched.io/"
CONTAINER_NAME = "job"
SECRET_KEY = "token"  # the key of the attempt's Secret that holds its callback token


def _labels(context: RunContext) -> dict[str, str]:
    return {OWNER_TAG: context.team, "app.kubernetes.io/managed-by": "jobsched"}


def job_manifest(
    target: KubernetesTarget,
    context: RunContext,
    name: str,
    environment: list[dict[str, str]],
    *,
    token_secret: bool = False,
) -> dict[str, Any]:
    """The Job of one attempt (``name``: the attempt's token; ``environment``: the run's variables). With
    ``token_secret`` its container reads the callback token from the attempt's Secret (``token_secret_manifest``)."""
    labels = _labels(context)
    annotations = {
        f"{ANNOTATION_PREFIX}job": context.job,
        f"{ANNOTATION_PREFIX}run-id": context.run_id,
        f"{ANNOTATION_PREFIX}attempt": str(context.attempt),
        f"{ANNOTATION_PREFIX}logical-instant": context.scheduled_at,
        f"{ANNOTATION_PREFIX}expected-duration": f"{int(target.timeout.total_seconds())}s",
    }
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": target.image,
        "env": [{"name": k, "value": v} for k, v in target.environment.items()] + environment,
    }
    if token_secret:
        reference = {"secretKeyRef": {"name": name, "key": SECRET_KEY}}
        container["env"].append({"name": RunEnv.CALLBACK_TOKEN, "valueFrom": reference})
    if target.command is not None:
        container["command"] = target.command
    if target.args is not None:
        container["args"] = target.args
    resources = {
        kind: {k: v for k, v in getattr(target.resources, kind).model_dump().items() if v is not None}
        for kind in ("requests", "limits")
    }
    if any(resources.values()):
        container["resources"] = {kind: values for kind, values in resources.items() if values}
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if target.service_account is not None:
        pod["serviceAccountName"] = target.service_account
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": target.namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(target.timeout.total_seconds()),
            "ttlSecondsAfterFinished": int(target.ttl_after_finished.total_seconds()),
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod},
        },
    }


def token_secret_manifest(target: KubernetesTarget, context: RunContext, name: str, token: str) -> dict[str, Any]:
    """The v1 Secret of one attempt, named as its Job, holding its callback token."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": target.namespace, "labels": _labels(context)},
        "type": "Opaque",
        "stringData": {SECRET_KEY: token},
    }


def execution_input(
    target: KubernetesTarget,
    context: RunContext,
    manifest: dict[str, Any],
    cluster: dict[str, str],
    secret: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the deployment's kubernetes state machine gets: the cluster's endpoint and authority (read as the
    team), the Job, the attempt's token Secret if any, and the run it is for (its end is matched back to that
    attempt by it)."""
    given = {
        "jobsched": {"job": context.job, "run_id": context.run_id, "attempt": context.attempt, "team": context.team},
        "cluster": {"name": cluster["name"], "endpoint": cluster["endpoint"], "authority": cluster["authority"]},
        "namespace": target.namespace,
        "job": manifest,
        # The state's own limit: the run's timeout and a minute for the Job's creation and deletion.
        "timeout_seconds": int(target.timeout.total_seconds()) + 60,
    }
    if secret is not None:
        given["secret"] = secret
    return given


# Where every state reaches the run's cluster (from the execution's input).
CLUSTER = {
    "ClusterName.$": "$.cluster.name",
    "CertificateAuthority.$": "$.cluster.authority",
    "Endpoint.$": "$.cluster.endpoint",
}
EKS_CALL = "arn:aws:states:::eks:call"
SECRET_PATH = "States.Format('/api/v1/namespaces/{}/secrets/{}', $.namespace, $.job.metadata.name)"


def _cluster_call(method: str, path: str, **more: Any) -> dict[str, Any]:
    """An ``eks:call`` to the run's cluster (``path``: a States.Format of the input)."""
    return {**CLUSTER, "Method": method, "Path.$": path, **more}


def _delete_token(then: str) -> dict[str, Any]:
    """Delete the attempt's Secret, then go on to ``then``: a Secret that cannot be deleted (never created, already
    gone) is not the run's failure."""
    return {
        "Type": "Task",
        "Resource": EKS_CALL,
        "Parameters": _cluster_call("DELETE", SECRET_PATH),
        "ResultPath": None,
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": None, "Next": then}],
        "Next": then,
    }


def state_machine_definition() -> dict[str, Any]:
    """Run the Job and wait for it (eks:runJob.sync), its logs retrieved into the output; around it, the attempt's
    token Secret is created first (when the input has one) and deleted after the Job, whether it succeeded or
    not. The execution ends as the Job did: the Job's error and cause are the execution's."""
    return {
        "Comment": "jobsched: one Kubernetes Job of a kubernetes target's attempt",
        "StartAt": "TokenGiven",
        "States": {
            "TokenGiven": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.secret", "IsPresent": True, "Next": "CreateTokenSecret"}],
                "Default": "RunJob",
            },
            "CreateTokenSecret": {
                "Type": "Task",
                "Resource": EKS_CALL,
                "Parameters": _cluster_call(
                    "POST",
                    "States.Format('/api/v1/namespaces/{}/secrets', $.namespace)",
                    **{"RequestBody.$": "$.secret"},
                ),
                "ResultPath": None,
                "Next": "RunJob",
            },
            "RunJob": {
                "Type": "Task",
                "Resource": "arn:aws:states:::eks:runJob.sync",
                "Parameters": {
                    **CLUSTER,
                    "Namespace.$": "$.namespace",
                    "Job.$": "$.job",
                    "LogOptions": {"RetrieveLogs": True},
                },
                "TimeoutSecondsPath": "$.timeout_seconds",
                "ResultSelector": {"status.$": "$.ResponseBody.status"},
                "ResultPath": "$.result",
                "Catch": [
                    {"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "DeleteTokenAfterFailure"}
                ],
                "Next": "DeleteToken",
            },
            "DeleteToken": _delete_token("JobSucceeded"),
            "JobSucceeded": {"Type": "Pass", "InputPath": "$.result", "End": True},  # the Job's status, as before
            "DeleteTokenAfterFailure": _delete_token("JobFailed"),
            "JobFailed": {"Type": "Fail", "ErrorPath": "$.failure.Error", "CausePath": "$.failure.Cause"},
        },
    }
