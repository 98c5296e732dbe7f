"""Container runs (ECS tasks, Batch jobs, Kubernetes Jobs) end by their work's state change, never by a worker
waiting for them.

- ``stopped``: an ECS Task State Change (STOPPED), a Batch Job State Change (SUCCEEDED or FAILED) or a Step
  Functions Execution Status Change (a Kubernetes Job's execution ended) the deployment's rules delivered. The
  run is named by the work's environment (``JOBSCHED_JOB``, ``JOBSCHED_RUN_ID``, ``JOBSCHED_ATTEMPT``) or the
  execution's input, and only the work recorded on that attempt may end it (or, before its record, the work
  carrying the attempt's token on the job's own cluster or queue, running the job's definition, and found
  again as the team with the scheduler's tags): a task another team started with a copied environment or the
  (derivable) token, or an earlier attempt's, ends nothing. An array job's children end nothing; their parent does.
  The result goes through the door for ends from outside (``ends``), fenced by the attempt like every result.
- ``reconcile``: the heartbeat checker found the attempt's lease over (the target's timeout, or a state change
  that never came). Describing the work says which: work that ended is recorded as its state change would have
  been; work still running is stopped (SIGTERM, then SIGKILL after the container's stop timeout) and the
  attempt is timed out like any lost attempt (retried by policy, else TIMED_OUT and paged).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Literal

from jobsched.core.containers import (
    TaskOutcome,
    attempt_token,
    batch_outcome,
    execution_outcome,
    same_definition,
    short_name,
    stopped_result,
    task_outcome,
)
from jobsched.core.names import RunEnv
from jobsched.core.roles import role_of
from jobsched.core.run_records import Run, StaleAttempt, TargetResult
from jobsched.core.runs import RunStatus
from jobsched.core.spec import BatchTarget, ContainerTarget, EcsTarget, JobSpec, KubernetesTarget
from jobsched.core.usage import work_usage
from jobsched.pipeline.ends import AttemptRef, Ends, Reported
from jobsched.ports import ContainersPort, JobsPort, RunsPort, UsagePort
from jobsched.watch.signals import emit

log = logging.getLogger(__name__)

Recorded = Literal["recorded", "stale", "not_ours", "malformed"]


def is_batch_job(detail: dict[str, Any]) -> bool:
    return "jobId" in detail


def is_execution(detail: dict[str, Any]) -> bool:
    """A kubernetes target's execution (its Step Functions Execution Status Change)."""
    return "executionArn" in detail


