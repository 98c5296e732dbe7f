"""A slot holder's end read eventually consistently (#51): half the price of the strong read it was, never a
slot shared because a read was stale.

Slots are released lazily: the next run of a job (or its team) finds the slot still held by the run before and
asks whether that run ended. The slot's value names the attempt that holds it; an eventually consistent read
that shows the run terminal at that attempt or later is proof enough. A stale read can show a run's end from
before it was opened again for a rerun: its attempt is earlier than the slot's, so it is read again strongly.
These tests run the AWS adapters on moto, with eventually consistent reads answered from a stale copy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.core.names import JOBS_TABLE, RUNS_TABLE, JobsKeys
from jobsched.core.records import StoredJob
from jobsched.core.runs import RunMessage, RunStatus, instant_text, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.pipeline.claiming import Claims, SkipRun, SlotsHeld
from jobsched.pipeline.lost_audit import lost_reason

T0 = parse_instant("2027-01-04T09:00:00Z")
JOB = "payments/job"


class StaleReads:
    """Records each BatchGetItem's consistency; while ``stale`` is set, eventually consistent ones get it."""

    def __init__(self, dynamodb: Any) -> None:
        self.consistent: list[bool] = []
        self.stale: dict[str, Any] | None = None
        dynamodb.meta.events.register("before-call.dynamodb.BatchGetItem", self._answer)

    def _answer(self, params: dict[str, Any], **_: Any) -> Any:
        [(table, request)] = json.loads(params["body"])["RequestItems"].items()  # the request as sent
        if table != "runs":
            return None
        consistent = bool(request.get("ConsistentRead"))
        self.consistent.append(consistent)
        if consistent or self.stale is None:
            return None
        return SimpleNamespace(status_code=200), {"Responses": {table: [self.stale]}, "UnprocessedKeys": {}}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Claims, StoredJob, StaleReads]]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.delenv("JOBSCHED_AWS_ENDPOINT", raising=False)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**JOBS_TABLE.create_table_kwargs("jobs"))
        dynamodb.create_table(**RUNS_TABLE.create_table_kwargs("runs"))
        jobs = JobsStore("jobs", dynamodb)
        spec = JobSpec.model_validate(
            {"name": "job", "team": "payments", "schedule": {"expression": "* * * * *"}, "target": {"type": "callback"}}
        )
        stored = jobs.create(spec, now=T0, principal="alice", next_visit_at=None, cursor=T0)
        yield Claims(jobs, RunsStore("runs", dynamodb)), stored, StaleReads(dynamodb)


def message(minute: int, attempt: int = 1) -> RunMessage:
    at = T0 + timedelta(minutes=minute)
    return RunMessage.scheduled(job=JOB, team="payments", at=at, fire_at=at, spec_version=1).for_attempt(attempt)


def start(claims: Claims, stored: StoredJob, sent: RunMessage, now: Any) -> Any:
    """Slots, then the claim, as the worker takes them."""
    slots = claims.take_slots(sent, stored, now)
    if not isinstance(slots, SlotsHeld):
        return slots
    return claims.claim(sent, stored, now)


def test_the_next_run_frees_the_slot_of_the_run_before_on_an_eventually_consistent_read(aws: Any) -> None:
    claims, stored, reads = aws
    first = start(claims, stored, message(0), T0)
    claims.runs.finish(JOB, first.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=T0 + timedelta(seconds=5))
    reads.consistent.clear()
    second = start(claims, stored, message(1), T0 + timedelta(minutes=1))
    assert second.status is RunStatus.RUNNING
    assert reads.consistent == [False], "one read at half the price"
    assert set(claims.jobs.slot_holders(JOB, JobsKeys.STATE)) == {second.run_id}


def test_a_stale_read_of_a_rerun_runs_end_before_it_was_opened_again_never_frees_its_slot(aws: Any) -> None:
    """The first run ended, was opened again for a rerun, and its attempt 2 runs. The eventually consistent read
    still shows attempt 1 SUCCEEDED: it is read again strongly, and the next run finds the slot held. A late
    duplicate of attempt 1 renewing the slot does not lower the attempt it names."""
    claims, stored, reads = aws
    first = start(claims, stored, message(0), T0)
    claims.runs.finish(JOB, first.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=T0 + timedelta(seconds=5))
    [reads.stale] = claims.runs.db.batch_get_item(
        RequestItems={"runs": {"Keys": [claims.runs._key(JOB, first.run_id)], "ConsistentRead": True}}
    )["Responses"]["runs"]
    claims.runs.reopen(
        JOB, first.run_id, expected_status=RunStatus.SUCCEEDED, attempt=1, now=T0 + timedelta(seconds=30),
        retention=timedelta(days=1), reason="rerun",
    )  # fmt: skip
    rerun = start(claims, stored, message(0, attempt=2), T0 + timedelta(seconds=31))
    assert rerun.status is RunStatus.RUNNING and rerun.attempt == 2
    late_duplicate = claims.take_slots(message(0, attempt=1), stored, T0 + timedelta(seconds=40))
    assert isinstance(late_duplicate, SlotsHeld), "the same holder: its lease renewed"
    reads.consistent.clear()
    refused = start(claims, stored, message(1), T0 + timedelta(minutes=1))
    assert isinstance(refused, SkipRun), "overlap: skip (the default) while the rerun holds the slot"
    # The stale end named an earlier attempt: asked again strongly; twice, as the slots' own eventually consistent
    # read refused the run, and a refusal is judged again on a strong read of them.
    assert reads.consistent == [False, True] * 2
    assert set(claims.jobs.slot_holders(JOB, JobsKeys.STATE)) == {first.run_id}
    assert claims.runs.get(JOB, first.run_id).status is RunStatus.RUNNING


def test_a_lost_run_found_ended_is_not_remembered_ended_when_its_late_message_claims_it(aws: Any) -> None:
    """The audit recorded the instant MISSED (``lost:``) while its message was only late. Asked then, its run has
    ended; but its message may still claim it at the same attempt, so that end proves nothing for later: once it
    runs, it holds its slot (the worker remembers only ends that cannot be claimed again at their attempt)."""
    claims, stored, _ = aws
    late = message(0)
    claims.runs.create(late, status=RunStatus.MISSED, now=T0, retention=timedelta(days=1), reason=lost_reason("16m"))
    lease = f"{instant_text(T0 + timedelta(hours=1))}@1"
    assert claims.ended_runs({late.run_id: lease}, job=JOB) == {late.run_id}
    assert not claims.proven.covers((JOB, late.run_id), 1)
    running = start(claims, stored, late, T0 + timedelta(minutes=16))
    assert running.status is RunStatus.RUNNING and running.attempt == 1
    assert claims.ended_runs({late.run_id: lease}, job=JOB) == set()
