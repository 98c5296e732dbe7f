"""DynamoDB item (de)serialization, reading every page of a query, and the conditional-failure check the
stores share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    return {key: _serializer.serialize(value) for key, value in values.items() if value is not None}


def to_values(values: dict[str, Any]) -> dict[str, Any]:
    """Expression attribute values (``:name`` -> typed value)."""
    return {key: _serializer.serialize(value) for key, value in values.items()}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    return {key: _plain(_deserializer.deserialize(value)) for key, value in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | set):
        return [_plain(v) for v in value]
    return value


def every_item(
    db: Any, operation: str = "query", *, max_items: int | None = None, **request: Any
) -> Iterator[dict[str, Any]]:
    """Every item a Query (or a Scan) finds, page after page, as plain values: botocore's paginator follows
    LastEvaluatedKey. ``max_items``: stop after that many (the last page's request asks for no more)."""
    config = {"MaxItems": max_items} if max_items is not None else {}
    for page in db.get_paginator(operation).paginate(**request, PaginationConfig=config):
        for item in page.get("Items", []):
            yield from_item(item)


def batch_get(db: Any, table: str, keys: Sequence[dict[str, Any]], **options: Any) -> Iterator[dict[str, Any]]:
    """The items at ``keys`` (as plain values), 100 keys per BatchGetItem, unprocessed keys asked again.
    ``options``: ProjectionExpression, ExpressionAttributeNames, ConsistentRead."""
    for start in range(0, len(keys), 100):
        request: dict[str, Any] = {table: {"Keys": list(keys[start : start + 100]), **options}}
        while request:
            response = db.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(table, []):
                yield from_item(item)
            request = response.get("UnprocessedKeys") or {}


def is_conditional_failure(error: ClientError) -> bool:
    """The write lost its race: its condition did not hold, or (a global table with multi-Region strong
    consistency) another Region's concurrent write to the item won (``ReplicatedWriteConflictException``)."""
    code = error.response.get("Error", {}).get("Code", "")
    if code in ("ConditionalCheckFailedException", "ReplicatedWriteConflictException"):
        return True
    if code == "TransactionCanceledException":
        reasons = error.response.get("CancellationReasons") or []
        return any(reason.get("Code") == "ConditionalCheckFailed" for reason in reasons)
    return False


def is_missing_map(error: ClientError) -> bool:
    """An update set an entry of a map attribute the item does not have yet (DynamoDB refuses the path)."""
    return bool(error.response.get("Error", {}).get("Code") == "ValidationException")


def update_if(db: Any, **request: Any) -> bool:
    """UpdateItem with a condition; False (not an exception) when the condition does not hold."""
    try:
        db.update_item(**request)
    except ClientError as error:
        if is_conditional_failure(error):
            return False
        raise
    return True
