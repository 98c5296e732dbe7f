"""Slot values and the judgement of their holders' ends (#51): which reads are proof that a holding ended."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jobsched.adapters.items import RunKey, ended_holders
from jobsched.core.names import RunsKeys
from jobsched.core.records import SlotLease
from jobsched.core.runs import parse_instant

UNTIL = parse_instant("2027-01-04T09:15:00Z")


def test_a_slot_value_names_its_attempt_and_one_written_before_names_none() -> None:
    assert SlotLease(UNTIL, 3).text() == "2027-01-04T09:15:00Z@3"
    assert SlotLease.parse("2027-01-04T09:15:00Z@3") == SlotLease(UNTIL, 3)
    assert SlotLease.parse("2027-01-04T09:15:00Z") == SlotLease(UNTIL, None)
    assert SlotLease.of(UNTIL) == SlotLease(UNTIL)


def test_a_renewal_never_lowers_the_attempt_a_slot_names() -> None:
    assert SlotLease(UNTIL, 1).renewing("2027-01-04T09:00:00Z@2") == "2027-01-04T09:15:00Z@2"
    assert SlotLease(UNTIL, 3).renewing("2027-01-04T09:00:00Z@2") == "2027-01-04T09:15:00Z@3"
    assert SlotLease(UNTIL, 1).renewing("2027-01-04T09:00:00Z") == "2027-01-04T09:15:00Z@1"
    assert SlotLease(UNTIL).renewing(None) == "2027-01-04T09:15:00Z"


class Reads:
    """Records (keys, consistent) asked; answers eventually consistent reads from ``eventual``, strong from
    ``strong``."""

    def __init__(self, eventual: dict[RunKey, tuple[str, int]], strong: dict[RunKey, tuple[str, int]]) -> None:
        self.eventual, self.strong = eventual, strong
        self.asked: list[tuple[list[RunKey], bool]] = []

    def __call__(self, keys: list[RunKey], consistent: bool) -> Iterable[dict[str, Any]]:
        self.asked.append((keys, consistent))
        found = self.strong if consistent else self.eventual
        return [
            {RunsKeys.PK: k[0], RunsKeys.SK: k[1], "status": found[k][0], "attempt": found[k][1]}
            for k in keys
            if k in found
        ]


A, B, C, D, E = (("team/job", run) for run in ("a", "b", "c", "d", "e"))


def test_an_eventually_consistent_end_at_the_slots_attempt_or_later_is_proof_enough() -> None:
    reads = Reads({A: ("SUCCEEDED", 1), B: ("FAILED", 3), C: ("RUNNING", 1)}, {})
    assert ended_holders({A: 1, B: 2, C: 1}, reads) == {A: 1, B: 3}, "each with the attempt it ended at"
    assert reads.asked == [([A, B, C], False)], "one read at half the price; a running record is not asked again"


def test_what_is_not_proof_is_read_again_strongly() -> None:
    """A stale end from before a rerun (an earlier attempt), the audit's MISSED (claimable at the same attempt),
    and a slot written before #51 (no attempt): asked again strongly, and judged by that read alone."""
    eventual = {A: ("SUCCEEDED", 1), B: ("MISSED", 1), C: ("SUCCEEDED", 1)}
    strong = {A: ("RUNNING", 2), B: ("RUNNING", 1), C: ("SUCCEEDED", 1), D: ("CANCELLED", 1)}
    reads = Reads(eventual, strong)
    assert ended_holders({A: 2, B: 1, C: 2, D: None}, reads) == {C: 1, D: 1}
    assert reads.asked == [([A, B, C], False), ([A, B, C, D], True)]


def test_nothing_asked_when_no_holder_is_in_question() -> None:
    reads = Reads({}, {})
    assert ended_holders({E: 1}, reads) == {}
    assert reads.asked == [([E], False)], "a run gone (retention) is not read again: its lease frees the slot"


def test_a_proven_end_covers_its_attempt_and_those_before_and_the_oldest_is_forgotten() -> None:
    from jobsched.pipeline.claiming import ProvenEnds

    proven = ProvenEnds(limit=2)
    proven.add(A, 2)
    assert proven.covers(A, 1) and proven.covers(A, 2) and not proven.covers(A, 3), "a rerun's holding is not"
    proven.add(A, 1)
    assert proven.covers(A, 2), "never lowered"
    proven.add(B, 1)
    proven.add(C, 1)
    assert not proven.covers(A, 1) and proven.covers(B, 1) and proven.covers(C, 1), "at most two kept"
