"""ECS targets: one task per attempt, found again rather than started twice, stopped on demand.

- ``startedBy`` is the attempt's token (``jobsched-`` and a digest of the run id, task and attempt): a redelivered
  message, or a worker that died after RunTask and before its record, finds the attempt's task with ListTasks and
  starts none. RunTask's ``clientToken`` is the same token, so a retried call is idempotent too.
- The task carries the run in its environment (``JOBSCHED_JOB``, ``JOBSCHED_RUN_ID``, ``JOBSCHED_ATTEMPT``,
  ``JOBSCHED_LOGICAL_INSTANT``, ``JOBSCHED_CORRELATION_ID``) and its tags, so a container can be idempotent.
- No Lambda waits: the attempt is pending (its lease is the target's timeout) until the task's Task State Change
  ends it (``pipeline.containers``), or the heartbeat checker finds its lease over and asks DescribeTasks.
Calls are made as the team (its session), on a cluster and task definition checked to be the team's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.adapters.aws.ownership import TeamSessions
from jobsched.core.containers import TaskOutcome, attempt_token, same_definition, task_outcome
from jobsched.core.names import JOB_TAG, OWNER_TAG, RunEnv
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.spec import EcsTarget

RUN_TAG = "jobsched-run"
ACCESS_DENIED = ("AccessDeniedException", "AccessDenied")
# RunTask failures worth another attempt (capacity comes back); the others will fail the same way again.
RETRYABLE_FAILURES = ("RESOURCE:", "AGENT", "CAPACITY", "ResourceInitializationError")


def attempt_token_of(context: RunContext) -> str:
    return attempt_token(context.job, context.run_id, context.attempt, context.task)


@dataclass(frozen=True)
class RunCallbacks:
    """How a container reports back while it runs (heartbeats, progress, checkpoints): the API's URL and a
    callback token for its attempt (``issue(context, valid_for)``), signed as the API's tokens are."""

    api_url: str
    issue: Callable[[RunContext, timedelta], str]


def run_environment(
    context: RunContext,
    callbacks: RunCallbacks | None = None,
    valid_for: timedelta = timedelta(hours=1),
    *,
    with_token: bool = True,
) -> list[dict[str, str]]:
    """What the run's containers learn: who they are, the checkpoint to resume from, where to report, and (unless
    ``with_token`` is false: a Kubernetes pod reads it from a Secret) the attempt's callback token."""
    values = {
        RunEnv.JOB: context.job,
        RunEnv.RUN_ID: context.run_id,
        RunEnv.ATTEMPT: str(context.attempt),
        RunEnv.LOGICAL_INSTANT: context.scheduled_at,
        RunEnv.CORRELATION_ID: context.correlation_id,
        RunEnv.TRACEPARENT: context.trace.traceparent,
        RunEnv.TRACESTATE: context.trace.tracestate,
    }
    if context.task:
        values[RunEnv.TASK] = context.task
    if context.checkpoint is not None:
        values[RunEnv.CHECKPOINT] = context.checkpoint
    if callbacks is not None:
        values[RunEnv.API_URL] = callbacks.api_url
        if with_token:
            values[RunEnv.CALLBACK_TOKEN] = callbacks.issue(context, valid_for)
    return [{"name": name, "value": value} for name, value in values.items()]


