"""moto's DynamoDB responses written directly (infra/local/moto_patches.py) are the ones moto would write.

The suite and the local runtime rely on it for every DynamoDB call, so each item operation is made here with
the check on: every response is written both ways and any difference fails the call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.serialize import ResponseSerializer

from infra.local import moto_patches

TABLE = "patched"


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv(moto_patches.CHECK_RESPONSES_ENV, "1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    moto_patches.direct_dynamodb_responses()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


ITEM = {
    "pk": {"S": "JOB#payments/nightly"},
    "sk": {"S": "RUN#20270104T100000Z"},
    "attempt": {"N": "2"},
    "ratio": {"N": "0.25"},
    "paused": {"BOOL": False},
    "note": {"NULL": True},
    "blob": {"B": b"\x00\xffjobsched"},
    "blobs": {"BS": [b"a", b"\x01"]},
    "tags": {"SS": ["b", "a"]},
    "counts": {"NS": ["1", "2.5"]},
    "tasks": {"M": {"a": {"M": {"status": {"S": "SUCCEEDED"}, "tries": {"L": [{"N": "1"}, {"S": "x"}]}}}}},
    "empty": {"S": ""},
}
KEY = {"pk": ITEM["pk"], "sk": ITEM["sk"]}


def test_every_item_operation_answers_as_moto_would(dynamodb: Any) -> None:
    capacity: dict[str, Any] = {"ReturnConsumedCapacity": "TOTAL"}
    assert "Attributes" not in dynamodb.put_item(TableName=TABLE, Item=ITEM, **capacity)
    assert dynamodb.put_item(TableName=TABLE, Item=ITEM, ReturnValues="ALL_OLD")["Attributes"] == ITEM
    assert dynamodb.get_item(TableName=TABLE, Key=KEY, ConsistentRead=True, **capacity)["Item"] == ITEM
    assert "Item" not in dynamodb.get_item(TableName=TABLE, Key={**KEY, "sk": {"S": "none"}})
    projected = dynamodb.get_item(
        TableName=TABLE, Key=KEY, ProjectionExpression="#b, tasks.a.tries[1]", ExpressionAttributeNames={"#b": "blob"}
    )
    assert projected["Item"] == {"blob": ITEM["blob"], "tasks": {"M": {"a": {"M": {"tries": {"L": [{"S": "x"}]}}}}}}
    updated = dynamodb.update_item(
        TableName=TABLE,
        Key=KEY,
        UpdateExpression="SET attempt = attempt + :one, #s = :s REMOVE note",
        ConditionExpression="attempt = :two",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":one": {"N": "1"}, ":two": {"N": "2"}, ":s": {"S": "RUNNING"}},
        ReturnValues="UPDATED_NEW",
        **capacity,
    )
    assert updated["Attributes"] == {"attempt": {"N": "3"}, "status": {"S": "RUNNING"}}
    for index in range(3):
        dynamodb.put_item(TableName=TABLE, Item={**KEY, "sk": {"S": f"RUN#{index}"}})
    page = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": KEY["pk"]},
        Limit=2,
        **capacity,
    )
    assert page["Count"] == 2 and page["LastEvaluatedKey"] and page["ConsumedCapacity"]["TableName"] == TABLE
    assert dynamodb.scan(TableName=TABLE, Select="COUNT")["Count"] == 4
    batch = dynamodb.batch_get_item(RequestItems={TABLE: {"Keys": [KEY, {**KEY, "sk": {"S": "RUN#0"}}]}})
    assert len(batch["Responses"][TABLE]) == 2 and not batch["UnprocessedKeys"]
    written = dynamodb.batch_write_item(
        RequestItems={TABLE: [{"DeleteRequest": {"Key": {**KEY, "sk": {"S": "RUN#0"}}}}]}
    )
    assert written["UnprocessedItems"] == {}
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": {**KEY, "sk": {"S": "RUN#9"}}}},
            {"Delete": {"TableName": TABLE, "Key": {**KEY, "sk": {"S": "RUN#1"}}}},
        ]
    )
    [got] = dynamodb.transact_get_items(TransactItems=[{"Get": {"TableName": TABLE, "Key": KEY}}])["Responses"]
    assert got["Item"]["blobs"] == ITEM["blobs"]
    # DeleteItem is where moto adds a member the API does not have (ConsumedCapacityUnits).
    assert dynamodb.delete_item(TableName=TABLE, Key=KEY, ReturnValues="ALL_OLD")["Attributes"]["blob"] == ITEM["blob"]
    assert "Attributes" not in dynamodb.delete_item(TableName=TABLE, Key=KEY)


def test_item_operations_skip_the_shape_walk_and_everything_else_keeps_it(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(moto_patches.CHECK_RESPONSES_ENV)
    walked: list[str] = []
    original = ResponseSerializer.serialize

    def serialize(self: ResponseSerializer, result: Any) -> Any:
        walked.append(str(self.operation_model.name))
        return original(self, result)

    monkeypatch.setattr(ResponseSerializer, "serialize", serialize)
    dynamodb.put_item(TableName=TABLE, Item=ITEM)
    dynamodb.get_item(TableName=TABLE, Key=KEY)
    assert walked == []
    description = dynamodb.describe_table(TableName=TABLE)["Table"]  # timestamps: moto's own path
    assert walked == ["DescribeTable"] and description["CreationDateTime"].year >= 2026
    with pytest.raises(dynamodb.exceptions.ConditionalCheckFailedException):
        dynamodb.put_item(TableName=TABLE, Item=ITEM, ConditionExpression="attribute_not_exists(pk)")


def _queue_scenario() -> dict[str, Any]:
    """What a client sees of a queue: received once each, delayed ones held, deletes, counts, bad receipts."""
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="deep")["QueueUrl"]
    for start in range(0, 300, 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": f"m{start + i}",
                    **({"DelaySeconds": 900} if (start + i) % 7 == 0 else {}),
                }
                for i in range(10)
            ],
        )
    received: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300).get("Messages"):
        received += batch
    for message in received[::2]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"])  # again: fine
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-receipt")
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # The undeleted ones come back when their visibility ends.
    for message in received[1::2]:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    # A FIFO queue with content-based deduplication: the one attribute a send reads.
    fifo = sqs.create_queue(
        QueueName="deep.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    for body in ("a", "a", "b"):
        sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId="g")
    fifo_counts = sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["All"])["Attributes"]
    return {
        "fifo": (fifo_counts["ApproximateNumberOfMessages"], fifo_counts["ContentBasedDeduplication"]),
        "received": sorted(m["Body"] for m in received),
        "visible": counts["ApproximateNumberOfMessages"],
        "in_flight": counts["ApproximateNumberOfMessagesNotVisible"],
        "delayed": counts["ApproximateNumberOfMessagesDelayed"],
        "again": sorted(m["Body"] for m in again),
    }


def test_deep_queue_receives_and_deletes_answer_as_moto_would(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.sqs.models import Queue, SQSBackend

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        before = _queue_scenario()
    for name in ("messages", "delete_message"):
        monkeypatch.setattr(Queue, name, Queue.__dict__[name])  # restored after the test
    monkeypatch.setattr(Queue, "attributes", Queue.__dict__["attributes"])
    for name in ("is_message_valid_based_on_retention_period", "send_message"):
        monkeypatch.setattr(SQSBackend, name, SQSBackend.__dict__[name])
    monkeypatch.setattr(Queue, "_deep_queues", False, raising=False)
    moto_patches.deep_sqs_queues()
    moto_patches.sqs_sends_read_one_attribute()
    assert isinstance(Queue.__dict__["messages"], property) and Queue._deep_queues  # type: ignore[attr-defined]
    with mock_aws():
        after = _queue_scenario()
    assert after == before
    assert len(before["received"]) == 300 - 43 and before["delayed"] == "43" and len(before["again"]) == 10
    assert before["fifo"] == ("2", "true")
