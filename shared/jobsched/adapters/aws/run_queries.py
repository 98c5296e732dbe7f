"""Reading a job's runs by run id (time) range on the Runs table: pages, the lost-message audit's keys, a run that
succeeded in a window, which runs ended, and run search (filtered by DynamoDB as it reads)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from jobsched.adapters.aws.dynamo import batch_get, every_item, from_item, to_values
from jobsched.adapters.aws.runs_table import RunsTable
from jobsched.adapters.items import MAX_WAIT_SCAN, ended_holders, succeeded_in
from jobsched.core.names import RunsKeys
from jobsched.core.run_records import Run
from jobsched.core.runs import scheduled_run_id
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


class RunQueriesStore(RunsTable):
    """A job's runs read by run id (time) range: pages, the audit's keys, a succeeded run, search, ended ones."""

    def matching(
        self, job: str, *, first: str, last: str, where: RunFilter, evaluate: int, limit: int
    ) -> tuple[list[Run], str | None]:
        return matching_runs(
            self.db, self.table, job, first=first, last=last, where=where, evaluate=evaluate, limit=limit
        )

    def history(
        self, job: str, *, limit: int = 50, newest_first: bool = True, between: tuple[str, str] | None = None
    ) -> list[Run]:
        return self.page(job, limit=limit, newest_first=newest_first, between=between)[0]

    def page(
        self,
        job: str,
        *,
        limit: int = 50,
        newest_first: bool = True,
        after_run_id: str | None = None,
        between: tuple[str, str] | None = None,
    ) -> tuple[list[Run], str | None]:
        """Runs of ``job`` by run id (time order), ``limit`` at a time; the second value continues. ``between``:
        only run ids in that range (inclusive; run ids begin with their instant, so it is a time range)."""
        condition, values = "#job = :job", {":job": job}
        if between is not None:
            condition += " AND #run BETWEEN :first AND :last"
            values |= {":first": between[0], ":last": between[1]}
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {"#job": RunsKeys.PK} | ({"#run": RunsKeys.SK} if between else {}),
            "ExpressionAttributeValues": to_values(values),
            "ScanIndexForward": not newest_first,
            "Limit": limit,
        }
        if after_run_id:
            request["ExclusiveStartKey"] = self._key(job, after_run_id)
        response = self.db.query(**request)
        runs = [Run.from_values(from_item(item)) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return runs, (from_item(last)[RunsKeys.SK] if last else None)

    def ended(self, runs: Mapping[tuple[str, str], int | None]) -> dict[tuple[str, str], int | None]:
        """Which of these (job, run id) have ended, each asked with the attempt its slot names (a slot is freed on
        this answer: ``ended_holders`` says when an eventually consistent read is enough)."""

        def read(keys: list[tuple[str, str]], consistent: bool) -> Iterator[dict[str, Any]]:
            return batch_get(
                self.db,
                self.table,
                [self._key(job, run_id) for job, run_id in keys],
                ProjectionExpression="#job, #run, #status, attempt",
                ExpressionAttributeNames={"#job": RunsKeys.PK, "#run": RunsKeys.SK, "#status": "status"},
                ConsistentRead=consistent,
            )

        return ended_holders(runs, read)

    def scheduled_ids(self, job: str, first: str, last: str) -> set[str]:
        """The run ids of ``job`` between two run ids (inclusive): keys only, for the lost-message audit."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#job = :job AND #run BETWEEN :first AND :last",
            "ExpressionAttributeNames": {"#job": RunsKeys.PK, "#run": RunsKeys.SK},
            "ExpressionAttributeValues": to_values({":job": job, ":first": first, ":last": last}),
            "ProjectionExpression": "#run",
        }
        return {values[RunsKeys.SK] for values in every_item(self.db, **request)}

    def succeeded_between(self, job: str, first: datetime, last: datetime) -> str | None:
        """The newest run of ``job`` that succeeded for a logical instant in [first, last] (its id), reading at
        most ``MAX_WAIT_SCAN`` runs (run ids begin with their instant, so the key range is the window)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#job = :job AND #run BETWEEN :first AND :last",
            "ExpressionAttributeNames": {"#job": RunsKeys.PK, "#run": RunsKeys.SK, "#status": "status"},
            "ExpressionAttributeValues": to_values(
                {":job": job, ":first": scheduled_run_id(first), ":last": scheduled_run_id(last) + "\uffff"}
            ),
            "ProjectionExpression": "#run, #status, scheduled_at",
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        for values in every_item(self.db, max_items=MAX_WAIT_SCAN, **request):
            if succeeded_in(values, first, last):
                return str(values[RunsKeys.SK])
        return None
