"""The JobsPort contract: what the dispatcher and the worker rely on, for every adapter."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest

from jobsched.core.names import wheel_slot
from jobsched.core.records import JobExists, StoredJob, VersionConflict, due_shard
from jobsched.core.runs import instant_text, parse_instant
from jobsched.core.spec import JobSpec
from tests.contract.conftest import Stores

T0 = parse_instant("2027-01-04T09:00:00Z")
JOB = "payments/job"


def spec(name: str = "job", team: str = "payments", expression: str = "* * * * *") -> JobSpec:
    return JobSpec.model_validate(
        {"name": name, "team": team, "schedule": {"expression": expression}, "target": {"type": "callback"}}
    )


def create(stores: Stores, name: str = "job", *, next_visit_at: str | None = "2027-01-04T09:01:00Z") -> StoredJob:
    return stores.jobs.create(
        spec(name),
        now=T0,
        principal="alice",
        next_visit_at=parse_instant(next_visit_at) if next_visit_at else None,
        cursor=T0,
    )


def test_a_job_is_created_once_and_read_back(stores: Stores) -> None:
    stored = create(stores)
    assert stores.jobs.get("payments/job") == stored
    assert stores.jobs.get("payments/job", consistent=False) == stored
    assert stores.jobs.get("payments/other") is None
    with pytest.raises(JobExists):
        create(stores)
    assert stores.jobs.get_many(["payments/job", "payments/other"]) == {"payments/job": stored}


def test_a_change_is_conditional_on_the_version_read_and_keeps_the_slots(stores: Stores) -> None:
    stored = create(stores)
    taken = stores.jobs.acquire_slot(
        "payments/job", "STATE", holder="r1", lease_until=T0 + timedelta(hours=1), limit=1, now=T0
    )
    assert taken.acquired
    later = T0 + timedelta(minutes=5)
    changed = stores.jobs.replace(
        stored, spec(expression="0 * * * *"), now=later, principal="bob", next_visit_at=later, cursor=later
    )
    assert changed.version == 2 and stores.jobs.get("payments/job") == changed
    with pytest.raises(VersionConflict):
        stores.jobs.replace(stored, spec(), now=later, principal="eve", next_visit_at=later, cursor=later)
    state = stores.jobs.get_state("payments/job")
    assert state is not None and state.spec_version == 2 and instant_text(state.cursor) == "2027-01-04T09:05:00Z"
    assert stores.jobs.slot_holders("payments/job", "STATE") == {"r1": "2027-01-04T10:00:00Z"}


def test_the_due_index_lists_only_due_active_jobs_of_the_shard_in_time_order(stores: Stores) -> None:
    names = [f"job{index}" for index in range(40)]
    for index, name in enumerate(names):
        create(stores, name, next_visit_at=f"2027-01-04T09:{index % 20:02d}:00Z")
    paused = stores.jobs.get("payments/job0")
    assert paused is not None
    stores.jobs.set_state(
        paused, "PAUSED", now=T0, principal="alice", reason="maintenance", next_visit_at=None, cursor=T0
    )
    until = parse_instant("2027-01-04T09:09:00Z")
    for shard in {due_shard(f"payments/{name}") for name in names}:
        entries = list(stores.jobs.due(shard, until))
        expected = sorted(
            (f"2027-01-04T09:{index % 20:02d}:00Z", f"payments/{name}")
            for index, name in enumerate(names)
            if due_shard(f"payments/{name}") == shard and index % 20 <= 9 and name != "job0"
        )
        assert [(e.next_visit_at.strftime("%Y-%m-%dT%H:%M:%SZ"), e.job) for e in entries] == expected
        assert all(e.sk == "STATE" and e.cursor == T0 and e.spec_version == 1 for e in entries)
    resumed = stores.jobs.get("payments/job0")
    assert resumed is not None and resumed.state == "PAUSED" and resumed.paused_reason == "maintenance"
    stores.jobs.set_state(resumed, "ACTIVE", now=T0, principal="alice", reason=None, next_visit_at=T0, cursor=T0)
    assert "payments/job0" in {e.job for e in stores.jobs.due(due_shard("payments/job0"), until)}


def test_advancing_the_cursor_is_conditional_on_cursor_version_and_due_entry(stores: Stores) -> None:
    create(stores)
    one, two = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    assert not stores.jobs.advance("payments/job", spec_version=2, old_cursor=T0, cursor=one, next_visit_at=two)
    assert stores.jobs.advance(
        "payments/job", spec_version=1, old_cursor=T0, cursor=one, next_visit_at=two, audited_to=one
    )
    assert not stores.jobs.advance("payments/job", spec_version=1, old_cursor=T0, cursor=one, next_visit_at=two)
    assert stores.jobs.audit_marks(["payments/job", "payments/none"]) == {"payments/job": one}
    [entry] = stores.jobs.due(due_shard("payments/job"), two)
    assert entry.cursor == one and entry.next_visit_at == two
    assert stores.jobs.advance("payments/job", spec_version=1, old_cursor=one, cursor=two, next_visit_at=None)
    assert list(stores.jobs.due(due_shard("payments/job"), two + timedelta(days=1))) == []
    assert not stores.jobs.advance("payments/job", spec_version=1, old_cursor=two, cursor=two, next_visit_at=two)


def test_slots_are_limited_idempotent_and_evict_expired_or_ended_holders(stores: Stores) -> None:
    create(stores)
    lease = T0 + timedelta(minutes=10)

    def take(holder: str, *, now: object = T0, ended: set[str] | None = None) -> bool:
        answer = stores.jobs.acquire_slot(
            "payments/job",
            "STATE",
            holder=holder,
            lease_until=lease,
            limit=2,
            now=now,  # type: ignore[arg-type]
            ended=(lambda holders: {h for h in holders if h in ended}) if ended is not None else None,
        )
        return answer.acquired

    assert take("r1") and take("r2") and take("r1"), "the same holder again is idempotent"
    assert not take("r3"), "two of two taken"
    refused = stores.jobs.acquire_slot("payments/job", "STATE", holder="r3", lease_until=lease, limit=2, now=T0)
    assert set(refused.holders) == {"r1", "r2"}
    assert take("r3", ended={"r2"}), "an ended run's slot is taken over in the same write"
    assert set(stores.jobs.slot_holders("payments/job", "STATE")) == {"r1", "r3"}
    assert take("r4", now=lease + timedelta(seconds=1)), "expired leases are evicted"
    stores.jobs.release_slot("payments/job", "STATE", holder="r4")
    assert stores.jobs.slot_holders("payments/job", "STATE") == {}
    team = "TEAM#payments"
    assert stores.jobs.acquire_slot(team, "SLOTS#normal", holder="x", lease_until=lease, limit=1, now=T0).acquired


def test_one_write_takes_slots_for_a_batch_in_order_as_far_as_there_is_room(stores: Stores) -> None:
    """A worker batch takes its team's slots in one write: as many holders as fit, earliest first; holders
    already in (a redelivery) keep theirs; ended runs are evicted to make room, in the same write."""
    team = "TEAM#payments"
    lease = T0 + timedelta(minutes=10)
    leases = {holder: lease for holder in ("a", "b", "c")}
    assert stores.jobs.acquire_slots(team, "QUOTA", leases={"x": lease}, limit=4, now=T0).granted == ["x"]
    taken = stores.jobs.acquire_slots(team, "QUOTA", leases=leases, limit=4, now=T0)
    assert taken.granted == ["a", "b", "c"]
    more = {holder: lease for holder in ("c", "d", "e")}
    assert stores.jobs.acquire_slots(team, "QUOTA", leases=more, limit=4, now=T0).granted == ["c"]
    refused = stores.jobs.acquire_slots(team, "QUOTA", leases={"d": lease}, limit=4, now=T0)
    assert refused.granted == [] and set(refused.holders) == {"x", "a", "b", "c"}
    ended = stores.jobs.acquire_slots(
        team, "QUOTA", leases={"d": lease, "e": lease}, limit=4, now=T0, ended=lambda hs: {"a", "x"} & set(hs)
    )
    assert ended.granted == ["d", "e"]
    assert set(stores.jobs.slot_holders(team, "QUOTA")) == {"b", "c", "d", "e"}
    stores.jobs.release_slots(team, "QUOTA", holders=["b", "d", "gone"])
    assert set(stores.jobs.slot_holders(team, "QUOTA")) == {"c", "e"}


def test_two_batches_racing_for_the_last_slots_never_hold_more_than_the_limit(stores: Stores) -> None:
    """Batch A judges two slots free; before A writes, batch B takes one. A's write must fail (more than the
    limit would be held) and A, judging again, takes the one left."""
    team = "TEAM#payments"
    lease = T0 + timedelta(minutes=10)
    stores.jobs.acquire_slots(team, "QUOTA", leases={"r1": lease, "r2": lease}, limit=4, now=T0)
    interfered: list[list[str]] = []

    def ended_while_b_takes_a_slot(holders: dict[str, str]) -> set[str]:
        if not interfered:
            interfered.append(stores.jobs.acquire_slots(team, "QUOTA", leases={"b": lease}, limit=4, now=T0).granted)
        return set()

    answer = stores.jobs.acquire_slots(
        team, "QUOTA", leases={"a1": lease, "a2": lease, "a3": lease}, limit=4, now=T0, ended=ended_while_b_takes_a_slot
    )
    assert interfered == [["b"]]
    assert answer.granted == ["a1"]
    assert set(stores.jobs.slot_holders(team, "QUOTA")) == {"r1", "r2", "b", "a1"}


def test_a_breaker_opens_at_the_threshold_once_and_reopens_after_its_cool_down(stores: Stores) -> None:
    cool = timedelta(minutes=5)
    results = [stores.jobs.breaker_failed("http://t", now=T0, threshold=3, cool_down=cool) for _ in range(4)]
    assert results == [None, None, "opened", None]
    state = stores.jobs.breaker("http://t")
    assert state.failures == 4 and state.open_until == T0 + cool
    after = T0 + cool + timedelta(seconds=1)
    assert stores.jobs.breaker_failed("http://t", now=after, threshold=3, cool_down=cool) == "reopened"
    assert stores.jobs.breaker_succeeded("http://t") is True
    assert stores.jobs.breaker_succeeded("http://t") is False
    assert stores.jobs.breaker("http://t").failures == 0


def test_a_teams_open_breakers_are_listed_with_what_they_hold_and_an_admin_close_is_audited(stores: Stores) -> None:
    """#46: a team lists its open breakers without a scan; each names the runs it held (a set, so a redelivered hold
    adds nothing, and bounded); an admin's close leaves an audit entry and takes it off the list."""
    cool = timedelta(minutes=5)
    key, other = "ops:lambda:db", "ops/report:http:https://api.example.com"
    for _ in range(3):
        stores.jobs.breaker_failed(key, now=T0, threshold=3, cool_down=cool)
        stores.jobs.breaker_failed(other, now=T0, threshold=3, cool_down=cool)
    stores.jobs.breaker_holds(key, "ops/a/20270104T090000Z")
    stores.jobs.breaker_holds(key, "ops/a/20270104T090000Z")  # redelivered: once
    stores.jobs.breaker_holds(key, "ops/b/20270104T090000Z#load")
    listed = stores.jobs.open_breakers("ops")
    assert sorted(listed) == sorted([key, other]) and stores.jobs.open_breakers("billing") == {}
    assert listed[key].held == ("ops/a/20270104T090000Z", "ops/b/20270104T090000Z#load")
    assert listed[key].open_until == T0 + cool
    stores.jobs.breaker_holds("ops:lambda:closed", "ops/c/1")  # no open breaker: nothing named
    assert stores.jobs.breaker("ops:lambda:closed").held == ()
    assert stores.jobs.close_breaker(key, by="admin", reason="vendor fixed it", now=T0) is True
    assert list(stores.jobs.open_breakers("ops")) == [other]
    [audit] = [entry for entry in stores.jobs.history("TARGET#" + key, limit=10)[0]]
    assert (audit.action, audit.principal, audit.reason) == ("close_breaker", "admin", "vendor fixed it")
    assert stores.jobs.close_breaker(key, by="admin", reason="again", now=T0) is False


