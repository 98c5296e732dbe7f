"""The Runs table as every runs store reads it: its name, its client, a run's key and a run's conditional
transition."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.dynamo import (
    from_item,
    is_conditional_failure,
    to_item,
    to_values,
)
from jobsched.core.checks import CheckResult
from jobsched.core.names import RunsKeys
from jobsched.core.run_records import Run, StaleAttempt


class RunsTable:
    table: str
    _client: Any

    @property
    def db(self) -> Any:
        return self._client or client("dynamodb")

    def _transition(
        self, job: str, run_id: str, update: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> Run:
        try:
            response = self.db.update_item(
                TableName=self.table,
                Key=self._key(job, run_id),
                UpdateExpression=update,
                ConditionExpression=f"attribute_exists(#run) AND {condition}",
                ExpressionAttributeNames={**names, "#run": RunsKeys.SK},
                ExpressionAttributeValues=to_values(values),
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if is_conditional_failure(error):
                raise StaleAttempt(f"{job} {run_id}: {condition} no longer holds") from None
            raise
        return Run.from_values(from_item(response["Attributes"]))

    @staticmethod
    def _key(job: str, run_id: str) -> dict[str, Any]:
        return to_item({RunsKeys.PK: job, RunsKeys.SK: run_id})


def with_checks(sets: str, values: dict[str, Any], checks: Sequence[CheckResult]) -> tuple[str, str]:
    """(the SET clause, what to add to REMOVE): an outcome's check results replace the last attempt's."""
    if not checks:
        return sets, ", checks"
    values[":checks"] = [check.as_values() for check in checks]
    return sets + ", checks = :checks", ""
