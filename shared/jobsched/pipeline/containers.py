"""Container runs (ECS tasks) end by their task's state change, never by a worker waiting for them.

- ``stopped``: a Task State Change (STOPPED) the deployment's rule delivered. The run is named by the task's
  environment (``JOBSCHED_JOB``, ``JOBSCHED_RUN_ID``, ``JOBSCHED_ATTEMPT``), and only the task recorded on that
  attempt may end it: a task another team started with a copied environment, or an earlier attempt's task, ends
  nothing. The result goes through the worker's ``complete_external``, fenced by the attempt like every result.
- ``lease_over``: the heartbeat checker found the attempt's lease over (the target's timeout, or a state change
  that never came). DescribeTasks says which: a task that stopped is recorded as its state change would have been;
  one still running is stopped (SIGTERM, then SIGKILL after the container's stop timeout) and the attempt is
  timed out like any lost attempt (retried by policy, else TIMED_OUT and paged).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from jobsched.core.containers import attempt_token, cluster_name, stopped_result, task_outcome
from jobsched.core.names import RunEnv
from jobsched.core.records import Run, StaleAttempt, TargetResult
from jobsched.core.runs import RunStatus
from jobsched.core.spec import EcsTarget, JobSpec
from jobsched.ports import ContainersPort, JobsPort, RunsPort

Recorded = Literal["recorded", "stale", "not_ours", "malformed"]


def run_named_by(detail: dict[str, Any]) -> tuple[str, str, int] | None:
    """(job, run id, attempt) from the task's container overrides (the scheduler set them at RunTask)."""
    found: dict[str, str] = {}
    for override in (detail.get("overrides") or {}).get("containerOverrides") or []:
        for variable in override.get("environment") or []:
            found.setdefault(str(variable.get("name")), str(variable.get("value")))
    try:
        return found[RunEnv.JOB], found[RunEnv.RUN_ID], int(found[RunEnv.ATTEMPT])
    except (KeyError, ValueError):
        return None


def attempt_work(started: str, attempt: int) -> str:
    """What the target said it started (``{"cluster", "task_arn"}``) as the run keeps it: with its attempt."""
    return json.dumps(json.loads(started) | {"attempt": attempt}, separators=(",", ":"))


def started_task(run: Run, *, any_attempt: bool = False) -> dict[str, str]:
    """The cluster and task ARN the run's current attempt started (``RunsPort.started_work``), or nothing
    (an earlier attempt's task is not this attempt's, unless ``any_attempt``: the last task, for its logs)."""
    try:
        started = json.loads(run.work or "{}")
    except json.JSONDecodeError:
        return {}
    if not isinstance(started, dict) or not (any_attempt or started.get("attempt") == run.attempt):
        return {}
    return {k: str(v) for k, v in started.items()}


class ContainerResults:
    def __init__(self, runs: RunsPort, complete: Any, jobs: JobsPort | None = None) -> None:
        # complete(job, run_id, attempt, succeeded=, output=, error=, retryable=): Worker.complete_external
        self.runs, self.complete, self.jobs = runs, complete, jobs

    def _attempts_task(self, run: Run, detail: dict[str, Any]) -> bool:
        recorded = started_task(run).get("task_arn")
        if recorded:
            return bool(recorded == detail.get("taskArn"))
        stored = self.jobs.get(run.job) if self.jobs is not None else None
        return stored is not None and started_by_attempt(stored.spec, run, detail)

    def stopped(self, detail: dict[str, Any]) -> Recorded:
        named = run_named_by(detail)
        if named is None or detail.get("lastStatus") != "STOPPED":
            return "malformed"
        job, run_id, attempt = named
        run = self.runs.get(job, run_id)
        if run is None or run.attempt != attempt or run.status is not RunStatus.RUNNING:
            return "stale"
        if not self._attempts_task(run, detail):
            return "not_ours"
        result = stopped_result(task_outcome(detail))
        try:
            self.complete(
                job,
                run_id,
                attempt,
                succeeded=result.outcome == "succeeded",
                output=result.output,
                error=result.error,
                retryable=result.retryable,
            )
        except StaleAttempt:
            return "stale"
        return "recorded"


def started_by_attempt(spec: JobSpec, run: Run, detail: dict[str, Any]) -> bool:
    """A task the attempt started but did not get to record (a crash between RunTask and the record): its
    startedBy is the attempt's token and it ran on the job's own cluster (another team cannot run tasks there)."""
    if not isinstance(spec.target, EcsTarget):
        return False
    token = attempt_token(run.job, run.run_id, run.attempt)
    cluster = cluster_name(str(detail.get("clusterArn") or ""))
    return detail.get("startedBy") == token and cluster == cluster_name(spec.target.cluster)


def reconcile(run: Run, target: EcsTarget, containers: ContainersPort, *, reason: str) -> TargetResult | None:
    """At the lease's end: the task's result if it stopped (a state change that never came), else None after
    stopping it with ``reason``."""
    started = started_task(run)
    if not started.get("task_arn"):  # a crash between RunTask and its record: found by the attempt's token
        found = containers.find(run.team, target.cluster, attempt_token(run.job, run.run_id, run.attempt))
        if found is None:
            return None
        started = {"cluster": target.cluster, "task_arn": found}
    outcome = containers.describe(run.team, started["cluster"], started["task_arn"])
    if outcome is not None and outcome.status == "STOPPED":
        return stopped_result(outcome)
    containers.stop(run.team, started["cluster"], started["task_arn"], reason)
    return None


def stop_started_task(containers: ContainersPort | None, run: Run, reason: str) -> None:
    """A container run that ended by request (cancel, overlap: replace): its task is stopped, not left running."""
    started = started_task(run)
    if containers is not None and started.get("task_arn"):
        containers.stop(run.team, started["cluster"], started["task_arn"], reason)
