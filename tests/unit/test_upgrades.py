"""What an upgrade would lose or be refused, from the stateful resources of two templates."""

from __future__ import annotations

import copy
from typing import Any

from infra.upgrades import stateful_resources, upgrade_problems


def table(*indexes: str, key: str = "pk", retain: bool = True) -> dict[str, Any]:
    return {
        "Type": "AWS::DynamoDB::Table",
        "DeletionPolicy": "Retain" if retain else "Delete",
        "Properties": {
            "TableName": "jobsched-prod-jobs",
            "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
            "GlobalSecondaryIndexes": [
                {"IndexName": name, "KeySchema": [{"AttributeName": name, "KeyType": "HASH"}]} for name in indexes
            ],
        },
    }


def release(**resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    queue = {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "jobsched-prod-normal"}}
    function = {"Type": "AWS::Lambda::Function", "Properties": {}}
    return stateful_resources({"Resources": {"Queue": queue, "Worker": function, **resources}})


def test_an_unchanged_release_and_one_new_index_pass() -> None:
    before = release(Jobs=table("due"))
    assert upgrade_problems(before, copy.deepcopy(before), prod=True) == []
    assert upgrade_problems(before, release(Jobs=table("due", "incidents")), prod=True) == []
    assert upgrade_problems(before, release(Jobs=table()), prod=True) == []
    assert "Worker" not in before  # functions are not stateful


def test_a_renamed_logical_id_or_key_schema_fails() -> None:
    before = release(Jobs=table("due"))
    [gone, new] = upgrade_problems(before, release(JobsV2=table("due")), prod=True)
    assert "Jobs (AWS::DynamoDB::Table) is gone" in gone and "JobsV2" in new and "record it" in new
    [problem] = upgrade_problems(before, release(Jobs=table("due", key="id")), prod=True)
    assert "KeySchema changed" in problem


def test_two_index_changes_on_one_table_fail() -> None:
    before = release(Jobs=table("due"))
    [two] = upgrade_problems(before, release(Jobs=table("due", "a", "b")), prod=True)
    assert "2 global index changes" in two
    changed = table("due")
    changed["Properties"]["GlobalSecondaryIndexes"][0]["KeySchema"][0]["AttributeName"] = "other"
    [replaced] = upgrade_problems(before, release(Jobs=changed), prod=True)
    assert "key schema changed ['due']" in replaced


def test_prod_keeps_its_tables() -> None:
    before = release(Jobs=table("due", retain=False))
    assert upgrade_problems(before, before, prod=False) == []
    [problem] = upgrade_problems(before, before, prod=True)
    assert "must be retained in prod, not Delete" in problem
