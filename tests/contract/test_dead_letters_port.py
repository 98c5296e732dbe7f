"""The dead-letter queues' port, on SQS (moto) and in memory: received with a hold or none, released, deleted."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.dead_letters import DeadLetterQueues
from jobsched.adapters.memory.dead_letters import MemoryDeadLetters
from jobsched.core.runs import parse_instant
from jobsched.ports import DeadLettersPort

NOW = parse_instant("2027-01-04T09:00:00Z")


@pytest.fixture(params=["moto", "memory"])
def letters(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[DeadLettersPort, object]]:
    if request.param == "memory":
        memory = MemoryDeadLetters(["work-normal"], lambda: NOW)
        yield memory, lambda body: memory.put("work-normal", body)
        return
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="contract-dlq")["QueueUrl"]
        yield DeadLetterQueues({"work-normal": url}, sqs), lambda body: sqs.send_message(QueueUrl=url, MessageBody=body)


def test_dead_letters_are_held_released_and_deleted(letters: tuple[DeadLettersPort, object]) -> None:
    port, put = letters
    for body in ("a", "b", "c"):
        put(body)  # type: ignore[operator]
    assert port.count("work-normal") == 3
    peeked = port.receive("work-normal", max_messages=10, hold=timedelta(0))
    assert sorted(letter.body for letter in peeked) == ["a", "b", "c"]
    held = port.receive("work-normal", max_messages=10, hold=timedelta(seconds=60))
    assert sorted(letter.body for letter in held) == ["a", "b", "c"]  # a peek left them visible
    assert port.receive("work-normal", max_messages=10, hold=timedelta(seconds=60)) == []  # now held
    port.delete("work-normal", [letter for letter in held if letter.body == "a"])
    port.release("work-normal", [letter for letter in held if letter.body != "a"])
    again = port.receive("work-normal", max_messages=10, hold=timedelta(seconds=60))
    assert sorted(letter.body for letter in again) == ["b", "c"] and all(letter.receives >= 2 for letter in again)
    assert port.count("work-normal") == 2
