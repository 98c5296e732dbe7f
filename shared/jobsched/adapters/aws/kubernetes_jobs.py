"""Kubernetes targets: one batch/v1 Job per attempt on an EKS cluster, run by the deployment's state machine
(``eks:runJob.sync``), never by a Lambda waiting.

- The execution is named by the attempt's token and the Job after it: StartExecution of a name already used is
  refused (``ExecutionAlreadyExists``), so a second start of the same attempt finds the first, never a second Job.
- The cluster's endpoint and authority are read as the team (DescribeCluster on a cluster tagged for it or shared);
  the state machine is the deployment's own, started with the worker's role; its role reaches the cluster through
  the cluster's access entries (Kubernetes RBAC in the team's namespaces, granted by the platform).
- The attempt's callback token reaches the pod through a Secret the machine creates and deletes around the Job
  (``core.kubernetes``), never in the Job's manifest; the machine's execution data is encrypted with the stack's key.
- The execution's end (Step Functions Execution Status Change, matched by the deployment's rule to its machine)
  ends the run; at the lease's end DescribeExecution says how it ended, or StopExecution stops it (the Job's own
  ``activeDeadlineSeconds`` is the run's timeout too).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.ecs_tasks import RunCallbacks, attempt_token_of, pending, run_environment, unanswered
from jobsched.adapters.aws.ownership import TeamSessions
from jobsched.core.containers import TaskOutcome, execution_outcome, short_name
from jobsched.core.kubernetes import execution_input, job_manifest, token_secret_manifest
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.spec import KubernetesTarget


class KubernetesJobs:
    def __init__(
        self,
        sessions: TeamSessions,
        state_machine_arn: str | None,
        *,
        callbacks: RunCallbacks | None = None,
        stepfunctions: Any | None = None,
    ) -> None:
        self.sessions, self.state_machine_arn, self.callbacks = sessions, state_machine_arn, callbacks
        self._stepfunctions = stepfunctions

    @property
    def stepfunctions(self) -> Any:
        return self._stepfunctions or client("stepfunctions")

    def start(self, target: KubernetesTarget, context: RunContext) -> TargetResult:
        if not self.state_machine_arn:
            return TargetResult("failed", error="this deployment runs no kubernetes targets", retryable=False)
        token = attempt_token_of(context)
        found = self.find(context.team, target, token)
        if found is not None:
            return pending(found)
        cluster = self.sessions.client(context.team, "eks").describe_cluster(name=short_name(target.cluster))["cluster"]
        where = {
            "name": str(cluster["name"]),
            "endpoint": str(cluster["endpoint"]),
            "authority": str(cluster["certificateAuthority"]["data"]),
        }
        # The token in a Secret of its own, never in the Job a reader of Jobs sees.
        environment = run_environment(context, self.callbacks, target.timeout, with_token=False)
        secret = None
        if self.callbacks is not None:
            secret = token_secret_manifest(target, context, token, self.callbacks.issue(context, target.timeout))
        manifest = job_manifest(target, context, token, environment, token_secret=secret is not None)
        body = json.dumps(execution_input(target, context, manifest, where, secret), separators=(",", ":"))
        try:
            self.stepfunctions.start_execution(stateMachineArn=self.state_machine_arn, name=token, input=body)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
        except BotoCoreError as lost:
            return unanswered(self.find(context.team, target, token), lost)
        return pending(self._work(target, token))

    def _work(self, target: KubernetesTarget, token: str) -> dict[str, str]:
        assert self.state_machine_arn is not None
        arn = self.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{token}"
        return {"execution_arn": arn, "cluster": target.cluster, "namespace": target.namespace, "job_name": token}

    def find(self, team: str, target: KubernetesTarget, token: str) -> dict[str, str] | None:
        """The execution an attempt started (by its name), in any status."""
        if not self.state_machine_arn:
            return None
        work = self._work(target, token)
        return work if self.describe(team, work) is not None else None

    def describe(self, team: str, work: dict[str, str]) -> TaskOutcome | None:
        """The execution's outcome (STOPPED once it ended), or None if there is no such execution."""
        try:
            return execution_outcome(self.stepfunctions.describe_execution(executionArn=work["execution_arn"]))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
                return None
            raise

    def stop(self, team: str, work: dict[str, str], reason: str) -> None:
        """StopExecution: the Job is deleted by the integration, and ends at its own deadline regardless."""
        self.stepfunctions.stop_execution(executionArn=work["execution_arn"], error="jobsched", cause=reason[:32768])
