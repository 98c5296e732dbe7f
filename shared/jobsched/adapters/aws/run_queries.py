"""Run search on the Runs table: one job's runs in a run-id (time) range, filtered by DynamoDB as it reads."""

from __future__ import annotations

from typing import Any

from jobsched.adapters.aws.dynamo import from_item, to_values
from jobsched.core.names import RunsKeys
from jobsched.core.records import Run
from jobsched.watch.run_search import RunFilter


def matching_runs(
    db: Any, table: str, job: str, *, first: str, last: str, where: RunFilter, evaluate: int, limit: int
) -> tuple[list[Run], str | None]:
    """As ``RunQueries.matching``: a Query newest first with the filter as a FilterExpression (read units are
    spent on what is read, so ``evaluate`` bounds the cost; the filter only saves the transfer)."""
    names = {"#job": RunsKeys.PK, "#run": RunsKeys.SK}
    values: dict[str, Any] = {":job": job, ":first": first, ":last": last}
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#job = :job AND #run BETWEEN :first AND :last",
        "ScanIndexForward": False,
    }
    conditions = _filter(where, names, values)
    if conditions:
        request["FilterExpression"] = " AND ".join(conditions)
    request["ExpressionAttributeNames"] = names
    request["ExpressionAttributeValues"] = to_values(values)
    found: list[Run] = []
    evaluated = 0
    while True:
        response = db.query(**request, Limit=evaluate - evaluated)
        evaluated += int(response.get("ScannedCount", 0))
        found += [Run.from_values(from_item(item)) for item in response.get("Items", [])]
        last_key = response.get("LastEvaluatedKey")
        if last_key is None:
            return found, None
        if len(found) >= limit or evaluated >= evaluate:
            return found, str(from_item(last_key)[RunsKeys.SK])
        request["ExclusiveStartKey"] = last_key


def _filter(where: RunFilter, names: dict[str, str], values: dict[str, Any]) -> list[str]:
    conditions = []
    if where.statuses:
        names["#status"] = "status"
        keys = []
        for index, status in enumerate(where.statuses):
            values[f":s{index}"] = status.value
            keys.append(f":s{index}")
        conditions.append(f"#status IN ({', '.join(keys)})")
    if where.trigger is not None:
        names["#trigger"] = "trigger"
        values[":trigger"] = where.trigger
        conditions.append("#trigger = :trigger")
    if where.min_attempts is not None:
        values[":attempts"] = where.min_attempts
        conditions.append("attempt >= :attempts")
    if where.error:
        names["#error"] = "error"
        values[":error"] = where.error
        conditions.append("contains(#error, :error)")
    return conditions
