"""Circuit breakers per (team, target): consecutive failures and the open-until instant."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from jobsched.adapters.aws.dynamo import batch_get, from_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.names import TARGET_PREFIX, JobsKeys
from jobsched.core.records import BreakerState
from jobsched.core.runs import instant_text


class BreakersStore(JobsTable):
    def breaker(self, key: str) -> BreakerState:
        response = self.db.get_item(
            TableName=self.table, Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER), ConsistentRead=False
        )
        return BreakerState.from_values(from_item(response.get("Item") or {}))

    def breakers(self, keys: list[str]) -> dict[str, BreakerState]:
        """Several breakers in one BatchGetItem (eventually consistent); every key asked is answered."""
        wanted = [self._key(TARGET_PREFIX + key, JobsKeys.BREAKER) for key in dict.fromkeys(keys)]
        found = {
            str(values[JobsKeys.PK]).removeprefix(TARGET_PREFIX): BreakerState.from_values(values)
            for values in batch_get(self.db, self.table, wanted, ConsistentRead=False)
        }
        return {key: found.get(key, BreakerState()) for key in keys}

    def breaker_failed(
        self, key: str, *, now: datetime, threshold: int, cool_down: timedelta
    ) -> Literal["opened", "reopened"] | None:
        """Count a failure; open the breaker at ``threshold`` consecutive failures. "opened" only for the
        writer that moved it from closed to open (it escalates), "reopened" after a failed half-open try."""
        response = self.db.update_item(
            TableName=self.table,
            Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER),
            UpdateExpression="ADD failures :one",
            ExpressionAttributeValues=to_values({":one": 1}),
            ReturnValues="ALL_NEW",
        )
        values = from_item(response["Attributes"])
        if int(values["failures"]) < threshold:
            return None
        was_open = "open_until" in values
        opened = update_if(
            self.db,
            TableName=self.table,
            Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER),
            UpdateExpression="SET open_until = :until",
            ConditionExpression="attribute_not_exists(open_until) OR open_until <= :now",
            ExpressionAttributeValues=to_values({":until": instant_text(now + cool_down), ":now": instant_text(now)}),
        )
        if not opened:
            return None  # open already: another failure of the same burst
        return "reopened" if was_open else "opened"

    def breaker_succeeded(self, key: str) -> bool:
        """Close and forget the breaker; True if it had been open (its incident resolves)."""
        response = self.db.delete_item(
            TableName=self.table, Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER), ReturnValues="ALL_OLD"
        )
        return "open_until" in from_item(response.get("Attributes") or {})
