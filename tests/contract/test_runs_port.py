"""The RunsPort contract: a run is created once and every transition is fenced by status and attempt."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jobsched.core.run_records import LOST_PREFIX, AttemptClaim, Progress, Run, StaleAttempt, lease_shard
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from tests.contract.conftest import Stores

T0 = parse_instant("2027-01-04T09:00:00Z")
DAY = timedelta(days=1)
JOB = "payments/job"


def message(minute: int = 0, *, attempt: int = 1) -> RunMessage:
    at = T0 + timedelta(minutes=minute)
    return RunMessage.scheduled(job=JOB, team="payments", at=at, fire_at=at, spec_version=1).for_attempt(attempt)


def running(stores: Stores, minute: int = 0, *, external: bool = False, deadline: timedelta | None = None) -> str:
    first = message(minute)
    started = T0 + timedelta(minutes=minute, seconds=2)
    lease = started + timedelta(minutes=15)
    run = stores.runs.create(
        first,
        status=RunStatus.RUNNING,
        now=started,
        retention=DAY,
        lease_until=lease,
        external=external,
        deadline=deadline,
    )
    assert run is not None
    return first.run_id


def test_a_run_is_created_once_and_a_terminal_creation_is_reported(stores: Stores) -> None:
    run_id = running(stores)
    run = stores.runs.get(JOB, run_id)
    assert run is not None and run.status is RunStatus.RUNNING and run.attempt == 1 and run.lateness_ms == 2000
    assert stores.runs.create(message(), status=RunStatus.RUNNING, now=T0, retention=DAY) is None
    missed = stores.runs.create(message(1), status=RunStatus.MISSED, now=T0, retention=DAY, reason="outage")
    assert missed is not None and missed.finished_at == T0 and missed.reason == "outage"
    assert [r.run_id for r in stores.finished] == [missed.run_id]
    assert stores.runs.get(JOB, "20990101T000000Z") is None


def test_only_the_attempt_that_runs_may_finish_and_only_once(stores: Stores) -> None:
    run_id = running(stores)
    with pytest.raises(StaleAttempt):
        stores.runs.finish(JOB, run_id, attempt=2, status=RunStatus.SUCCEEDED, now=T0)
    done = stores.runs.finish(
        JOB, run_id, attempt=1, status=RunStatus.SUCCEEDED, now=T0 + timedelta(seconds=3), output="ok"
    )
    assert done.status is RunStatus.SUCCEEDED and done.output == "ok" and done.error is None
    with pytest.raises(StaleAttempt):
        stores.runs.finish(JOB, run_id, attempt=1, status=RunStatus.FAILED, now=T0, error="late")
    assert stores.runs.get(JOB, run_id) == done
    assert [r.status for r in stores.finished] == [RunStatus.SUCCEEDED]
    assert stores.runs.ended({(JOB, run_id): None, (JOB, "20990101T000000Z"): None}) == {(JOB, run_id): 1}


def test_a_slot_holder_ended_at_its_attempt_or_later_and_a_rerun_has_not(stores: Stores) -> None:
    """``ended`` is asked with the attempt each slot names: a run that ended at it (or later: it retried) ended
    that holding, and says at which attempt it ended (the holdings its end is proof for); a run opened again for a
    rerun has not, whatever attempt its slot names; the audit's MISSED has ended but proves nothing for a later
    holding at its attempt (its late message may still claim it)."""
    run_id = running(stores)
    stores.runs.finish(JOB, run_id, attempt=1, status=RunStatus.SUCCEEDED, now=T0)
    assert stores.runs.ended({(JOB, run_id): 1}) == {(JOB, run_id): 1}
    assert stores.runs.ended({(JOB, run_id): 2}) == {(JOB, run_id): 1}, "read strongly: terminal, at attempt 1"
    stores.runs.reopen(
        JOB, run_id, expected_status=RunStatus.SUCCEEDED, attempt=1, now=T0, retention=timedelta(days=1), reason="x"
    )
    assert stores.runs.ended({(JOB, run_id): 1}) == {}
    assert stores.runs.ended({(JOB, run_id): 2}) == {}
    lost = message(5)
    stores.runs.create(lost, status=RunStatus.MISSED, now=T0, retention=DAY, reason=f"{LOST_PREFIX}late")
    assert stores.runs.ended({(JOB, lost.run_id): 1}) == {(JOB, lost.run_id): None}


def test_a_retry_waits_on_the_wakeups_index_until_its_next_attempt_starts(stores: Stores) -> None:
    run_id = running(stores)
    wake_at = T0 + timedelta(hours=1)
    retrying = stores.runs.to_retrying(JOB, run_id, attempt=1, now=T0, next_attempt_at=wake_at, error="boom", wake=True)
    assert retrying.status is RunStatus.RETRYING and retrying.next_attempt_at == wake_at and retrying.error == "boom"
    shard = lease_shard(JOB, run_id)
    assert [r.run_id for r in stores.runs.wakeups(shard, wake_at - timedelta(seconds=1))] == []
    assert [r.run_id for r in stores.runs.wakeups(shard, wake_at)] == [run_id]
    assert stores.runs.clear_wake(JOB, run_id, attempt=1) is True
    assert stores.runs.clear_wake(JOB, run_id, attempt=1) is False
    assert list(stores.runs.wakeups(shard, wake_at)) == []
    with pytest.raises(StaleAttempt):
        stores.runs.claim_attempt(
            JOB,
            run_id,
            AttemptClaim(
                expected_status=RunStatus.RETRYING, expected_attempt=2, attempt=3, now=wake_at, lease_until=wake_at
            ),
        )
    second = stores.runs.claim_attempt(
        JOB,
        run_id,
        AttemptClaim(
            expected_status=RunStatus.RETRYING, expected_attempt=1, attempt=2, now=wake_at, lease_until=wake_at + DAY
        ),
    )
    assert second.status is RunStatus.RUNNING and second.attempt == 2 and second.next_attempt_at is None
    with pytest.raises(StaleAttempt):
        stores.runs.to_retrying(JOB, run_id, attempt=1, now=wake_at, next_attempt_at=wake_at, error="x", wake=False)


def test_a_crashed_attempt_is_taken_over_only_after_its_lease_ran_out(stores: Stores) -> None:
    run_id = running(stores)
    run = stores.runs.get(JOB, run_id)
    assert run is not None and run.lease_until is not None
    lease = run.lease_until

    def take_over(now: datetime) -> Run:
        return stores.runs.claim_attempt(
            JOB,
            run_id,
            AttemptClaim(
                expected_status=RunStatus.RUNNING,
                expected_attempt=1,
                attempt=2,
                now=now,
                lease_until=lease + DAY,
                require_expired_lease=True,
            ),
        )

    with pytest.raises(StaleAttempt):
        take_over(lease - timedelta(seconds=1))
    extended = stores.runs.heartbeat(JOB, run_id, attempt=1, lease_until=lease + timedelta(minutes=5))
    assert extended.lease_until == lease + timedelta(minutes=5)
    ended = stores.runs.end_lease(JOB, run_id, attempt=1, now=T0 + timedelta(minutes=1))
    assert ended.lease_until == T0 + timedelta(minutes=1)
    taken = take_over(T0 + timedelta(minutes=1))
    assert taken.attempt == 2
    with pytest.raises(StaleAttempt):
        stores.runs.heartbeat(JOB, run_id, attempt=1, lease_until=T0 + DAY)


def test_progress_and_its_checkpoint_are_kept_for_the_next_attempt_and_a_succeeded_reruns_start_afresh(
    stores: Stores,
) -> None:
    run_id = running(stores, external=True)
    lease = stores.runs.get(JOB, run_id).lease_until  # type: ignore[union-attr]
    said = Progress(T0 + timedelta(minutes=3), 1, 40.0, "partition 12 of 30", '{"partition":12}')
    reported = stores.runs.heartbeat(JOB, run_id, attempt=1, lease_until=None, progress=said)
    assert reported.progress == said and reported.lease_until == lease, "a container's lease is not extended"
    # A later heartbeat without a checkpoint keeps the last one; a stale attempt's report changes nothing.
    alive = Progress(T0 + timedelta(minutes=4), 1, 45.5)
    kept = stores.runs.heartbeat(JOB, run_id, attempt=1, lease_until=None, progress=alive)
    assert kept.progress is not None and kept.progress.checkpoint == '{"partition":12}'
    assert kept.progress.percent == 45.5 and kept.progress.message == "partition 12 of 30"
    with pytest.raises(StaleAttempt):
        stores.runs.heartbeat(JOB, run_id, attempt=2, lease_until=None, progress=said)
    retrying = stores.runs.to_retrying(
        JOB, run_id, attempt=1, now=T0, next_attempt_at=T0 + timedelta(minutes=5), error="exit 137", wake=False
    )
    claimed = stores.runs.claim_attempt(
        JOB,
        run_id,
        AttemptClaim(
            expected_status=retrying.status,
            expected_attempt=1,
            attempt=2,
            now=T0 + timedelta(minutes=5),
            lease_until=T0 + timedelta(minutes=35),
            external=True,
        ),
    )
    assert claimed.progress is not None and claimed.progress.checkpoint == '{"partition":12}', "the retry resumes"
    started = stores.runs.started_work(JOB, run_id, attempt=2, work='{"task_arn":"t2","attempt":2}')
    assert started.work == '{"task_arn":"t2","attempt":2}'
    done = stores.runs.finish(JOB, run_id, attempt=2, status=RunStatus.SUCCEEDED, now=T0 + timedelta(minutes=9))
    assert done.work == started.work, "kept after the run ends: its logs are found by it"
    reopened = stores.runs.reopen(
        JOB, run_id, expected_status=done.status, attempt=2, now=T0 + DAY, retention=DAY, reason="rerun"
    )
    assert reopened.progress is not None and reopened.progress.checkpoint is None, "its work was done"


def test_a_missed_record_starts_only_when_the_audit_wrote_it_as_lost(stores: Stores) -> None:
    lost = stores.runs.create(
        message(0), status=RunStatus.MISSED, now=T0, retention=DAY, reason=LOST_PREFIX + "no record"
    )
    outage = stores.runs.create(message(1), status=RunStatus.MISSED, now=T0, retention=DAY, reason="outage")
    assert lost is not None and outage is not None
    later = T0 + timedelta(minutes=20)
    with pytest.raises(StaleAttempt):
        stores.runs.claim_attempt(
            JOB,
            outage.run_id,
            AttemptClaim(expected_status=RunStatus.MISSED, expected_attempt=1, attempt=1, now=later, lease_until=later),
        )
    started = stores.runs.claim_attempt(
        JOB,
        lost.run_id,
        AttemptClaim(
            expected_status=RunStatus.MISSED,
            expected_attempt=1,
            attempt=1,
            now=later,
            lease_until=later + DAY,
            lateness_ms=1_200_000,
        ),
    )
    assert started.status is RunStatus.RUNNING and started.reason is None and started.finished_at is None
    assert started.lateness_ms == 1_200_000


def test_runs_awaiting_an_outside_result_and_runs_past_their_deadline_are_listed_until_handled(stores: Stores) -> None:
    run_id = running(stores, external=True, deadline=timedelta(minutes=30))
    run = stores.runs.get(JOB, run_id)
    assert run is not None and run.lease_until is not None and run.deadline_at == T0 + timedelta(minutes=30)
    shard = lease_shard(JOB, run_id)
    assert list(stores.runs.expired_leases(shard, run.lease_until - timedelta(seconds=1))) == []
    assert [r.run_id for r in stores.runs.expired_leases(shard, run.lease_until)] == [run_id]
    assert [r.run_id for r in stores.runs.past_deadline(shard, T0 + timedelta(minutes=30))] == [run_id]
    assert stores.runs.deadline_reported(JOB, run_id) is True
    assert stores.runs.deadline_reported(JOB, run_id) is False
    assert list(stores.runs.past_deadline(shard, T0 + DAY)) == []
    stores.runs.finish(JOB, run_id, attempt=1, status=RunStatus.SUCCEEDED, now=T0 + timedelta(minutes=40))
    assert list(stores.runs.expired_leases(shard, T0 + DAY)) == []


def test_run_ids_between_two_instants_and_history_newest_first(stores: Stores) -> None:
    for minute in range(5):
        running(stores, minute)
    assert stores.runs.scheduled_ids(JOB, "20270104T090100Z", "20270104T090300Z") == {
        "20270104T090100Z",
        "20270104T090200Z",
        "20270104T090300Z",
    }
    assert [r.run_id for r in stores.runs.history(JOB, limit=2)] == ["20270104T090400Z", "20270104T090300Z"]
    assert [r.run_id for r in stores.runs.history(JOB, limit=2, newest_first=False)] == [
        "20270104T090000Z",
        "20270104T090100Z",
    ]
    # Between two run ids (a time range, inclusive: what a baseline learns since its mark), newest first.
    between = ("20270104T090100Z~", "20270104T090400Z~")
    assert [r.run_id for r in stores.runs.history(JOB, limit=2, between=between)] == [
        "20270104T090400Z",
        "20270104T090300Z",
    ]
    assert [r.run_id for r in stores.runs.history(JOB, limit=9, between=between)][-1] == "20270104T090200Z"


def test_a_finished_run_is_reopened_once_for_a_rerun_and_is_woken_if_its_message_is_lost(stores: Stores) -> None:
    run_id = running(stores)
    failed = stores.runs.finish(JOB, run_id, attempt=1, status=RunStatus.FAILED, now=T0, error="boom")
    later = T0 + timedelta(hours=5)
    with pytest.raises(StaleAttempt):  # only from the status and attempt read
        stores.runs.reopen(
            JOB, run_id, expected_status=RunStatus.SUCCEEDED, attempt=1, now=later, retention=DAY, reason="r"
        )
    reopened = stores.runs.reopen(
        JOB, run_id, expected_status=failed.status, attempt=1, now=later, retention=DAY, reason="rerun by alice"
    )
    assert reopened.status is RunStatus.RETRYING and reopened.attempt == 1 and reopened.attempt_base == 1
    assert reopened.next_attempt_at == later and reopened.finished_at is None and reopened.reason == "rerun by alice"
    assert reopened.policy_attempt == 0
    with pytest.raises(StaleAttempt):  # a second, concurrent rerun
        stores.runs.reopen(
            JOB, run_id, expected_status=RunStatus.FAILED, attempt=1, now=later, retention=DAY, reason="r"
        )
    woken = [run.run_id for run in stores.runs.wakeups(lease_shard(JOB, run_id), later)]
    assert woken == [run_id], "on the wakeups index until its message is out"
    assert stores.runs.clear_wake(JOB, run_id, attempt=1)
    started = stores.runs.claim_attempt(
        JOB,
        run_id,
        AttemptClaim(
            expected_status=RunStatus.RETRYING,
            expected_attempt=1,
            attempt=2,
            now=later,
            lease_until=later + timedelta(minutes=15),
            external=False,
        ),
    )
    assert started.status is RunStatus.RUNNING and started.attempt == 2 and started.policy_attempt == 1


def test_a_held_runs_reason_is_noted_on_its_record_only_while_it_waits_for_its_first_attempt(stores: Stores) -> None:
    """A triggered run's record is written at its trigger with no reason: the hold that finds it says why."""
    triggered = message(0)
    stores.runs.create(triggered, status=RunStatus.SCHEDULED, now=T0, retention=DAY)
    assert stores.runs.note_held(JOB, triggered.run_id, reason="waiting since X: held: circuit open", since=T0)
    stored = stores.runs.get(JOB, triggered.run_id)
    assert stored is not None and stored.reason == "waiting since X: held: circuit open"
    assert stores.runs.slot_waiters("payments", limit=5) == [], "a reason alone puts it on no slot waits"
    assert not stores.runs.note_held(JOB, running(stores, 3), reason="late hold", since=T0), "running: not held"


