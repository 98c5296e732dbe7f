"""What a stopped container task means for its run: the exit codes, ECS's stop code and the containers' reasons
made into a result, with the failures that another attempt cannot mend (an image that cannot be pulled, a
container killed for memory) not retried. Pure: the adapter reads tasks, the pipeline records results."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from jobsched.core.events import CONTAINER_STARTED_BY
from jobsched.core.records import TargetResult

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


def cluster_name(cluster: str) -> str:
    """``data-batch`` of ``data-batch`` or ``arn:aws:ecs:us-east-1:123456789012:cluster/data-batch``."""
    return cluster.rsplit("/", 1)[-1] if cluster.startswith("arn:") else cluster


@dataclass(frozen=True)
class TaskOutcome:
    """A task as DescribeTasks, or its Task State Change, tells it."""

    status: str  # PROVISIONING, PENDING, RUNNING, ..., STOPPED
    exit_codes: dict[str, int | None]
    stopped_reason: str = ""
    stop_code: str = ""  # EssentialContainerExited, TaskFailedToStart, UserInitiated, SpotInterruption, ...
    container_reasons: tuple[str, ...] = ()


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
    if codes and not failed and outcome.stop_code != "TaskFailedToStart":
        return TargetResult("succeeded", output=json_codes(codes))
    detail = ", ".join(f"{name} exited {code}" for name, code in sorted(failed.items())) or "no container exited"
    stopped = f" ({outcome.stop_code}: {outcome.stopped_reason})" if outcome.stop_code or outcome.stopped_reason else ""
    return TargetResult("failed", error=f"{detail}{stopped}"[:1000])


def json_codes(codes: dict[str, int]) -> str:
    return "exit codes: " + ", ".join(f"{name}={code}" for name, code in sorted(codes.items()))
