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
"""

from __future__ import annotations

from typing import Any

from jobsched.core.names import OWNER_TAG
from jobsched.core.records import RunContext
from jobsched.core.spec import KubernetesTarget

ANNOTATION_PREFIX = "jobsched.io/"
CONTAINER_NAME = "job"


def job_manifest(
    target: KubernetesTarget, context: RunContext, name: str, environment: list[dict[str, str]]
) -> dict[str, Any]:
    """The Job of one attempt (``name``: the attempt's token; ``environment``: the run's variables)."""
    labels = {
        OWNER_TAG: context.team,
        "app.kubernetes.io/managed-by": "jobsched",
    }
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


def execution_input(
    target: KubernetesTarget, context: RunContext, manifest: dict[str, Any], cluster: dict[str, str]
) -> dict[str, Any]:
    """What the deployment's kubernetes state machine gets: the cluster's endpoint and authority (read as the
    team), the Job, and the run it is for (its end is matched back to that attempt by it)."""
    return {
        "jobsched": {"job": context.job, "run_id": context.run_id, "attempt": context.attempt, "team": context.team},
        "cluster": {"name": cluster["name"], "endpoint": cluster["endpoint"], "authority": cluster["authority"]},
        "namespace": target.namespace,
        "job": manifest,
        # The state's own limit: the run's timeout and a minute for the Job's creation and deletion.
        "timeout_seconds": int(target.timeout.total_seconds()) + 60,
    }


def state_machine_definition() -> dict[str, Any]:
    """One state: run the Job and wait for it (eks:runJob.sync), its logs retrieved into the output."""
    return {
        "Comment": "jobsched: one Kubernetes Job of a kubernetes target's attempt",
        "StartAt": "RunJob",
        "States": {
            "RunJob": {
                "Type": "Task",
                "Resource": "arn:aws:states:::eks:runJob.sync",
                "Parameters": {
                    "ClusterName.$": "$.cluster.name",
                    "CertificateAuthority.$": "$.cluster.authority",
                    "Endpoint.$": "$.cluster.endpoint",
                    "Namespace.$": "$.namespace",
                    "Job.$": "$.job",
                    "LogOptions": {"RetrieveLogs": True},
                },
                "TimeoutSecondsPath": "$.timeout_seconds",
                "ResultSelector": {"status.$": "$.ResponseBody.status"},
                "End": True,
            }
        },
    }
