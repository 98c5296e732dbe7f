"""What an upgrade must not lose: the template's stateful resources, held against the record of the last release.

CloudFormation replaces a resource whose logical id, or a table whose key schema or name, changes: the new one
starts empty and the old one is deleted (or orphaned, with Retain). It also refuses more than one index added
or removed per table in one update. ``stateful_resources`` reduces a template to what decides those things;
``upgrade_problems`` says what a release would break. The record is ``tests/infra/stateful-resources.json``,
written on purpose by ``scripts/record_stateful_resources.py`` when a release is cut.
"""

from __future__ import annotations

from typing import Any

# Resource type -> the properties whose change replaces the resource (AWS's "Update requires: Replacement").
IDENTITY: dict[str, tuple[str, ...]] = {
    "AWS::DynamoDB::Table": ("TableName", "KeySchema"),
    "AWS::DynamoDB::GlobalTable": ("TableName", "KeySchema"),
    "AWS::KMS::Key": ("KeySpec", "KeyUsage"),
    "AWS::SecretsManager::Secret": ("Name",),
    "AWS::SQS::Queue": ("QueueName", "FifoQueue"),
    "AWS::SNS::Topic": ("TopicName", "FifoTopic"),
    "AWS::Logs::LogGroup": ("LogGroupName",),
}
# What prod must keep when the stack is deleted or a resource replaced.
TABLES = ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")
RETAINED_IN_PROD = (*TABLES, "AWS::KMS::Key", "AWS::SecretsManager::Secret")


def stateful_resources(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> type, identity properties, indexes (tables) and deletion policy, for every stateful one."""
    found: dict[str, dict[str, Any]] = {}
    for logical_id, resource in sorted(template.get("Resources", {}).items()):
        kind = resource["Type"]
        if kind not in IDENTITY:
            continue
        properties = resource.get("Properties", {})
        entry: dict[str, Any] = {
            "type": kind,
            "identity": {name: properties[name] for name in IDENTITY[kind] if name in properties},
            "deletion_policy": resource.get("DeletionPolicy", "Delete"),
        }
        if kind in TABLES:
            entry["global_indexes"] = {
                index["IndexName"]: index["KeySchema"] for index in properties.get("GlobalSecondaryIndexes", [])
            }
            entry["local_indexes"] = {
                index["IndexName"]: index["KeySchema"] for index in properties.get("LocalSecondaryIndexes", [])
            }
        found[logical_id] = entry
    return found


def upgrade_problems(record: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]], *, prod: bool) -> list[str]:
    """What deploying ``current`` over the release recorded in ``record`` would lose or be refused."""
    problems: list[str] = []
    for logical_id, before in record.items():
        after = current.get(logical_id)
        if after is None:
            problems.append(
                f"{logical_id} ({before['type']}) is gone: a renamed logical id replaces the resource and its data"
            )
            continue
        if after["type"] != before["type"]:
            problems.append(f"{logical_id}: type {before['type']} -> {after['type']}")
        for name, value in before["identity"].items():
            if after["identity"].get(name) != value:
                problems.append(f"{logical_id}: {name} changed (CloudFormation replaces the resource)")
        if before["type"] in TABLES:
            problems.extend(_index_problems(logical_id, before, after))
    for logical_id, after in current.items():
        if logical_id not in record:
            problems.append(
                f"{logical_id} ({after['type']}) is new: record it on purpose (scripts/record_stateful_resources.py)"
            )
        if prod and after["type"] in RETAINED_IN_PROD and after["deletion_policy"] != "Retain":
            problems.append(f"{logical_id} ({after['type']}) must be retained in prod, not {after['deletion_policy']}")
    return problems


def _index_problems(logical_id: str, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    problems = []
    if after["local_indexes"] != before["local_indexes"]:
        problems.append(f"{logical_id}: local secondary indexes changed (only possible when creating the table)")
    old, new = before["global_indexes"], after["global_indexes"]
    changed = {name for name in old.keys() & new.keys() if old[name] != new[name]}
    # A changed index is a removal and an addition; CloudFormation takes one index operation per update.
    operations = len(old.keys() ^ new.keys()) + 2 * len(changed)
    if operations > 1:
        problems.append(
            f"{logical_id}: {operations} global index changes in one release (added {sorted(new.keys() - old.keys())}, "
            f"removed {sorted(old.keys() - new.keys())}, key schema changed {sorted(changed)}); CloudFormation "
            "allows one per table update: release them one at a time"
        )
    return problems
