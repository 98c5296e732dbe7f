"""Runs: identity, lifecycle, the message that carries a run to a worker, and retry delays. Pure.

A run's identity is (job, run_id). For scheduled runs the id is the scheduled instant itself, so every
dispatcher, redelivery and backfill of the same instant names the same run and the conditional create
lets only one of them exist. Manual triggers get their own id (from their idempotency key when given).
"""

from __future__ import annotations

import hashlib
import math
import uuid
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from jobsched.core.spec import Backoff, RetryPolicy
from jobsched.core.tz import UTC

MAX_SQS_DELAY = timedelta(seconds=900)
# An attempt's lease outlasts its timeout by this much: time to record the result before anyone may take over.
LEASE_MARGIN = timedelta(seconds=60)
MAX_TEXT = 500  # errors and reasons: run items stay under 1 KB in the common case
# A run's output keeps its first 4,000 characters (a finished item then costs at most 5 write units);
# `jobsched logs` has the rest of what the run said.
MAX_OUTPUT = 4_000


class TaskStatus(StrEnum):
    PENDING = "PENDING"  # nothing heard from the state machine yet
    WAITING = "WAITING"  # its state started; the token is parked until its dependencies finish
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"  # an attempt failed; the state machine retries after its backoff
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"


class RunStatus(StrEnum):
    SCHEDULED = "SCHEDULED"  # created ahead of execution (manual triggers, backfills)
    WAITING = "WAITING"  # waiting for its wait_for conditions (data, an upstream run), holding nothing
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"  # between attempts
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"
    MISSED = "MISSED"  # the instant should have run and did not (outage beyond the catch-up policy)


TERMINAL = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.TIMED_OUT,
        RunStatus.CANCELLED,
        RunStatus.SKIPPED,
        RunStatus.MISSED,
    }
)

Trigger = Literal["schedule", "manual", "backfill", "event"]


def job_key(team: str, name: str) -> str:
    return f"{team}/{name}"


def instant_text(instant: datetime) -> str:
    """UTC ISO-8601 with Z, second precision: how instants are stored and sent."""
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def moment_text(moment: datetime) -> str:
    """UTC ISO-8601 with Z, to the millisecond: when something happened (a run's start and finish). Instants
    that conditions compare or keys sort by stay in ``instant_text``'s fixed second format."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


SCHEDULE_RUN_MARK = "-s-"  # a distinct schedule's run: "{instant}-s-{schedule name}"
LAST_OF_INSTANT = "~"  # sorts after every run id that begins with an instant's (a range's inclusive upper bound)


def scheduled_run_id(instant: datetime) -> str:
    """The run id of a scheduled instant: sortable by time, identical however often it is derived."""
    return instant.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def manual_run_id(now: datetime, idempotency_key: str | None) -> str:
    """A manual trigger's id: time-sortable; the same idempotency key always gives the same suffix."""
    suffix = hashlib.sha256(idempotency_key.encode()).hexdigest()[:12] if idempotency_key else uuid.uuid4().hex[:12]
    return f"{scheduled_run_id(now)}-m-{suffix}"


class RunMessage(BaseModel):
    """What the dispatcher (or a retry, trigger or backfill) puts on a work queue for the worker."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str  # team/name
    team: str
    run_id: str
    scheduled_at: str  # UTC ISO-8601 Z: the instant the run is for
    fire_at: str  # when it should start (scheduled_at + jitter)
    attempt: int = Field(ge=1, default=1)
    spec_version: int = Field(ge=1)
    trigger: Trigger = "schedule"
    correlation_id: str = ""
    payload_override: JsonValue = None
    waiting_since: str | None = None  # set once the run's waiting record exists (re-sent waits skip the write)
    woken: bool = False  # sent by an event that may meet its wait_for: checked once, never re-sent
    slot_waits: int = Field(default=0, ge=0)  # how often it found its job's or team's max_running full
    slot_woken: bool | None = None  # sent by a run of its team that ended, not by its own wait (Records.wake_next)
    trigger_detail: dict[str, JsonValue] | None = None  # event runs: the event that started it (kind, id, source...)

    @classmethod
    def scheduled(
        cls,
        *,
        job: str,
        team: str,
        at: datetime,
        fire_at: datetime,
        spec_version: int,
        trigger: Trigger = "schedule",
        correlation_id: str | None = None,
        run_id: str | None = None,
        schedule: str | None = None,
        payload: JsonValue = None,
    ) -> RunMessage:
        """The message for the run of a scheduled instant (its id is the instant, however it is reached; a job with
        several schedules: ``run_id`` from the occurrence, ``schedule`` its name, ``payload`` the schedule's)."""
        run_id = run_id or scheduled_run_id(at)
        return cls(
            job=job,
            team=team,
            run_id=run_id,
            scheduled_at=instant_text(at),
            fire_at=instant_text(fire_at),
            spec_version=spec_version,
            trigger=trigger,
            correlation_id=correlation_id or f"{job}/{run_id}",
            payload_override=payload,
            trigger_detail={"kind": "schedule", "schedule": schedule} if schedule else None,
        )

    def for_attempt(self, attempt: int) -> RunMessage:
        return self.model_copy(update={"attempt": attempt})


def retry_delay(policy: Backoff, attempt: int, *, seed: str) -> timedelta:
    """The wait after failed attempt ``attempt`` (1-based), exponential with the policy's jitter.

    ``seed`` (run id + attempt) makes the jittered value reproducible, so a redelivered failure
    schedules the same retry time instead of a new random one.
    """
    base = policy.initial.total_seconds() * policy.multiplier ** (attempt - 1)
    ceiling = min(policy.max.total_seconds(), base)
    fraction = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big") / 2**64
    if policy.jitter == "full":
        seconds = ceiling * fraction
    elif policy.jitter == "equal":
        seconds = ceiling / 2 + ceiling / 2 * fraction
    else:
        seconds = ceiling
    return timedelta(seconds=max(1, math.ceil(seconds)))


def attempts_left(policy: RetryPolicy, attempt: int) -> bool:
    return attempt < policy.max_attempts


def truncate(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if text is None or len(text) <= limit:
        return text
    keep = limit
    for _ in range(3):  # the count's digits set the suffix's length, which sets the count: settles at once
        suffix = f"... (+{len(text) - keep} chars)"
        keep = limit - len(suffix)
    return text[:keep] + f"... (+{len(text) - keep} chars)"
