"""AWS Batch targets: one job per attempt, found again rather than submitted twice, terminated on demand.

SubmitJob has no client token, so "one job per attempt" rests on three things, each tested:
- the job's name is the attempt's token (``jobsched-`` and a digest of the run, task and attempt), and
  before submitting, the adapter lists the queue's jobs by that name (every status): a job found is the
  attempt's, and none is submitted;
- only the worker that won the attempt's conditional claim submits: a redelivered message of a RUNNING
  external run is a duplicate (``decisions.on_existing``), so no second worker reaches SubmitJob;
- a SubmitJob whose answer is lost is never retried and never makes the attempt fail (a retry would submit a
  second job while the first may run): the run waits for the job's state change, matched by its name and
  queue, or for the reconcile at its timeout, which finds the job by its name (or none, and the attempt is
  lost and retried by policy).
The job carries the run in its environment (as ECS tasks do) and its tags. No Lambda waits: the Batch Job
State Change ends the run (``pipeline.containers``); array jobs end by the parent's status, which Batch sets
from its children (SUCCEEDED only when every child did).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError

from jobsched.adapters.aws.ecs_tasks import (
    RUN_TAG,
    RunCallbacks,
    attempt_token_of,
    pending,
    run_environment,
    unanswered,
)
from jobsched.adapters.aws.ownership import TeamSessions
from jobsched.core.containers import TaskOutcome, batch_outcome, same_definition
from jobsched.core.names import JOB_TAG, OWNER_TAG
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.spec import BatchTarget

BATCH_TIMEOUT_MARGIN_S = 300


class BatchJobs:
    def __init__(self, sessions: TeamSessions, callbacks: RunCallbacks | None = None) -> None:
        self.sessions, self.callbacks = sessions, callbacks

    def start(self, target: BatchTarget, context: RunContext) -> TargetResult:
        token = attempt_token_of(context)
        found = self.find(context.team, target, token)
        if found is not None:
            return pending(found)
        batch = self.sessions.client(context.team, "batch")
        try:
            response = batch.submit_job(**self._request(target, context, token))
        except BotoCoreError as lost:
            return unanswered(self.find(context.team, target, token), lost)
        return pending(_work(target, str(response["jobId"])))

    def _request(self, target: BatchTarget, context: RunContext, token: str) -> dict[str, Any]:
        override = target.container
        environment = run_environment(context, self.callbacks, target.timeout)
        if override is not None:
            environment = [{"name": k, "value": v} for k, v in override.environment.items()] + environment
        container: dict[str, Any] = {"environment": environment}
        if override is not None and override.command is not None:
            container["command"] = override.command
        resources = []
        if override is not None and override.vcpus is not None:
            resources.append({"type": "VCPU", "value": f"{override.vcpus:g}"})
        if override is not None and override.memory is not None:
            resources.append({"type": "MEMORY", "value": str(override.memory)})
        if resources:
            container["resourceRequirements"] = resources
        request: dict[str, Any] = {
            "jobName": token,
            "jobQueue": target.job_queue,
            "jobDefinition": target.job_definition,
            "containerOverrides": container,
            # The scheduler stops the job at the run's timeout (TIMED_OUT); Batch's own is a backstop after it.
            "timeout": {"attemptDurationSeconds": int(target.timeout.total_seconds()) + BATCH_TIMEOUT_MARGIN_S},
            "retryStrategy": {"attempts": 1},  # retries are the scheduler's, by the job's policy
            "tags": {RUN_TAG: context.run_id, JOB_TAG: context.job, OWNER_TAG: context.team},
            "propagateTags": True,
        }
        if target.array_size is not None:
            request["arrayProperties"] = {"size": target.array_size}
        return request

    def find(self, team: str, target: BatchTarget, token: str) -> dict[str, str] | None:
        """The job an attempt submitted (by its name), in any status: after a crash or a lost answer."""
        batch = self.sessions.client(team, "batch")
        pages = batch.get_paginator("list_jobs").paginate(
            jobQueue=target.job_queue, filters=[{"name": "JOB_NAME", "values": [token]}]
        )
        named = [
            str(job["jobId"]) for page in pages for job in page.get("jobSummaryList", []) if job.get("jobName") == token
        ]
        # The name can be derived by anyone: a job counts only with the job's definition and the team's tags.
        for index in range(0, len(named), 100):
            for job in batch.describe_jobs(jobs=named[index : index + 100]).get("jobs", []):
                tags = job.get("tags") or {}
                if tags.get(OWNER_TAG) == team and same_definition(
                    target.job_definition, str(job.get("jobDefinition"))
                ):
                    return _work(target, str(job["jobId"]))
        return None

    def describe(self, team: str, work: dict[str, str]) -> TaskOutcome | None:
        found = self.sessions.client(team, "batch").describe_jobs(jobs=[work["job_id"]]).get("jobs", [])
        return batch_outcome(found[0]) if found else None

    def task_role(self, team: str, work: dict[str, str]) -> str | None:
        found = self.sessions.client(team, "batch").describe_jobs(jobs=[work["job_id"]]).get("jobs", [])
        return (found[0].get("container") or {}).get("jobRoleArn") or None if found else None

    def stop(self, team: str, work: dict[str, str], reason: str) -> None:
        """TerminateJob: a running job's containers get SIGTERM, then SIGKILL (as StopTask); a queued job is
        cancelled. An array job's children are terminated with it."""
        self.sessions.client(team, "batch").terminate_job(jobId=work["job_id"], reason=reason[:255])


def _work(target: BatchTarget, job_id: str) -> dict[str, str]:
    return {"job_queue": target.job_queue, "job_id": job_id, "job_definition": target.job_definition}