def test_incident_marks_live_on_the_job_and_never_create_one(stores: Stores) -> None:
    create(stores)
    stores.jobs.mark_incident("payments/job", "failing", is_open=True)
    stores.jobs.mark_incident("payments/job", "late", is_open=True)
    stores.jobs.mark_incident("payments/job", "late", is_open=False)
    assert stores.jobs.open_incidents("payments/job") == {"failing"}
    stores.jobs.mark_incident("payments/gone", "failing", is_open=True)
    assert stores.jobs.get_state("payments/gone") is None
    assert stores.jobs.get_incident("payments/job", "failing") is None


def test_team_limits_are_the_defaults_with_the_teams_overrides(stores: Stores) -> None:
    defaults = stores.jobs.team_limits("payments")
    changed = stores.jobs.set_team_limits("payments", {"max_running": 3, "max_jobs": 10})
    assert (changed.max_running, changed.max_jobs) == (3, 10)
    dropped = stores.jobs.set_team_limits("payments", {"max_running": None})
    assert (dropped.max_running, dropped.max_jobs) == (defaults.max_running, 10)
    with pytest.raises(ValueError):
        stores.jobs.set_team_limits("payments", {"max_running": -1})


def test_a_backfill_advances_only_from_the_progress_it_was_read_at(stores: Stores) -> None:
    create(stores)
    stores.jobs.put_backfill(
        "payments/job", "b1", {"state": "RUNNING", "sent": 0, "spec_version": 1}, cursor=T0, due_at=T0
    )
    current = stores.jobs.get_backfill("payments/job", "b1")
    assert current is not None and current["sent"] == 0
    one = T0 + timedelta(minutes=1)
    assert stores.jobs.update_backfill("payments/job", "b1", current, {"sent": 5}, cursor=one, due_at=one)
    assert not stores.jobs.update_backfill("payments/job", "b1", current, {"sent": 9}, cursor=one, due_at=one)
    [entry] = [e for e in stores.jobs.due(due_shard("payments/job/b1"), one) if e.backfill_id == "b1"]
    assert entry.cursor == one
    now = stores.jobs.get_backfill("payments/job", "b1")
    assert now is not None and now["sent"] == 5
    assert stores.jobs.update_backfill("payments/job", "b1", now, {"state": "DONE"}, cursor=None, due_at=None)
    assert not [e for e in stores.jobs.due(due_shard("payments/job/b1"), one) if e.backfill_id == "b1"]
    assert stores.jobs.get_backfill("payments/job", "none") is None


