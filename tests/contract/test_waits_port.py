"""The stores' parts of waiting for data and of reruns carried downstream: moto and memory agree."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.core.records import Waiting
from jobsched.core.run_records import StaleAttempt
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from tests.contract.conftest import Stores

T0 = parse_instant("2027-03-01T02:00:00Z")
MESSAGE = RunMessage.scheduled(job="data/nightly", team="data", at=T0, fire_at=T0, spec_version=1)


def waiting(since_minutes: int = 0, *things: str) -> Waiting:
    since = T0 + timedelta(minutes=since_minutes)
    return Waiting("waiting for " + ", ".join(things), list(things), since, since + timedelta(hours=2))


def test_a_run_waits_from_nothing_or_from_scheduled_keeps_its_start_and_is_claimed_from_waiting(
    stores: Stores,
) -> None:
    runs = stores.runs
    created = runs.wait(MESSAGE, waiting(0, "s3://b/k"), now=T0, retention=timedelta(days=1), deadline=None)
    assert created.status is RunStatus.WAITING and created.waiting_for == ["s3://b/k"]
    assert created.wait_started_at == T0 and created.next_attempt_at == T0 + timedelta(hours=2)
    later = runs.wait(MESSAGE, waiting(5, "s3://b/k2"), now=T0, retention=timedelta(days=1), deadline=None)
    assert later.wait_started_at == T0 and later.waiting_for == ["s3://b/k2"]  # the wait began once
    assert [run.run_id for run in runs.wakeups(_shard(stores), T0 + timedelta(hours=3))] == [MESSAGE.run_id]
    other = MESSAGE.model_copy(update={"run_id": "20270301T020000Z-m-x"})
    runs.create(other, status=RunStatus.SCHEDULED, now=T0, retention=timedelta(days=1))
    moved = runs.wait(other, waiting(0, "s3://b/k"), now=T0, retention=timedelta(days=1), deadline=None)
    assert moved.status is RunStatus.WAITING
    runs.finish(other.job, other.run_id, attempt=1, status=RunStatus.SKIPPED, now=T0, from_status=RunStatus.WAITING)
    with pytest.raises(StaleAttempt):  # past waiting: never put back
        runs.wait(other, waiting(0, "s3://b/k"), now=T0, retention=timedelta(days=1), deadline=None)


def _shard(stores: Stores) -> int:
    from jobsched.core.run_records import lease_shard

    return lease_shard(MESSAGE.job, MESSAGE.run_id)


def test_waiters_are_listed_by_what_they_await_and_dropped(stores: Stores) -> None:
    jobs = stores.jobs
    expires = T0 + timedelta(days=1)
    jobs.add_waiter("data/nightly", "r1", '{"a":1}', awaits=["s3://b/one", "job:data/x"], expires_at=expires)
    jobs.add_waiter("data/nightly", "r2#load", '{"a":2}', awaits=["s3://b/two"], expires_at=expires)
    jobs.add_waiter("data/other", "r3", '{"a":3}', awaits=["s3://b/one"], expires_at=expires)
    assert jobs.waiters("data/nightly", limit=10) == {"r1": '{"a":1}', "r2#load": '{"a":2}'}
    assert jobs.waiters("data/nightly", limit=10, awaiting="s3://b/one") == {"r1": '{"a":1}'}
    assert jobs.waiters("data/nightly", limit=10, awaiting="job:data/x") == {"r1": '{"a":1}'}
    assert jobs.waiters("data/nightly", limit=10, awaiting="s3://b/three") == {}
    jobs.drop_waiter("data/nightly", "r1")
    jobs.drop_waiter("data/nightly", "r1")  # twice: quietly
    assert jobs.waiters("data/nightly", limit=10) == {"r2#load": '{"a":2}'}


def test_a_carried_rerun_is_marked_per_upstream_attempt(stores: Stores) -> None:
    jobs = stores.jobs
    assert not jobs.carried("data/report", "20270301T020000Z-a", "data/extract/20270301T020000Z#2")
    jobs.mark_carried("data/report", "20270301T020000Z-a", "data/extract/20270301T020000Z#2", expires_at=T0)
    assert jobs.carried("data/report", "20270301T020000Z-a", "data/extract/20270301T020000Z#2")
    assert not jobs.carried("data/report", "20270301T020000Z-a", "data/extract/20270301T020000Z#3")


def test_a_reopen_with_downstream_carries_at_the_next_attempt_and_a_plain_one_does_not(stores: Stores) -> None:
    runs = stores.runs
    runs.create(MESSAGE, status=RunStatus.SCHEDULED, now=T0, retention=timedelta(days=1))
    runs.finish(
        MESSAGE.job, MESSAGE.run_id, attempt=1, status=RunStatus.FAILED, now=T0, from_status=RunStatus.SCHEDULED
    )
    carried = runs.reopen(
        MESSAGE.job,
        MESSAGE.run_id,
        expected_status=RunStatus.FAILED,
        attempt=1,
        now=T0,
        retention=timedelta(days=1),
        reason="rerun",
        downstream=True,
    )
    assert carried.downstream_attempt == 2
    runs.finish(MESSAGE.job, MESSAGE.run_id, attempt=1, status=RunStatus.FAILED, now=T0, from_status=RunStatus.RETRYING)
    plain = runs.reopen(
        MESSAGE.job,
        MESSAGE.run_id,
        expected_status=RunStatus.FAILED,
        attempt=1,
        now=T0,
        retention=timedelta(days=1),
        reason="rerun",
    )
    assert plain.downstream_attempt is None


def test_succeeded_between_finds_the_newest_success_in_the_window_only(stores: Stores) -> None:
    runs = stores.runs
    for hours, status in ((-30, RunStatus.SUCCEEDED), (-5, RunStatus.SUCCEEDED), (-1, RunStatus.FAILED)):
        at = T0 + timedelta(hours=hours)
        message = RunMessage.scheduled(job="data/x", team="data", at=at, fire_at=at, spec_version=1)
        runs.create(message, status=RunStatus.SCHEDULED, now=at, retention=timedelta(days=3))
        runs.finish("data/x", message.run_id, attempt=1, status=status, now=at, from_status=RunStatus.SCHEDULED)
    assert runs.succeeded_between("data/x", T0 - timedelta(hours=24), T0) == "20270228T210000Z"
    assert runs.succeeded_between("data/x", T0 - timedelta(hours=2), T0) is None
