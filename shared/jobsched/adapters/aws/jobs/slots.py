"""max_running slots (a job's and a team's), released lazily, and the team limits they enforce."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import from_item, is_conditional_failure, to_values
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.limits import TeamLimits
from jobsched.core.names import JobsKeys
from jobsched.core.records import SlotResult, slots_to_evict
from jobsched.core.runs import instant_text


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
        ended: Callable[[list[str]], set[str]] | None = None,
    ) -> SlotResult:
        """Take one of ``limit`` slots for ``holder`` (idempotent for the same holder).

        Slots are released lazily: a run that ends writes nothing here. When the slots are full, the
        holders whose runs have ended (``ended``: which of these holders' runs are terminal) and those
        whose lease has expired (their worker died) are evicted in the same conditional write that takes
        the slot: one write per run instead of two, plus strongly consistent reads (a fifth of the price).
        (Writing blind first and reading only on refusal would cost more: with lazy release the slots are
        usually full of ended holders, and a refused conditional write is billed like a write.)
        """
        holders = self.slot_holders(pk, sk)
        for _ in range(3):
            stale = slots_to_evict(holders, holder, now=now, limit=limit, ended=ended)
            if stale is None:
                return SlotResult(False, holders)
            names = {"#h": holder}
            values: dict[str, Any] = {":lease": instant_text(lease_until), ":room": limit + len(stale)}
            update = "SET slots.#h = :lease"
            conditions = ["(attribute_exists(slots.#h) OR attribute_not_exists(slots) OR size(slots) < :room)"]
            if stale:
                update += " REMOVE " + ", ".join(f"slots.#s{index}" for index in range(len(stale)))
            for index, evicted in enumerate(stale):
                names[f"#s{index}"] = evicted
                values[f":s{index}"] = holders[evicted]
                conditions.append(f"slots.#s{index} = :s{index}")  # still the holder we judged ended
            try:
                self.db.update_item(
                    TableName=self.table,
                    Key=self._key(pk, sk),
                    UpdateExpression=update,
                    ConditionExpression=" AND ".join(conditions),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=to_values(values),
                )
                return SlotResult(True, {})
            except ClientError as error:
                if not is_conditional_failure(error):
                    if error.response.get("Error", {}).get("Code") == "ValidationException":
                        # The item has no ``slots`` map yet (a quota item written without one).
                        self._ensure_slots(pk, sk)
                        holders = self.slot_holders(pk, sk)
                        continue
                    raise
            holders = self.slot_holders(pk, sk)  # another worker changed them: judge again
        return SlotResult(False, holders)

    def release_slot(self, pk: str, sk: str, *, holder: str) -> None:
        self.db.update_item(
            TableName=self.table,
            Key=self._key(pk, sk),
            UpdateExpression="REMOVE slots.#h",
            ExpressionAttributeNames={"#h": holder},
        )

    def slot_holders(self, pk: str, sk: str) -> dict[str, str]:
        response = self.db.get_item(TableName=self.table, Key=self._key(pk, sk), ConsistentRead=True)
        item = from_item(response.get("Item") or {})
        slots = item.get("slots") or {}
        return {str(k): str(v) for k, v in slots.items()}

    def _ensure_slots(self, pk: str, sk: str) -> None:
        try:
            self.db.update_item(
                TableName=self.table,
                Key=self._key(pk, sk),
                UpdateExpression="SET slots = :empty",
                ConditionExpression="attribute_not_exists(slots)",
                ExpressionAttributeValues=to_values({":empty": {}}),
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise

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