def test_two_workers_evicting_the_same_ended_run_get_one_slot_between_them(stores: Stores) -> None:
    """Worker A judges r2 ended; before A writes, worker B takes r2's slot. A's write must fail (r2 is no
    longer the holder A judged) and A, judging again, finds no room."""
    create(stores)
    lease = T0 + timedelta(minutes=10)
    for holder in ("r1", "r2"):
        assert stores.jobs.acquire_slot(JOB, "STATE", holder=holder, lease_until=lease, limit=2, now=T0).acquired
    interfered: list[bool] = []

    def ended_while_b_takes_the_slot(holders: dict[str, str]) -> set[str]:
        if not interfered:
            interfered.append(
                stores.jobs.acquire_slot(
                    JOB, "STATE", holder="b", lease_until=lease, limit=2, now=T0, ended=lambda hs: {"r2"} & set(hs)
                ).acquired
            )
        return {"r2"} & set(holders)

    answer = stores.jobs.acquire_slot(
        JOB, "STATE", holder="a", lease_until=lease, limit=2, now=T0, ended=ended_while_b_takes_the_slot
    )
    assert interfered == [True]
    assert not answer.acquired
    assert set(stores.jobs.slot_holders(JOB, "STATE")) == {"r1", "b"}


def test_a_worker_batch_reads_its_jobs_and_breakers_in_one_request_each(stores: Stores) -> None:
    """Specs, slot holders and open incidents of several jobs at once; breakers of several targets, every one
    asked for answered (closed when never written)."""
    create(stores)
    create(stores, "other", next_visit_at=None)
    lease = T0 + timedelta(minutes=10)
    stores.jobs.acquire_slot(JOB, "STATE", holder="r1", lease_until=lease, limit=1, now=T0)
    stores.jobs.mark_incident(JOB, "failing", is_open=True)
    snapshot = stores.jobs.snapshot([JOB, "payments/other", "payments/gone"])
    assert sorted(snapshot.specs) == [JOB, "payments/other"] and snapshot.specs[JOB].spec.name == "job"
    assert snapshot.slots[JOB] == {"r1": instant_text(lease)} and snapshot.slots["payments/other"] == {}
    assert snapshot.incidents == {JOB: {"failing"}, "payments/other": set()}
    assert snapshot.versions == {JOB: 1, "payments/other": 1}  # the spec version each STATE item was settled at
    states = stores.jobs.snapshot([JOB, "payments/other", "payments/gone"], specs=False)  # a warm worker's read
    assert states.specs == {} and states.versions == snapshot.versions and states.slots == snapshot.slots
    cool = timedelta(minutes=5)
    for _ in range(3):
        stores.jobs.breaker_failed("payments:lambda:db", now=T0, threshold=3, cool_down=cool)
    breakers = stores.jobs.breakers(["payments:lambda:db", "payments:lambda:fine"])
    assert breakers["payments:lambda:db"].holds(T0) and breakers["payments:lambda:db"] == stores.jobs.breaker(
        "payments:lambda:db"
    )
    assert not breakers["payments:lambda:fine"].holds(T0) and breakers["payments:lambda:fine"].failures == 0


