"""Circuit breakers per (team, target): consecutive failures, the open-until instant, the runs held back; and
each team's list of its open breakers."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Literal

from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import batch_get, from_item, to_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.adapters.items import audit_values
from jobsched.core.names import TARGET_PREFIX, JobsKeys
from jobsched.core.records import MAX_HELD_LISTED, BreakerState, breaker_team
from jobsched.core.runs import instant_text

log = logging.getLogger(__name__)


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
        until = instant_text(now + cool_down)
        opened = update_if(
            self.db,
            TableName=self.table,
            Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER),
            UpdateExpression="SET open_until = :until",
            ConditionExpression="attribute_not_exists(open_until) OR open_until <= :now",
            ExpressionAttributeValues=to_values({":until": until, ":now": instant_text(now)}),
        )
        if not opened:
            return None  # open already: another failure of the same burst
        self._list_open(key, until)
        return "reopened" if was_open else "opened"

    def breaker_succeeded(self, key: str) -> bool:
        """Close and forget the breaker; True if it had been open (its incident resolves)."""
        response = self.db.delete_item(
            TableName=self.table, Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER), ReturnValues="ALL_OLD"
        )
        was_open = "open_until" in from_item(response.get("Attributes") or {})
        if was_open:
            self.db.update_item(
                TableName=self.table,
                Key=self._team_list_key(breaker_team(key)),
                UpdateExpression="REMOVE #key",
                ExpressionAttributeNames={"#key": key},
            )
        return was_open

    def close_breaker(self, key: str, *, by: str, reason: str, now: datetime) -> bool:
        """An admin closes the breaker: the audit entry first (under "TARGET#{key}", kept after the breaker
        is gone), then the close; True if it was open."""
        audit = audit_values(TARGET_PREFIX + key, 0, now, by, "close_breaker", None, reason=reason)
        self.db.put_item(TableName=self.table, Item=to_item(audit))
        return self.breaker_succeeded(key)

    def breaker_holds(self, key: str, held: str) -> None:
        """Note a run (or DAG task) the open breaker held back; a set, so a redelivered hold adds nothing.
        Bounded: past MAX_HELD_LISTED the breaker still holds them, it only stops naming them."""
        update_if(
            self.db,
            TableName=self.table,
            Key=self._key(TARGET_PREFIX + key, JobsKeys.BREAKER),
            UpdateExpression="ADD #held :held",
            ConditionExpression="attribute_exists(open_until) AND (attribute_not_exists(#held) OR size(#held) < :cap)",
            ExpressionAttributeNames={"#held": JobsKeys.HELD},
            ExpressionAttributeValues={**to_values({":cap": MAX_HELD_LISTED}), ":held": {"SS": [held]}},
        )

    def open_breakers(self, team: str) -> dict[str, BreakerState]:
        """The team's breakers that opened and have not closed since (open or half-open), with what they hold."""
        response = self.db.get_item(
            TableName=self.table,
            Key=self._team_list_key(team),
            ConsistentRead=True,
        )
        listed = from_item(response.get("Item") or {})
        keys = [name for name in listed if name not in (JobsKeys.PK, JobsKeys.SK)]
        found = self.breakers(keys) if keys else {}
        # A breaker item gone (closed) while the list still names it: a crash between the two writes.
        return {key: state for key, state in sorted(found.items()) if state.open_until is not None}

    def _list_open(self, key: str, until: str) -> None:
        """Name the breaker on its team's list. The list is a convenience for people: a breaker whose listing
        fails (an item grown past its size by a team with thousands of failing targets) still holds runs."""
        try:
            self.db.update_item(
                TableName=self.table,
                Key=self._team_list_key(breaker_team(key)),
                UpdateExpression="SET #key = :until",
                ExpressionAttributeNames={"#key": key},
                ExpressionAttributeValues=to_values({":until": until}),
            )
        except ClientError as error:
            log.warning("breaker %s not listed for its team: %s", key, error)

    def _team_list_key(self, team: str) -> dict[str, object]:
        """The item listing a team's open breakers."""
        return self._key(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_BREAKERS)
