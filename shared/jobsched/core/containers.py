"""What a stopped container task means for its run: the exit codes, ECS's stop code and the containers' reasons
made into a result, with the failures that another attempt cannot mend (an image that cannot be pulled, a
container killed for memory) not retried. Pure: the adapter reads tasks, the pipeline records results."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from jobsched.core.events import CONTAINER_STARTED_BY
from jobsched.core.run_records import TargetResult

NOT_RETRIED = (  # (marker in a reason, what it is): another attempt fails the same way
    ("OutOfMemoryError", "out of memory: the container was killed (raise container.memory)"),
    ("CannotPullContainerError", "the image could not be pulled"),
    ("CannotStartContainerError", "the container could not start"),
)


def attempt_token(job: str, run_id: str, attempt: int, task: str | None = None) -> str:
    """The attempt's RunTask ``clientToken`` and ``startedBy`` (at most 64 of [a-z0-9-]): one task per attempt,
    found again by it after a lost response, and matched by the deployment's state-change rule."""
    named = f"{job}/{run_id}/{task or ''}#{attempt}"
    return CONTAINER_STARTED_BY + hashlib.sha256(named.encode()).hexdigest()[:40]


def short_name(name: str) -> str:
    """``data-batch`` of ``data-batch`` or ``arn:aws:ecs:us-east-1:123456789012:cluster/data-batch`` (a job
    queue's ARN, ``...:job-queue/NAME``, the same way)."""
    return name.rsplit("/", 1)[-1] if name.startswith("arn:") else name


def same_definition(named: str, arn: str) -> bool:
    """Whether the definition a task or a job ran (``arn``: ``...:task-definition/FAMILY:REV`` or
    ``...:job-definition/NAME:REV``) is the one a job names: an ARN, ``FAMILY:REV``, or ``FAMILY`` (any revision)."""
    if not arn:
        return False
    if named.startswith("arn:"):
        return named == arn
    ran = arn.rsplit("/", 1)[-1]
    return ran == named if ":" in named else ran.split(":", 1)[0] == named


@dataclass(frozen=True)
class TaskOutcome:
    """A task as DescribeTasks, or its Task State Change, tells it."""

    status: str  # PROVISIONING, PENDING, RUNNING, ..., STOPPED
    exit_codes: dict[str, int | None]
    stopped_reason: str = ""
    stop_code: str = ""  # EssentialContainerExited, TaskFailedToStart, UserInitiated, SpotInterruption, ...
    container_reasons: tuple[str, ...] = ()
    failed: bool = False  # the service itself says the work failed (a Batch job FAILED), whatever the exit codes


BATCH_DONE = ("SUCCEEDED", "FAILED")
EXECUTION_DONE = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def execution_outcome(execution: dict[str, Any]) -> TaskOutcome:
    """DescribeExecution's answer, or a Step Functions Execution Status Change's detail, of a kubernetes target's
    execution (its one state runs the Job and waits for it): SUCCEEDED when the Job completed; otherwise the
    Job failed (its error and cause name why: BackoffLimitExceeded, DeadlineExceeded...), timed out or was
    stopped."""
    status = str(execution.get("status") or "")
    if status not in EXECUTION_DONE:
        return TaskOutcome(status=status, exit_codes={})
    said = ": ".join(str(part) for part in (execution.get("error"), execution.get("cause")) if part)
    return TaskOutcome(
        status="STOPPED",
        exit_codes={"job": 0 if status == "SUCCEEDED" else None},
        stopped_reason=said or ("" if status == "SUCCEEDED" else f"the execution ended {status}"),
        failed=status != "SUCCEEDED",
    )


def batch_outcome(job: dict[str, Any]) -> TaskOutcome:
    """DescribeJobs' job, or a Batch Job State Change's detail (the same shape), as a task outcome: a job that
    ended is STOPPED; an array job's own status is its children's verdict (SUCCEEDED only if all did)."""
    status = str(job.get("status") or "")
    container = job.get("container") or {}
    array = (job.get("arrayProperties") or {}).get("size")
    name = "array" if array else "job"
    code = container.get("exitCode")
    if status == "SUCCEEDED" and code is None:
        code = 0  # an array job's parent has no container of its own
    summary = (job.get("arrayProperties") or {}).get("statusSummary") or {}
    reason = str(job.get("statusReason") or "")
    if array and summary:
        reason = f"{reason} ({', '.join(f'{n} {s.lower()}' for s, n in sorted(summary.items()) if n)} of {array})"
    return TaskOutcome(
        status="STOPPED" if status in BATCH_DONE else status,
        exit_codes={name: code},
        stopped_reason=reason.strip(),
        stop_code="",
        container_reasons=tuple(str(r) for r in (container.get("reason"),) if r),
        failed=status == "FAILED",
    )


def task_outcome(task: dict[str, Any]) -> TaskOutcome:
    """DescribeTasks' task, or a Task State Change's detail (the same shape)."""
    containers = task.get("containers") or []
    return TaskOutcome(
        status=str(task.get("lastStatus") or ""),
        exit_codes={str(c.get("name")): c.get("exitCode") for c in containers},
        stopped_reason=str(task.get("stoppedReason") or ""),
        stop_code=str(task.get("stopCode") or ""),
        container_reasons=tuple(str(c["reason"]) for c in containers if c.get("reason")),
    )


def stopped_result(outcome: TaskOutcome) -> TargetResult:
    """SUCCEEDED when every container that exited exited 0 and none failed to start; else FAILED, named."""
    codes = {name: code for name, code in outcome.exit_codes.items() if code is not None}
    reasons = " ".join((*outcome.container_reasons, outcome.stopped_reason))
    for marker, meaning in NOT_RETRIED:
        if marker in reasons:
            return TargetResult("failed", error=f"{meaning}: {reasons.strip()}"[:1000], retryable=False)
    failed = {name: code for name, code in codes.items() if code != 0}
    if codes and not failed and outcome.stop_code != "TaskFailedToStart" and not outcome.failed:
        return TargetResult("succeeded", output=json_codes(codes))
    detail = ", ".join(f"{name} exited {code}" for name, code in sorted(failed.items()))
    detail = detail or ("the job failed" if outcome.failed else "no container exited")
    said = ": ".join(part for part in (outcome.stop_code, outcome.stopped_reason) if part)
    stopped = f" ({said})" if said else ""
    return TargetResult("failed", error=f"{detail}{stopped}"[:1000])


def json_codes(codes: dict[str, int]) -> str:
    return "exit codes: " + ", ".join(f"{name}={code}" for name, code in sorted(codes.items()))