def test_slots_judged_on_holders_read_earlier_still_hold_the_limit(stores: Stores) -> None:
    """A batch read the holders before another worker took the last slot: its write fails on what it read,
    and it judges again on a fresh read (a refusal on a stale read is confirmed too)."""
    create(stores)
    lease = T0 + timedelta(minutes=10)
    earlier = stores.jobs.slot_holders(JOB, "STATE")
    assert stores.jobs.acquire_slot(JOB, "STATE", holder="b", lease_until=lease, limit=1, now=T0).acquired
    late = stores.jobs.acquire_slot(JOB, "STATE", holder="a", lease_until=lease, limit=1, now=T0, read=earlier)
    assert not late.acquired and set(late.holders) == {"b"}
    stale_full = {"gone": instant_text(lease)}
    stores.jobs.release_slot(JOB, "STATE", holder="b")
    assert stores.jobs.acquire_slot(
        JOB, "STATE", holder="a", lease_until=lease, limit=1, now=T0, read=stale_full
    ).acquired


def test_a_slot_names_its_holders_attempt_and_a_renewal_on_a_stale_read_never_lowers_it(stores: Stores) -> None:
    """The value is ``<lease>@<attempt>``, given to ``ended`` with its holder. A rerun's attempt 2 renewed the
    slot after a duplicate delivery of attempt 1 read it: the duplicate's write fails on what it read, and its
    renewal, judged again, keeps attempt 2 (else a stale read of attempt 1's end could evict the rerun)."""
    create(stores)
    lease, later = T0 + timedelta(minutes=10), T0 + timedelta(minutes=20)
    take = partial(stores.jobs.acquire_slot, JOB, "STATE", holder="r1", limit=1, now=T0)
    assert take(lease_until=lease, attempt=1).acquired
    seen_by_attempt_1 = stores.jobs.slot_holders(JOB, "STATE")
    assert seen_by_attempt_1 == {"r1": f"{instant_text(lease)}@1"}
    assert take(lease_until=lease, attempt=2).acquired
    assert take(lease_until=later, attempt=1, read=seen_by_attempt_1).acquired
    assert stores.jobs.slot_holders(JOB, "STATE") == {"r1": f"{instant_text(later)}@2"}
    asked: list[dict[str, str]] = []

    def ended(holders: dict[str, str]) -> set[str]:
        asked.append(holders)
        return set()

    refused = take(lease_until=lease, attempt=1, ended=ended, holder="r2")
    assert not refused.acquired and asked[-1] == {"r1": f"{instant_text(later)}@2"}


