"""The records the scheduler's domain reads and writes, whatever stores them: jobs as stored, due entries,
runs and DAG tasks, slot answers, target calls and results, and the conflicts a store reports.

The stores (``jobsched.ports``) return these; the AWS and in-memory adapters both build them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from jobsched.dag import TaskStatus
from jobsched.names import JobsKeys, RunsKeys
from jobsched.runs import RunMessage, RunStatus, instant_text, parse_instant
from jobsched.spec import JobSpec

JobState = Literal["ACTIVE", "PAUSED"]
TargetOutcome = Literal["succeeded", "failed", "pending"]
TASK_PREFIX = "TASK#"
# The reason of a MISSED record written by the lost-message audit: the only MISSED a late message may start.
LOST_PREFIX = "lost: "


class JobNotFound(LookupError):
    pass


class VersionConflict(RuntimeError):
    """The job changed since the caller read it (optimistic concurrency)."""


class JobExists(RuntimeError):
    pass


@dataclass(frozen=True)
class StoredJob:
    spec: JobSpec
    version: int
    state: JobState
    created_at: datetime
    updated_at: datetime
    updated_by: str
    paused_reason: str | None = None
    paused_by: str | None = None
    paused_at: datetime | None = None

    @property
    def key(self) -> str:
        return self.spec.key


@dataclass(frozen=True)
class StoredIncident:
    """An incident as stored: its fields (JSON), a version, pages not yet sent, and whether it is resolved
    (kept only until its resolve notices are out)."""

    values: dict[str, Any]
    version: int = 0
    unsent: str | None = None  # JSON list of pages
    resolved: bool = False

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> StoredIncident:
        return cls(
            json.loads(values["incident"]), int(values["version"]), values.get("unsent"), bool(values.get("resolved"))
        )


@dataclass(frozen=True)
class DueEntry:
    job: str
    next_fire_at: datetime
    cursor: datetime
    spec_version: int
    sk: str = JobsKeys.STATE  # STATE for a job's schedule, BACKFILL#id for an active backfill

    @property
    def backfill_id(self) -> str | None:
        return self.sk.removeprefix(JobsKeys.BACKFILL_PREFIX) if self.sk.startswith(JobsKeys.BACKFILL_PREFIX) else None


@dataclass(frozen=True)
class SlotResult:
    acquired: bool
    holders: dict[str, str]  # holder -> lease expiry (ISO) as stored, when not acquired


class StaleAttempt(RuntimeError):
    """The run is no longer in the state this writer expected (another attempt or outcome won)."""


@dataclass(frozen=True)
class Run:
    job: str
    run_id: str
    team: str
    status: RunStatus
    attempt: int
    scheduled_at: datetime
    fire_at: datetime
    trigger: str
    spec_version: int
    correlation_id: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lease_until: datetime | None = None
    next_attempt_at: datetime | None = None
    error: str | None = None
    output: str | None = None
    reason: str | None = None
    lateness_ms: int | None = None  # first attempt's start minus its fire time, to the millisecond
    deadline_at: datetime | None = None  # SLA deadline, while not yet reported missed or finished
    execution_arn: str | None = None  # DAG runs: the Step Functions execution (named by the run id)
    graph: dict[str, Any] | None = None  # DAG runs: the task graph the run started with

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Run:
        def instant(name: str) -> datetime | None:
            return parse_instant(values[name]) if values.get(name) else None

        return cls(
            job=values[RunsKeys.PK],
            run_id=values[RunsKeys.SK],
            team=values["team"],
            status=RunStatus(values["status"]),
            attempt=int(values["attempt"]),
            scheduled_at=parse_instant(values["scheduled_at"]),
            fire_at=parse_instant(values["fire_at"]),
            trigger=values["trigger"],
            spec_version=int(values["spec_version"]),
            correlation_id=values.get("correlation_id", ""),
            started_at=instant("started_at"),
            finished_at=instant("finished_at"),
            lease_until=instant("lease_until"),
            next_attempt_at=instant("next_attempt_at"),
            error=values.get("error"),
            output=values.get("output"),
            reason=values.get("reason"),
            lateness_ms=int(values["lateness_ms"]) if "lateness_ms" in values else None,
            deadline_at=instant(RunsKeys.DEADLINE_AT),
            execution_arn=values.get("execution_arn"),
            graph=values.get("graph"),
        )

    def to_message(self, *, attempt: int | None = None, fire_at: datetime | None = None) -> RunMessage:
        """The run message for this run (by default its current attempt, due at its own fire time)."""
        return RunMessage(
            job=self.job,
            team=self.team,
            run_id=self.run_id,
            scheduled_at=instant_text(self.scheduled_at),
            fire_at=instant_text(fire_at or self.fire_at),
            attempt=attempt or self.attempt,
            spec_version=self.spec_version,
            trigger=self.trigger,
            correlation_id=self.correlation_id,
        )


@dataclass(frozen=True)
class TaskState:
    """One task of a DAG run: its own item, in the run's task partition."""

    name: str
    status: TaskStatus
    attempt: int
    token: str | None = None  # the Step Functions token of the current attempt
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lease_until: datetime | None = None
    error: str | None = None
    output: str | None = None

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> TaskState:
        def instant(name: str) -> datetime | None:
            return parse_instant(values[name]) if values.get(name) else None

        return cls(
            name=values[RunsKeys.SK].removeprefix(TASK_PREFIX),
            status=TaskStatus(values["status"]),
            attempt=int(values["attempt"]),
            token=values.get("token"),
            started_at=instant("started_at"),
            finished_at=instant("finished_at"),
            lease_until=instant("lease_until"),
            error=values.get("error"),
            output=values.get("output"),
        )


@dataclass(frozen=True)
class ParkedTask:
    """A DAG task waiting for its dependencies whose state expects a heartbeat."""

    job: str
    run_id: str
    task: TaskState


@dataclass(frozen=True)
class RunContext:
    job: str
    team: str
    run_id: str
    attempt: int
    scheduled_at: str
    correlation_id: str
    payload_override: Any = None
    task: str | None = None  # DAG runs: the task this attempt is of

    @property
    def idempotency_key(self) -> str:
        """A run's id; for a DAG task, run id + task + attempt (each attempt is its own execution)."""
        return f"{self.run_id}-{self.task}-{self.attempt}" if self.task else self.run_id

    def envelope(self) -> dict[str, Any]:
        envelope = {
            "job": self.job,
            "team": self.team,
            "run_id": self.run_id,
            "attempt": self.attempt,
            "scheduled_at": self.scheduled_at,
            "correlation_id": self.correlation_id,
            "idempotency_key": self.idempotency_key,
        }
        if self.task:
            envelope["task"] = self.task
        return envelope


@dataclass(frozen=True)
class TargetResult:
    outcome: TargetOutcome
    output: str | None = None
    error: str | None = None
    retryable: bool = True
