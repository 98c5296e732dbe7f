"""A job's health item on the Jobs table: pk job, sk "HEALTH" (``core.health``). Its freshness part is written
conditionally on its version (the lifecycle's success and the checker's judgement may race); its baseline part
blindly (two runs of one job ending together lose one sample, which a baseline of medians does not notice).
While a freshness judgement is due, the item is on the sparse freshness index (shard, instant)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from jobsched.adapters.aws.dynamo import every_item, from_item, to_values, update_if
from jobsched.adapters.aws.jobs.table import JobsTable
from jobsched.core.baseline import Baseline
from jobsched.core.freshness import FreshnessState
from jobsched.core.health import HealthItem, fresh_shard
from jobsched.core.names import JobsKeys
from jobsched.core.runs import instant_text


class HealthStore(JobsTable):
    def health(self, job: str, *, consistent: bool = True) -> HealthItem:
        found = self.db.get_item(
            TableName=self.table, Key=self._key(job, JobsKeys.HEALTH), ConsistentRead=consistent
        ).get("Item")
        return HealthItem.from_values(from_item(found) if found else None)

    def put_health(
        self, job: str, *, freshness: FreshnessState | None = None, version: int = 0, baseline: Baseline | None = None
    ) -> bool:
        sets, removes = [], []
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        request: dict[str, Any] = {"TableName": self.table, "Key": self._key(job, JobsKeys.HEALTH)}
        if baseline is not None:
            sets.append("baseline = :baseline")
            values[":baseline"] = baseline.as_values()
        if freshness is not None:
            sets += ["freshness = :freshness", "fresh_version = :next"]
            values |= {":freshness": freshness.as_values(), ":next": version + 1}
            names |= {"#shard": JobsKeys.FRESH_SHARD, "#check": JobsKeys.FRESH_CHECK_AT}
            if freshness.check_at is not None:
                sets += ["#shard = :shard", "#check = :check"]
                values |= {":shard": fresh_shard(job), ":check": instant_text(freshness.check_at)}
            else:
                removes += ["#shard", "#check"]
            if version:
                request["ConditionExpression"] = "fresh_version = :version"
                values[":version"] = version
            else:
                request["ConditionExpression"] = "attribute_not_exists(fresh_version)"
        if not sets:
            return True
        request["UpdateExpression"] = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        request["ExpressionAttributeValues"] = to_values(values)
        if names:
            request["ExpressionAttributeNames"] = names
        return update_if(self.db, **request)

    def drop_freshness(self, job: str) -> None:
        self.db.update_item(
            TableName=self.table,
            Key=self._key(job, JobsKeys.HEALTH),
            UpdateExpression="REMOVE freshness, fresh_version, #shard, #check",
            ExpressionAttributeNames={"#shard": JobsKeys.FRESH_SHARD, "#check": JobsKeys.FRESH_CHECK_AT},
        )

    def note_team_freshness(self, team: str, name: str, view: dict[str, str] | None) -> None:
        key = self._key(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_FRESHNESS)
        if view is None:
            self.db.update_item(
                TableName=self.table, Key=key, UpdateExpression="REMOVE #job", ExpressionAttributeNames={"#job": name}
            )
            return
        self.db.update_item(
            TableName=self.table,
            Key=key,
            UpdateExpression="SET #job = :view",
            ExpressionAttributeNames={"#job": name},
            ExpressionAttributeValues=to_values({":view": view}),
        )

    def team_freshness(self, team: str) -> dict[str, dict[str, str]]:
        found = self.db.get_item(
            TableName=self.table, Key=self._key(JobsKeys.TEAM_PREFIX + team, JobsKeys.TEAM_FRESHNESS)
        ).get("Item")
        values = from_item(found) if found else {}
        return {name: dict(view) for name, view in values.items() if isinstance(view, dict)}

    def freshness_due(self, shard: int, until: datetime) -> Iterator[str]:
        for values in every_item(
            self.db,
            TableName=self.table,
            IndexName=JobsKeys.FRESHNESS_INDEX,
            KeyConditionExpression="#shard = :shard AND #check <= :until",
            ExpressionAttributeNames={"#shard": JobsKeys.FRESH_SHARD, "#check": JobsKeys.FRESH_CHECK_AT},
            ExpressionAttributeValues=to_values({":shard": shard, ":until": instant_text(until)}),
        ):
            yield str(values[JobsKeys.PK])