def test_a_runs_output_keeps_its_first_4000_characters(stores: Stores) -> None:
    run_id = running(stores)
    done = stores.runs.finish(JOB, run_id, attempt=1, status=RunStatus.SUCCEEDED, now=T0, output="x" * 10_000)
    assert done.output is not None and len(done.output) == 4_000 and done.output.endswith("... (+6017 chars)")


def test_runs_waiting_for_a_slot_are_listed_oldest_first_and_woken_once_until_they_start(stores: Stores) -> None:
    """A run held back by max_running is on its team's slot waits; a run that ends takes the oldest off to wake
    it (two wakers cannot both take it); its claim or its end takes it off for good."""
    waiting = [message(minute) for minute in (2, 0, 1)]
    for index, first in enumerate(waiting):
        stores.runs.create(first, status=RunStatus.SCHEDULED, now=T0, retention=DAY, reason="waiting")
        since = T0 + timedelta(seconds=index)
        assert stores.runs.note_held(JOB, first.run_id, slot_team="payments", since=since)
    assert not stores.runs.note_held(JOB, running(stores, 5), slot_team="payments", since=T0), "not waiting: running"
    assert stores.runs.slot_waiters("payments", limit=5) == [(JOB, m.run_id) for m in waiting]
    assert stores.runs.slot_waiters("other", limit=5) == []
    oldest = stores.runs.take_slot_waiter(JOB, waiting[0].run_id)
    assert oldest is not None and oldest.status is RunStatus.SCHEDULED and oldest.run_id == waiting[0].run_id
    assert stores.runs.take_slot_waiter(JOB, waiting[0].run_id) is None, "another waker took it already"
    assert stores.runs.slot_waiters("payments", limit=1) == [(JOB, waiting[1].run_id)]
    claim = AttemptClaim(1, RunStatus.SCHEDULED, 1, T0, T0 + timedelta(minutes=15), False)
    stores.runs.claim_attempt(JOB, waiting[1].run_id, claim)
    stores.runs.finish(
        JOB, waiting[2].run_id, attempt=1, status=RunStatus.SKIPPED, now=T0, from_status=RunStatus.SCHEDULED
    )
    assert stores.runs.slot_waiters("payments", limit=5) == []
    assert stores.runs.take_slot_waiter(JOB, waiting[1].run_id) is None
