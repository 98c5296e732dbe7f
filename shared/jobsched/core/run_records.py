"""The records of runs and DAG tasks, whatever stores them: a run as stored, an attempt's claim, a task's state,
what a target is called with and what it answered, what an attempt reports on its way.

The stores (``jobsched.ports``) return these; the AWS and in-memory adapters both build them. The jobs' side
(stored jobs, due entries, slots, incidents, audits) is ``core.records``.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from jobsched.core.names import LEASE_SHARDS, RunsKeys
from jobsched.core.runs import (
    RunMessage,
    RunStatus,
    TaskStatus,
    instant_text,
    parse_instant,
    truncate,
)
from jobsched.core.traces import TraceContext, attempt_trace

if TYPE_CHECKING:
    from jobsched.core.checks import CheckResult

TargetOutcome = Literal["succeeded", "failed", "pending"]


TASK_PREFIX = "TASK#"


@dataclass(frozen=True)
class TaskOutput:
    """What a task returned (JSON text, at most core.references.MAX_TASK_OUTPUT bytes), for its downstream."""

    attempt: int
    text: str


# The reason of a MISSED record written by the lost-message audit: the only MISSED a late message may start.
LOST_PREFIX = "lost: "


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
    # Attempts before the latest rerun: the retry policy counts attempts from here (a rerun gets its retries).
    attempt_base: int = 0
    trigger_detail: dict[str, Any] | None = None  # event runs: the event that started it (kind, id, source...)
    payload: Any = None  # what a manual trigger or an event passed to the target, instead of the job's payload
    waiting_for: list[str] | None = None  # a WAITING run: the conditions not yet met, as users read them
    wait_started_at: datetime | None = None  # when it began waiting for its wait_for conditions
    downstream_attempt: int | None = None  # a rerun with --downstream: this attempt's finish reruns downstreams
    progress: Progress | None = None  # what a long attempt last reported (percent, message, its checkpoint)
    work: str | None = None  # what the last attempt started outside (a container's task: JSON), kept after it ends
    checks: list[dict[str, Any]] | None = None  # the last outcome's check results (name, severity, passed, message)
    rerun_tasks: list[str] | None = None  # a DAG run's re-execution: the tasks its new execution runs again
    anomaly: str | None = None  # far outside the job's learned baseline ("took 41 min, usual 6-9 min")

    @property
    def policy_attempt(self) -> int:
        """The attempt as the retry policy counts it: the first after a rerun is 1 again."""
        return self.attempt - self.attempt_base

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
            attempt_base=int(values.get("attempt_base", 0)),
            trigger_detail=values.get("trigger_detail"),
            payload=json.loads(values["payload"]) if values.get("payload") else None,
            waiting_for=list(values["waiting_for"]) if values.get("waiting_for") else None,
            wait_started_at=instant("wait_started_at"),
            downstream_attempt=int(values["downstream_attempt"]) if values.get("downstream_attempt") else None,
            progress=Progress.from_values(values),
            work=values.get("work"),
            checks=_checks(values),
            rerun_tasks=list(values["rerun_tasks"]) if values.get("rerun_tasks") is not None else None,
            anomaly=values.get("anomaly"),
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
            payload_override=self.payload,
            trigger_detail=self.trigger_detail,
        )


MAX_CHECKPOINT_BYTES = 2048  # a checkpoint's JSON: it rides on the run's item and in the next task's environment


MAX_PROGRESS_MESSAGE = 200


@dataclass(frozen=True)
class ProgressReport:
    """What an attempt says with a heartbeat (checked by the API: percent 0-100, a short message, a checkpoint
    of at most ``MAX_CHECKPOINT_BYTES`` as JSON text)."""

    percent: float | None = None
    message: str | None = None
    checkpoint: str | None = None

    def at(self, now: datetime, attempt: int) -> Progress:
        return Progress(now, attempt, self.percent, self.message, self.checkpoint)


@dataclass(frozen=True)
class Progress:
    """What a long attempt reported with its heartbeat: how far it is, and the checkpoint the run's next
    attempt resumes from (kept on the run across attempts; JSON text, at most ``MAX_CHECKPOINT_BYTES``)."""

    at: datetime
    attempt: int
    percent: float | None = None
    message: str | None = None
    checkpoint: str | None = None

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Progress | None:
        if not values.get("progress_at"):
            return None
        percent = values.get("progress_percent")
        return cls(
            at=parse_instant(values["progress_at"]),
            attempt=int(values.get("progress_attempt", 0)),
            percent=float(percent) if percent is not None else None,
            message=values.get("progress_message"),
            checkpoint=values.get("checkpoint"),
        )

    def values(self) -> dict[str, Any]:
        """The run item's attributes (the checkpoint only when one is given: a heartbeat without one keeps
        the last)."""
        found: dict[str, Any] = {"progress_at": instant_text(self.at), "progress_attempt": self.attempt}
        if self.percent is not None:  # a Decimal: what DynamoDB's numbers are made of (a float is refused)
            found["progress_percent"] = Decimal(str(round(self.percent, 1)))
        if self.message is not None:
            found["progress_message"] = truncate(self.message, MAX_PROGRESS_MESSAGE)
        if self.checkpoint is not None:
            found["checkpoint"] = self.checkpoint
        return found


@dataclass(frozen=True)
class AttemptClaim:
    """A claim on one attempt of a run: the store moves the run from ``expected_status`` at ``expected_attempt``
    to RUNNING ``attempt`` only if it still is there (one claimer wins; the attempt is the fencing token).

    - ``require_expired_lease``: taking over a RUNNING attempt whose worker died (its lease ran out);
    - ``external``: a callback run, whose lease is extended by heartbeats from outside;
    - ``lateness_ms``: a first attempt's start minus its fire time (runs created SCHEDULED, or MISSED by the
      lost-message audit, record it when they start)."""

    attempt: int
    expected_status: RunStatus
    expected_attempt: int
    now: datetime
    lease_until: datetime
    external: bool = False
    require_expired_lease: bool = False
    lateness_ms: int | None = None


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
    parked_at: datetime | None = None  # when it was first held (for its dependencies, or its data)
    checks: list[dict[str, Any]] | None = None  # its output's check results

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
            parked_at=instant("parked_at"),
            checks=_checks(values),
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
    trigger: str = "schedule"  # what started the run: schedule, manual, backfill or event
    checkpoint: str | None = None  # the last checkpoint an earlier attempt of this run reported (JSON text)
    critical: bool = False  # its job's tier is critical: its trace is always sampled

    @property
    def trace(self) -> TraceContext:
        """The attempt's W3C trace context (``core.traces``): the run's trace, this attempt's span."""
        return attempt_trace(
            self.job, self.run_id, self.scheduled_at, self.attempt, task=self.task, critical=self.critical
        )

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
            "trigger": self.trigger,
            "traceparent": self.trace.traceparent,
            "tracestate": self.trace.tracestate,
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
    body: str | None = None  # what the target returned, whole, when output adds to it (HTTP: the status)
    checks: tuple[CheckResult, ...] = ()  # the job's or task's checks on it (core.checks.judge)
    # The failure says the target itself is unwell (a timeout, a throttle, a 5xx, a refused connection), not
    # that this job's work failed: only these count toward the target's circuit breaker.
    unhealthy: bool = False
    usage: dict[str, float] | None = None  # what the target reported it used (core.usage counters), for chargeback


def _checks(values: dict[str, Any]) -> list[dict[str, Any]] | None:
    return [dict(check) for check in values["checks"]] if values.get("checks") else None


def lease_shard(job: str, run_id: str) -> int:
    return zlib.crc32(f"{job}/{run_id}".encode()) % LEASE_SHARDS