def test_a_job_on_the_timing_wheel_waits_on_a_key_that_does_not_move_and_leaves_it_when_paused(stores: Stores) -> None:
    create(stores)
    shard = due_shard(JOB)
    slot = wheel_slot(shard, 52)
    one, visit = T0 + timedelta(minutes=1), parse_instant("2027-01-04T09:52:00Z")
    assert stores.jobs.advance(JOB, spec_version=1, old_cursor=T0, cursor=one, next_visit_at=visit, wheel_slot=slot)
    assert stores.jobs.wheel(slot) == [JOB] and stores.jobs.wheel(wheel_slot(shard, 51)) == []
    assert list(stores.jobs.due(shard, visit + timedelta(days=1))) == []  # on the wheel, not the due index
    [entry] = stores.jobs.due_states([JOB, "payments/none"])
    assert (entry.job, entry.cursor, entry.next_visit_at, entry.spec_version, entry.sk) == (JOB, one, visit, 1, "STATE")
    assert entry.audited_to == stores.jobs.audit_marks([JOB])[JOB], "read with the item: not read again to plan"
    state = stores.jobs.get_state(JOB)
    assert state is not None and state.next_visit_at == visit
    # The next visit at the same minute an hour on: the same slot; then a visit off the wheel: the due index.
    later = visit + timedelta(hours=1)
    assert stores.jobs.advance(JOB, spec_version=1, old_cursor=one, cursor=visit, next_visit_at=later, wheel_slot=slot)
    assert stores.jobs.wheel(slot) == [JOB]
    assert stores.jobs.advance(JOB, spec_version=1, old_cursor=visit, cursor=later, next_visit_at=later)
    assert stores.jobs.wheel(slot) == [] and [e.job for e in stores.jobs.due(shard, later)] == [JOB]
    assert [e.audited_to for e in stores.jobs.due(shard, later)] == [None], "the due index does not carry it"
    assert stores.jobs.advance(
        JOB, spec_version=1, old_cursor=later, cursor=later, next_visit_at=visit, wheel_slot=slot
    )
    stored = stores.jobs.get(JOB)
    assert stored is not None
    paused = stores.jobs.set_state(stored, "PAUSED", now=T0, principal="a", reason="x", next_visit_at=None, cursor=T0)
    assert stores.jobs.wheel(slot) == [] and stores.jobs.due_states([JOB]) == []
    assert not stores.jobs.advance(JOB, spec_version=1, old_cursor=T0, cursor=one, next_visit_at=visit, wheel_slot=slot)
    stores.jobs.set_state(paused, "ACTIVE", now=T0, principal="a", reason=None, next_visit_at=visit, cursor=T0)
    assert stores.jobs.wheel(slot) == [] and [e.job for e in stores.jobs.due(shard, visit)] == [JOB]  # resumed: due


def test_the_wheels_marks_move_only_from_what_was_read(stores: Stores) -> None:
    assert stores.jobs.wheel_marks() == {}
    first, second = parse_instant("2027-01-04T09:02:00Z"), parse_instant("2027-01-04T09:03:00Z")
    assert stores.jobs.mark_wheel({0: first, 1: first}, read={})
    assert stores.jobs.wheel_marks() == {0: first, 1: first}
    assert not stores.jobs.mark_wheel({0: second}, read={})  # another tick moved it since
    assert not stores.jobs.mark_wheel({0: second, 1: second}, read={0: first, 1: second})
    assert stores.jobs.mark_wheel({1: second}, read={1: first})
    assert stores.jobs.wheel_marks() == {0: first, 1: second}
