"""Slots and team limits in memory: the same items and conditions as ``aws.jobs.slots`` (the contract suite
runs both)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial

from jobsched.adapters.items import SlotJudgement, take_slots_in_rounds
from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.core.limits import TeamLimits
from jobsched.core.names import JobsKeys
from jobsched.core.records import SlotLease, SlotResult, SlotsTaken
from jobsched.tenancy.quotas import CachedLimits


class MemorySlots:
    table: MemoryTable
    team_defaults: TeamLimits
    _limits: CachedLimits
    _applied: Callable[[str, str, Callable[[Item | None], Item | None]], bool]

    # -------------------------------------------------------------------------------- slots

    def acquire_slot(
        self,
        pk: str,
        sk: str,
        *,
        holder: str,
        lease_until: datetime,
        limit: int,
        now: datetime,
        ended: Callable[[dict[str, str]], set[str]] | None = None,
        read: dict[str, str] | None = None,
        attempt: int | None = None,
    ) -> SlotResult:
        lease = SlotLease(lease_until, attempt)
        return SlotResult.of(
            holder, self.acquire_slots(pk, sk, leases={holder: lease}, limit=limit, now=now, ended=ended, read=read)
        )

    def acquire_slots(
        self,
        pk: str,
        sk: str,
        *,
        leases: Mapping[str, datetime | SlotLease],
        limit: int,
        now: datetime,
        ended: Callable[[dict[str, str]], set[str]] | None = None,
        read: dict[str, str] | None = None,
    ) -> SlotsTaken:
        def write(judged: SlotJudgement, holders: dict[str, str]) -> bool:
            expected, written = judged.expected(holders), judged.values(holders, leases)
            take = partial(_take_slots, judged=judged, written=written, limit=limit, expected=expected)
            return self._applied(pk, sk, take)

        return take_slots_in_rounds(
            read if read is not None else self.slot_holders(pk, sk),
            list(leases),
            confirmed=read is None,  # a read of its own is current; one the caller made may be stale
            reread=partial(self.slot_holders, pk, sk),
            write=write,
            now=now,
            limit=limit,
            ended=ended,
        )

    def release_slot(self, pk: str, sk: str, *, holder: str) -> None:
        self.release_slots(pk, sk, holders=[holder])

    def release_slots(self, pk: str, sk: str, *, holders: list[str]) -> None:
        def release(item: Item | None) -> Item:
            item = item or {}
            slots = item.setdefault("slots", {})
            for holder in holders:
                slots.pop(holder, None)
            return item

        self.table.update(pk, sk, release)

    def slot_holders(self, pk: str, sk: str) -> dict[str, str]:
        item = self.table.get(pk, sk) or {}
        return {str(k): str(v) for k, v in (item.get("slots") or {}).items()}

    # ---------------------------------------------------------------------------- team limits

    def team_limits(self, team: str, *, now: float | None = None) -> TeamLimits:
        return self._limits.get(team, now=now)

    def set_team_limits(self, team: str, overrides: dict[str, int | None]) -> TeamLimits:
        self.team_defaults.with_overrides(overrides)  # refuses unknown names and bad values before writing
        self._limits.forget(team)

        def apply(item: Item | None) -> Item:
            item = item or {}
            for name, value in overrides.items():
                if value is None:
                    item.pop(name, None)
                else:
                    item[name] = value
            return item

        self.table.update(f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.QUOTA, apply)
        return self.team_limits(team)

    def _overrides(self, team: str) -> dict[str, int]:
        item = self.table.get(f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.QUOTA) or {}
        return {name: int(item[name]) for name in TeamLimits().as_dict() if name in item}


def _take_slots(
    item: Item | None, *, judged: SlotJudgement, written: dict[str, str], limit: int, expected: dict[str, str]
) -> Item:
    """The slot write's condition and change (as ``SlotsStore._slot_write``): the present and the evicted still
    hold exactly the values they were judged by, and at most ``limit`` slots are left."""
    item = item or {}
    slots = dict(item.get("slots") or {})
    if any(slots.get(h) != held for h, held in expected.items()):
        raise ConditionFailed
    if judged.granted and len(slots) > limit + len(judged.evicted) - len(judged.granted):
        raise ConditionFailed
    for evicted in judged.evicted:
        slots.pop(evicted)
    slots.update(written)
    item["slots"] = slots
    return item
