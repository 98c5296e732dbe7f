"""max_running slots (a job's and a team's), released lazily, and the team limits they enforce."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import from_item, is_conditional_failure, is_missing_map, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.adapters.items import SlotJudgement, take_slots_in_rounds
from jobsched.core.limits import TeamLimits
from jobsched.core.names import JobsKeys
from jobsched.core.records import SlotLease, SlotResult, SlotsTaken


class SlotsStore(JobsTable):
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
        """Take one of ``limit`` slots for ``holder`` (idempotent for the same holder): ``acquire_slots``."""
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
        """Take slots for as many of ``leases``' holders as there is room for, in order, in one write.

        Slots are released lazily: a run that ends writes nothing here. When the slots are full, the
        holders whose runs have ended (``ended``: which of these holders' runs are terminal) and those
        whose lease has expired (their worker died) are evicted in the same conditional write that takes
        the slots. (Writing blind first and reading only on refusal would cost more: with lazy release the
        slots are usually full of ended holders, and a refused conditional write is billed like a write.)
        The first read is eventually consistent (half the price), or ``read`` when the caller has them already
        (a worker batch's ``JobsSnapshot``): the write's condition is on exactly what was read, so a stale read
        fails the write and the holders are read again, strongly; so is a refusal.
        """

        def write(judged: SlotJudgement, holders: dict[str, str]) -> bool:
            try:
                self.db.update_item(**self._slot_write(pk, sk, judged, holders, leases, limit))
                return True
            except ClientError as error:
                if not is_conditional_failure(error):
                    if not is_missing_map(error):
                        raise
                    self._ensure_map(pk, sk, "slots")  # a quota item without its ``slots`` map yet
                return False

        return take_slots_in_rounds(
            read if read is not None else self.slot_holders(pk, sk, consistent=False),
            list(leases),
            confirmed=False,
            reread=partial(self.slot_holders, pk, sk),
            write=write,
            now=now,
            limit=limit,
            ended=ended,
        )

    def _slot_write(
        self,
        pk: str,
        sk: str,
        judged: SlotJudgement,
        holders: dict[str, str],
        leases: Mapping[str, datetime | SlotLease],
        limit: int,
    ) -> dict[str, Any]:
        """The write: the granted holders' slots set, the present ones' leases renewed, the evicted removed;
        on condition that the present and the evicted still hold exactly the values they were judged by, and
        the slots left after it number at most ``limit``."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        sets, conditions = [], []
        for index, (holder, value) in enumerate(judged.values(holders, leases).items()):
            names[f"#h{index}"], values[f":l{index}"] = holder, value
            sets.append(f"slots.#h{index} = :l{index}")
            if holder in judged.present:
                values[f":p{index}"] = holders[holder]
                conditions.append(f"slots.#h{index} = :p{index}")
        for index, evicted in enumerate(judged.evicted):
            names[f"#s{index}"], values[f":s{index}"] = evicted, holders[evicted]
            conditions.append(f"slots.#s{index} = :s{index}")
        if judged.granted:
            values[":most"] = limit + len(judged.evicted) - len(judged.granted)
            conditions.append("(attribute_not_exists(slots) OR size(slots) <= :most)")
        update = "SET " + ", ".join(sets)
        if judged.evicted:
            update += " REMOVE " + ", ".join(f"slots.#s{index}" for index in range(len(judged.evicted)))
        return {
            "TableName": self.table,
            "Key": self._key(pk, sk),
            "UpdateExpression": update,
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_values(values),
        }

    def release_slot(self, pk: str, sk: str, *, holder: str) -> None:
        self.release_slots(pk, sk, holders=[holder])

    def release_slots(self, pk: str, sk: str, *, holders: list[str]) -> None:
        if not holders:
            return
        names = {f"#h{index}": holder for index, holder in enumerate(holders)}
        self.db.update_item(
            TableName=self.table,
            Key=self._key(pk, sk),
            UpdateExpression="REMOVE " + ", ".join(f"slots.{name}" for name in names),
            ExpressionAttributeNames=names,
        )

    def slot_holders(self, pk: str, sk: str, *, consistent: bool = True) -> dict[str, str]:
        response = self.db.get_item(TableName=self.table, Key=self._key(pk, sk), ConsistentRead=consistent)
        item = from_item(response.get("Item") or {})
        slots = item.get("slots") or {}
        return {str(k): str(v) for k, v in slots.items()}

    def team_limits(self, team: str, *, now: float | None = None) -> TeamLimits:
        """The platform's defaults with the team's overrides, cached for a minute (``CachedLimits``)."""
        return self._limits.get(team, now=now)

    def team_overrides(self, team: str) -> dict[str, int]:
        key = self._key(f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.QUOTA)
        item = from_item(self.db.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item") or {})
        return {name: int(item[name]) for name in TeamLimits().as_dict() if name in item}

    def set_team_limits(self, team: str, overrides: dict[str, int | None]) -> TeamLimits:
        """Set (an int) or drop (None: back to the platform default) some of a team's limits."""
        self.team_defaults.with_overrides(overrides)  # refuses unknown names and bad values before writing
        self._limits.forget(team)
        names = {f"#{name}": name for name in overrides}
        kept = {f":{name}": value for name, value in overrides.items() if value is not None}
        parts = [f"#{name} = :{name}" for name, value in overrides.items() if value is not None]
        dropped = [f"#{name}" for name, value in overrides.items() if value is None]
        update = ("SET " + ", ".join(parts) if parts else "") + (" REMOVE " + ", ".join(dropped) if dropped else "")
        if update:
            request: dict[str, Any] = {
                "TableName": self.table,
                "Key": self._key(f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.QUOTA),
                "UpdateExpression": update.strip(),
                "ExpressionAttributeNames": names,
            }
            if kept:
                request["ExpressionAttributeValues"] = to_values(kept)
            self.db.update_item(**request)
        return self.team_limits(team)
