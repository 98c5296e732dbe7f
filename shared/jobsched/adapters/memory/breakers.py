"""Circuit breakers in memory: the same items and conditions as ``aws.jobs.breakers`` (the contract suite
runs both)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal

from jobsched.adapters.items import audit_values
from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.core.names import TARGET_PREFIX, JobsKeys
from jobsched.core.records import MAX_HELD_LISTED, BreakerState, breaker_team
from jobsched.core.runs import instant_text


class MemoryBreakers:
    table: MemoryTable
    _put_audit: Callable[[dict[str, Any]], None]  # the jobs table's audit items (MemoryJobs)

    def breaker(self, key: str) -> BreakerState:
        return BreakerState.from_values(self.table.get(TARGET_PREFIX + key, JobsKeys.BREAKER, consistent=False) or {})

    def breakers(self, keys: list[str]) -> dict[str, BreakerState]:
        wanted = [(TARGET_PREFIX + key, JobsKeys.BREAKER) for key in dict.fromkeys(keys)]
        found = {
            str(item[JobsKeys.PK]).removeprefix(TARGET_PREFIX): BreakerState.from_values(item)
            for item in self.table.get_batch(wanted, consistent=False)
        }
        return {key: found.get(key, BreakerState()) for key in keys}

    def breaker_failed(
        self, key: str, *, now: datetime, threshold: int, cool_down: timedelta
    ) -> Literal["opened", "reopened"] | None:
        def count(item: Item | None) -> Item:
            item = item or {}
            item["failures"] = int(item.get("failures", 0)) + 1
            return item

        values = self.table.update(TARGET_PREFIX + key, JobsKeys.BREAKER, count) or {}
        if int(values["failures"]) < threshold:
            return None
        was_open = "open_until" in values
        until = instant_text(now + cool_down)

        def open_breaker(item: Item | None) -> Item:
            item = item or {}
            if item.get("open_until") and item["open_until"] > instant_text(now):
                raise ConditionFailed
            item["open_until"] = until
            return item

        try:
            self.table.update(TARGET_PREFIX + key, JobsKeys.BREAKER, open_breaker)
        except ConditionFailed:
            return None

        def listed(item: Item | None) -> Item:
            return (item or {}) | {key: until}

        self.table.update(JobsKeys.TEAM_PREFIX + breaker_team(key), JobsKeys.TEAM_BREAKERS, listed)
        return "reopened" if was_open else "opened"

    def breaker_succeeded(self, key: str) -> bool:
        before = self.table.delete(TARGET_PREFIX + key, JobsKeys.BREAKER)
        was_open = bool(before and "open_until" in before)
        if was_open:

            def unlisted(item: Item | None) -> Item | None:
                if item is not None:
                    item.pop(key, None)
                return item

            self.table.update(JobsKeys.TEAM_PREFIX + breaker_team(key), JobsKeys.TEAM_BREAKERS, unlisted)
        return was_open

    def close_breaker(self, key: str, *, by: str, reason: str, now: datetime) -> bool:
        self._put_audit(audit_values(TARGET_PREFIX + key, 0, now, by, "close_breaker", None, reason=reason))
        return self.breaker_succeeded(key)

    def breaker_holds(self, key: str, held: str) -> None:
        def add(item: Item | None) -> Item:
            refs = set((item or {}).get(JobsKeys.HELD) or ())
            if item is None or "open_until" not in item or len(refs) >= MAX_HELD_LISTED:
                raise ConditionFailed
            item[JobsKeys.HELD] = refs | {held}
            return item

        with contextlib.suppress(ConditionFailed):
            self.table.update(TARGET_PREFIX + key, JobsKeys.BREAKER, add)

    def open_breakers(self, team: str) -> dict[str, BreakerState]:
        listed = self.table.get(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_BREAKERS) or {}
        keys = [name for name in listed if name not in (JobsKeys.PK, JobsKeys.SK)]
        found = self.breakers(keys) if keys else {}
        return {key: state for key, state in sorted(found.items()) if state.open_until is not None}
