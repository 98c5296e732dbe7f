"""The worker's decisions as pure functions (pipeline/decisions.py): no store, no clock, no moto."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.adapters.items import new_run_values
from jobsched.core.records import StoredJob
from jobsched.core.run_records import LOST_PREFIX, Run, TargetResult
from jobsched.core.runs import LEASE_MARGIN, RunMessage, RunStatus, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.pipeline.decisions import (
    already_settled,
    before_claim,
    claim_transition,
    lease_until,
    on_existing,
    on_result,
    overlap_policy,
    ran_twice,
)

T0 = parse_instant("2027-01-04T09:00:00Z")
LAMBDA = {"type": "lambda", "function": "echo", "timeout": "5m"}


def spec(**fields: Any) -> JobSpec:
    body = {"name": "job", "team": "data", "schedule": {"expression": "0 9 * * *"}, "target": LAMBDA}
    return JobSpec.model_validate(body | fields)


def message(attempt: int = 1, **fields: Any) -> RunMessage:
    first = RunMessage.scheduled(job="data/job", team="data", at=T0, fire_at=T0, spec_version=1)
    return first.for_attempt(attempt).model_copy(update=fields)


def run(status: RunStatus, attempt: int = 1, *, lease: timedelta | None = None, reason: str | None = None) -> Run:
    values = new_run_values(
        message(attempt),
        status=status,
        now=T0,
        retention=timedelta(days=7),
        lease_until=T0 + lease if lease is not None else None,
        external=False,
        reason=reason,
        deadline=None,
    )
    return Run.from_values(values)


def stored(job: JobSpec, *, version: int = 1, paused: bool = False, updated: str = "2027-01-04T08:00:00Z") -> StoredJob:
    at = parse_instant(updated)
    current = StoredJob(job, version, "ACTIVE", at, at, "alice")
    return current.in_state("PAUSED", now=at, principal="bob", reason="maintenance") if paused else current


def test_a_paused_or_replaced_job_settles_a_delivery_before_any_run_is_touched() -> None:
    job = spec()
    assert before_claim(message(), stored(job)) is None
    paused = before_claim(message(), stored(job, paused=True))
    assert paused is not None and paused.action == "skip" and "maintenance" in paused.detail
    # Replaced after the instant was sent but before it fired: dispatch sends it again under the new version.
    assert getattr(before_claim(message(), stored(job, version=2, updated="2027-01-04T08:59:00Z")), "action", None) == (
        "superseded"
    )
    # Replaced after the instant: recorded SKIPPED, not sent again. A retry goes on under the new spec.
    late = before_claim(message(), stored(job, version=2, updated="2027-01-04T09:00:30Z"))
    assert late is not None and late.action == "skip"
    assert before_claim(message(2), stored(job, version=2, updated="2027-01-04T09:00:30Z")) is None
    # A manual trigger of a paused job runs (the pause holds the schedule, not the person).
    assert before_claim(message(trigger="manual"), stored(job, paused=True)) is None


@pytest.mark.parametrize(
    ("existing", "attempt", "expected"),
    [
        (run(RunStatus.SCHEDULED), 1, "first"),  # it waited for a slot
        (run(RunStatus.MISSED, reason=LOST_PREFIX + "no record"), 1, "first"),  # the audit called it lost
        (run(RunStatus.MISSED, reason="outage"), 1, None),  # missed in an outage: never started late
        (run(RunStatus.RETRYING, 1), 2, "retry"),
        (run(RunStatus.RETRYING, 1), 3, None),
        (run(RunStatus.RUNNING, 1, lease=timedelta(minutes=5)), 1, None),
    ],
)
def test_which_existing_record_a_delivery_may_claim(existing: Run, attempt: int, expected: str | None) -> None:
    assert claim_transition(existing, message(attempt)) == expected


def test_a_delivery_for_an_existing_run_is_a_duplicate_a_resend_in_flight_or_a_recovery() -> None:
    job, callback = spec(), spec(target={"type": "callback"})
    live, expired = timedelta(minutes=5), timedelta(seconds=-1)
    assert on_existing(run(RunStatus.SUCCEEDED), message(), job, T0).action == "duplicate"
    assert on_existing(run(RunStatus.RETRYING, 1), message(1), job, T0).action == "resend_retry"
    assert on_existing(run(RunStatus.RUNNING, lease=live), message(), job, T0).action == "in_flight"
    assert on_existing(run(RunStatus.RUNNING, lease=live), message(), callback, T0).action == "duplicate"
    assert on_existing(run(RunStatus.RUNNING, lease=expired), message(), job, T0).action == "recover"
    assert already_settled(run(RunStatus.RUNNING, 2), message(2)) and not already_settled(None, message(2))


def test_a_result_succeeds_retries_while_attempts_are_left_or_fails() -> None:
    job = spec(retry={"max_attempts": 2})
    failed, refused = TargetResult("failed", error="503"), TargetResult("failed", error="400", retryable=False)
    assert on_result(TargetResult("succeeded"), job, 1) == "succeeded"
    assert on_result(TargetResult("pending"), job, 1) == "pending"
    assert (on_result(failed, job, 1), on_result(failed, job, 2)) == ("retry", "fail")
    assert on_result(refused, job, 1) == "fail"  # the request itself is wrong: retrying cannot help


def test_the_lease_covers_the_attempts_timeout_and_a_margin() -> None:
    assert lease_until(spec(), T0) == T0 + timedelta(minutes=5) + LEASE_MARGIN
    callback = spec(target={"type": "callback", "timeout": "1h"}, heartbeat_timeout="2m")
    assert lease_until(callback, T0) == T0 + timedelta(minutes=2) + LEASE_MARGIN  # heartbeats extend it


def test_an_attempt_refused_after_its_run_ended_at_that_attempt_ran_twice_unless_cancelled() -> None:
    assert ran_twice(run(RunStatus.SUCCEEDED, 2), 2)
    assert not ran_twice(run(RunStatus.CANCELLED, 2), 2) and not ran_twice(run(RunStatus.SUCCEEDED, 3), 2)
    assert overlap_policy(message(trigger="backfill"), spec(concurrency={"overlap": "skip"})) == "queue"