class EcsTasks:
    def __init__(self, sessions: TeamSessions, callbacks: RunCallbacks | None = None) -> None:
        self.sessions, self.callbacks = sessions, callbacks

    def start(self, target: EcsTarget, context: RunContext) -> TargetResult:
        ecs = self.sessions.client(context.team, "ecs")
        token = attempt_token_of(context)
        found = self.find(context.team, target, token)
        if found is not None:  # started before (a lost response, a redelivery): this attempt's task, not a second
            return pending(found)
        try:
            response = ecs.run_task(**self._request(ecs, target, context, token))
        except BotoCoreError as lost:  # no answer: RunTask may have started it; never start another for this attempt
            return unanswered(self.find(context.team, target, token), lost)
        failures = response.get("failures") or []
        if failures or not response.get("tasks"):
            reason = "; ".join(f"{f.get('reason', '?')} {f.get('detail', '')}".strip() for f in failures) or "no task"
            retryable = any(marker in reason for marker in RETRYABLE_FAILURES)
            return TargetResult("failed", error=f"RunTask: {reason}", retryable=retryable)
        task = response["tasks"][0]
        definition = task.get("taskDefinitionArn") or target.task_definition
        return pending({"cluster": target.cluster, "task_arn": task["taskArn"], "task_definition": definition})

    def _request(self, ecs: Any, target: EcsTarget, context: RunContext, token: str) -> dict[str, Any]:
        environment = run_environment(context, self.callbacks, target.timeout)
        if target.container is not None:
            override: dict[str, Any] = {
                "name": target.container.name,
                "environment": [{"name": k, "value": v} for k, v in target.container.environment.items()] + environment,
            }
            if target.container.command is not None:
                override["command"] = target.container.command
            for field in ("cpu", "memory"):
                if getattr(target.container, field) is not None:
                    override[field] = getattr(target.container, field)
            overrides = [override]
        else:  # every container of the task definition learns which run it is
            definition = ecs.describe_task_definition(taskDefinition=target.task_definition)["taskDefinition"]
            overrides = [{"name": c["name"], "environment": environment} for c in definition["containerDefinitions"]]
        request: dict[str, Any] = {
            "cluster": target.cluster,
            "taskDefinition": target.task_definition,
            "count": 1,
            "startedBy": token,
            "clientToken": token,
            "overrides": {"containerOverrides": overrides},
            "tags": [
                {"key": RUN_TAG, "value": context.run_id},
                {"key": JOB_TAG, "value": context.job},
                {"key": OWNER_TAG, "value": context.team},
                {"key": "jobsched-attempt", "value": str(context.attempt)},
            ],
        }
        if target.launch_type is not None:
            request["launchType"] = target.launch_type
        if target.capacity_provider is not None:
            request["capacityProviderStrategy"] = [{"capacityProvider": target.capacity_provider, "weight": 1}]
        if target.network is not None:
            request["networkConfiguration"] = {
                "awsvpcConfiguration": {
                    "subnets": target.network.subnets,
                    "securityGroups": target.network.security_groups,
                    "assignPublicIp": "ENABLED" if target.network.assign_public_ip else "DISABLED",
                }
            }
        return request

    def describe(self, team: str, work: dict[str, str]) -> TaskOutcome | None:
        ecs = self.sessions.client(team, "ecs")
        found = ecs.describe_tasks(cluster=work["cluster"], tasks=[work["task_arn"]]).get("tasks", [])
        return task_outcome(found[0]) if found else None

    def find(self, team: str, target: EcsTarget, token: str) -> dict[str, str] | None:
        """The task an attempt started (by its token), running or stopped: after a crash before it was recorded.
        The token can be derived by anyone, so a task counts only if it runs the job's task definition and
        carries the tags RunTask gave it (the team's): another principal's task on a shared cluster is not it."""
        ecs = self.sessions.client(team, "ecs")
        for status in ("RUNNING", "STOPPED"):
            found = ecs.list_tasks(cluster=target.cluster, startedBy=token, desiredStatus=status).get("taskArns", [])
            if not found:
                continue
            for task in self._described(ecs, target.cluster, found[:100]):
                tags = {tag.get("key"): tag.get("value") for tag in task.get("tags") or []}
                definition = str(task.get("taskDefinitionArn") or "")
                if tags.get(OWNER_TAG) == team and same_definition(target.task_definition, definition):
                    return {"cluster": target.cluster, "task_arn": str(task["taskArn"]), "task_definition": definition}
        return None

    @staticmethod
    def _described(ecs: Any, cluster: str, arns: list[str]) -> list[dict[str, Any]]:
        """The tasks the team may describe. IAM lets a team's session describe only tasks tagged for its team, and
        refuses the whole call if one is not: then each is described alone and another principal's is skipped."""
        try:
            return list(ecs.describe_tasks(cluster=cluster, tasks=arns, include=["TAGS"]).get("tasks", []))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ACCESS_DENIED:
                raise
            if len(arns) == 1:
                return []  # another principal's task
        return [task for arn in arns for task in EcsTasks._described(ecs, cluster, [arn])]

    def task_role(self, team: str, work: dict[str, str]) -> str | None:
        ecs = self.sessions.client(team, "ecs")
        definition = ecs.describe_task_definition(taskDefinition=work["task_definition"])["taskDefinition"]
        return definition.get("taskRoleArn") or None

    def stop(self, team: str, work: dict[str, str], reason: str) -> None:
        """StopTask: ECS sends the containers SIGTERM, then SIGKILL after their stop timeout."""
        ecs = self.sessions.client(team, "ecs")
        ecs.stop_task(cluster=work["cluster"], task=work["task_arn"], reason=reason[:255])


def pending(work: dict[str, str]) -> TargetResult:
    """The attempt's work is started: the run waits for its state change (the output names the task or the job,
    and its definition, by which its logs are found once the service has forgotten it)."""
    return TargetResult("pending", output=json.dumps(work))


def unanswered(found: dict[str, str] | None, lost: Exception) -> TargetResult:
    """A start whose answer was lost: the attempt's work if it can be found already, else pending without it:
    its state change (matched by the attempt's token) or the reconcile at its timeout decides, and no second
    start is made for the attempt (a retry would start a second while the first may run)."""
    if found is not None:
        return pending(found)
    return TargetResult("pending", output=json.dumps({"unanswered": f"{type(lost).__name__}: {lost}"[:300]}))