def run_named_by(detail: dict[str, Any]) -> tuple[str, str, int] | None:
    """(job, run id, attempt) from the work's environment (the scheduler set it at RunTask or SubmitJob), or
    from an execution's input."""
    if is_execution(detail):
        try:
            run = json.loads(str(detail.get("input") or "{}")).get("jobsched") or {}
            return str(run["job"]), str(run["run_id"]), int(run["attempt"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
    if is_batch_job(detail):
        variables = (detail.get("container") or {}).get("environment") or []
    else:
        overrides = (detail.get("overrides") or {}).get("containerOverrides") or []
        variables = [variable for override in overrides for variable in override.get("environment") or []]
    found: dict[str, str] = {}
    for variable in variables:
        found.setdefault(str(variable.get("name")), str(variable.get("value")))
    try:
        return found[RunEnv.JOB], found[RunEnv.RUN_ID], int(found[RunEnv.ATTEMPT])
    except (KeyError, ValueError):
        return None


def attempt_work(started: str, attempt: int) -> str:
    """What the target said it started (a task's or a job's ids) as the run keeps it: with its attempt."""
    return json.dumps(json.loads(started) | {"attempt": attempt}, separators=(",", ":"))


def started_task(run: Run, *, any_attempt: bool = False) -> dict[str, str]:
    """What the run's current attempt started (``RunsPort.started_work``), or nothing (an earlier attempt's
    work is not this attempt's, unless ``any_attempt``: the last work, for its logs)."""
    try:
        started = json.loads(run.work or "{}")
    except json.JSONDecodeError:
        return {}
    if not isinstance(started, dict) or not (any_attempt or started.get("attempt") == run.attempt):
        return {}
    return {k: str(v) for k, v in started.items()}


def work_id(work: dict[str, Any]) -> str:
    """The task's ARN, the job's id or the execution's ARN."""
    return str(work.get("task_arn") or work.get("job_id") or work.get("execution_arn") or "")


def detail_id(detail: dict[str, Any]) -> str:
    """The id of the work a state change is about (as ``work_id`` names the work a run keeps)."""
    return str(detail.get("executionArn") or detail.get("jobId") or detail.get("taskArn") or "")


def work_outcome(detail: dict[str, Any]) -> TaskOutcome:
    """A state change's detail as an outcome (STOPPED once the work has ended), by the kind of work."""
    if is_execution(detail):
        return execution_outcome(detail)
    return batch_outcome(detail) if is_batch_job(detail) else task_outcome(detail)


class ContainerResults:
    def __init__(
        self,
        runs: RunsPort,
        ends: Callable[[], Ends],
        jobs: JobsPort | None = None,
        containers: Callable[[], ContainersPort | None] = lambda: None,
        usage: UsagePort | None = None,
    ) -> None:
        # ends: the door a container's end goes through (built on first use: the worker that records it)
        self.runs, self.ends, self.jobs, self.containers = runs, ends, jobs, containers
        self.usage = usage  # the task's vCPU- and GB-seconds, on its job's usage of the day it stopped

    def _attempts_work(self, run: Run, detail: dict[str, Any]) -> bool:
        recorded = work_id(started_task(run))
        if recorded:
            return recorded == detail_id(detail)
        stored = self.jobs.get(run.job) if self.jobs is not None else None
        if stored is None or not started_by_attempt(stored.spec, run, detail):
            return False
        # Before the attempt recorded its work, the token (derivable by anyone) and the event are not proof:
        # the work must be found as the team, running the job's definition and carrying the team's tags.
        containers, target = self.containers(), stored.spec.target
        if containers is None or not isinstance(target, (EcsTarget, BatchTarget)):
            return containers is None or isinstance(target, KubernetesTarget)  # its own machine's executions only
        found = containers.find(run.team, target, attempt_token(run.job, run.run_id, run.attempt))
        return found is not None and work_id(found) == detail_id(detail)

    def stopped(self, detail: dict[str, Any]) -> Recorded:
        named = run_named_by(detail)
        outcome = work_outcome(detail)
        child = is_batch_job(detail) and "index" in (detail.get("arrayProperties") or {})
        if named is None or outcome.status != "STOPPED" or child:
            return "malformed"  # not ended, not the scheduler's, or one child of an array job
        job, run_id, attempt = named
        run = self.runs.get(job, run_id)
        if run is None or run.attempt != attempt or run.status is not RunStatus.RUNNING:
            return "stale"
        if not self._attempts_work(run, detail):
            return "not_ours"
        result = stopped_result(outcome)
        try:
            reported = Reported(result.outcome == "succeeded", result.output, result.error, result.retryable)
            self.ends().complete(AttemptRef(job, run_id, attempt), reported)
        except StaleAttempt:
            return "stale"
        self._meter(run, detail)
        return "recorded"

    def _meter(self, run: Run, detail: dict[str, Any]) -> None:
        """The stopped work's own usage (a Fargate task's size and running time) on its job's item of the day."""
        measured = work_usage(detail)
        stored = self.jobs.get(run.job) if self.jobs is not None and self.usage is not None and measured else None
        if stored is None or measured is None or self.usage is None:
            return
        counters, stopped = measured
        target = str(getattr(stored.spec.target, "type", ""))
        try:
            self.usage.add_usage(run.team, run.job, stopped.date(), counters, tier=stored.spec.tier, target_type=target)
        except Exception:  # the run's end is recorded: its bill is not worth failing the event for
            log.exception("usage not recorded", extra={"job": run.job, "team": run.team, "run_id": run.run_id})
            emit("UsageUnrecorded", 1)


def started_by_attempt(spec: JobSpec, run: Run, detail: dict[str, Any]) -> bool:
    """Whether a state change may be of work the attempt started but did not get to record (a crash, a lost
    answer): it carries the attempt's token (a task's startedBy, a job's name), ran on the job's own cluster or
    queue and ran the job's own definition. The token is derivable, so ``ContainerResults`` also finds the work
    as the team before it believes it."""
    token = attempt_token(run.job, run.run_id, run.attempt)
    if isinstance(spec.target, KubernetesTarget) and is_execution(detail):
        # Only the deployment's own state machine's executions reach here (its rule matches that machine).
        return detail.get("name") == token
    if isinstance(spec.target, BatchTarget) and is_batch_job(detail):
        queue = short_name(str(detail.get("jobQueue") or ""))
        definition = same_definition(spec.target.job_definition, str(detail.get("jobDefinition") or ""))
        return detail.get("jobName") == token and queue == short_name(spec.target.job_queue) and definition
    if isinstance(spec.target, EcsTarget) and not is_batch_job(detail):
        cluster = short_name(str(detail.get("clusterArn") or ""))
        definition = same_definition(spec.target.task_definition, str(detail.get("taskDefinitionArn") or ""))
        return detail.get("startedBy") == token and cluster == short_name(spec.target.cluster) and definition
    return False


def reconcile(run: Run, target: ContainerTarget, containers: ContainersPort, *, reason: str) -> TargetResult | None:
    """At the lease's end: the work's result if it ended (a state change that never came), else None after
    stopping it with ``reason``."""
    work = started_task(run)
    if not work_id(work):  # a crash, or a lost answer, before its record: found by the attempt's token
        found = containers.find(run.team, target, attempt_token(run.job, run.run_id, run.attempt))
        if found is None:
            return None
        work = found
    outcome = containers.describe(run.team, work)
    if outcome is not None and outcome.status == "STOPPED":
        return stopped_result(outcome)
    containers.stop(run.team, work, reason)
    return None


def reporter_refusal(run: Run, containers: ContainersPort | None, caller: str | None) -> str | None:
    """Why ``caller`` may not report for a container run's current attempt (None: it may). The attempt's token
    sits in the task's environment, where whoever may describe the task can read it: a report must also come
    signed by the role the task's containers run as (ECS: the task definition's task role; Batch: the job
    definition's job role), which only the team's own tasks can assume. Kubernetes pods' roles (IRSA) cannot
    be read back: there the token alone decides."""
    work = started_task(run)
    if containers is None or "execution_arn" in work:
        return None
    if not work_id(work):
        return "the attempt's work is not recorded yet: report again in a moment"
    role = containers.task_role(run.team, work)
    if role is None:
        return "the task runs without a task role: give its definition one, and sign the report with it"
    if caller is None or role_of(caller) is None or role_of(caller) != role_of(role):
        return f"a report for this attempt must be signed by its task's role ({role}), not by {caller or 'nobody'}"
    return None


def stop_started_task(containers: ContainersPort | None, run: Run, reason: str) -> None:
    """A container run that ended by request (cancel, overlap: replace, a pause): its work is stopped."""
    work = started_task(run)
    if containers is not None and work_id(work):
        containers.stop(run.team, work, reason)
