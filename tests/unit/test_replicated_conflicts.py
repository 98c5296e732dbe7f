"""#51 (first step): on a global table with multi-Region strong consistency, two Regions writing one item at once
fail one of them with ReplicatedWriteConflictException. Every conditional write treats it as having lost the race,
as a failed condition: the caller's False or domain conflict, never an error (an adapter stubbed to raise it)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from jobsched.adapters.aws.dynamo import is_conditional_failure, update_if
from jobsched.adapters.aws.jobs_store import JobsStore


def conflict(operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "ReplicatedWriteConflictException", "Message": "replicated write conflict"}}, operation
    )


class ConflictingRegion:
    """A DynamoDB client whose every write meets another Region's concurrent write to the same item."""

    def update_item(self, **request: Any) -> None:
        raise conflict("UpdateItem")

    def put_item(self, **request: Any) -> None:
        raise conflict("PutItem")


def test_a_replicated_write_conflict_is_a_lost_race() -> None:
    assert is_conditional_failure(conflict("UpdateItem"))
    assert not is_conditional_failure(
        ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "UpdateItem")
    )
    assert update_if(ConflictingRegion(), TableName="t", Key={}, UpdateExpression="SET a = :a") is False


def test_an_adapter_answers_false_when_another_region_won() -> None:
    store = JobsStore("jobs", dynamodb=ConflictingRegion())
    assert store.put_budget_state("ops", "2027-01", {"month": "2027-01"}, expected_version=0) is False


def test_other_errors_still_raise() -> None:
    class Throttled(ConflictingRegion):
        def update_item(self, **request: Any) -> None:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "UpdateItem")

    with pytest.raises(ClientError):
        update_if(Throttled(), TableName="t", Key={}, UpdateExpression="SET a = :a")
