"""The dead-letter queues on SQS, by name (``pipeline.dead_letters``): received to be looked at (made visible again at
once) or redriven (out of sight while sent again), deleted once sent again."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from jobsched.adapters.aws.clients import client
from jobsched.ports import DeadLetter


class DeadLetterQueues:
    def __init__(self, urls: dict[str, str], sqs: Any | None = None) -> None:
        self.urls = urls
        self._client = sqs

    @property
    def sqs(self) -> Any:
        return self._client or client("sqs")

    def names(self) -> tuple[str, ...]:
        return tuple(self.urls)

    def _url(self, queue: str) -> str:
        if queue not in self.urls:
            raise KeyError(f"this deployment has no dead-letter queue {queue}")
        return self.urls[queue]

    def count(self, queue: str) -> int:
        """Every message of the queue, visible or held (SQS's approximate counts)."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        found = self.sqs.get_queue_attributes(QueueUrl=self._url(queue), AttributeNames=names)["Attributes"]
        return sum(int(found.get(name, 0)) for name in names)

    def receive(self, queue: str, *, max_messages: int, hold: timedelta) -> list[DeadLetter]:
        answer = self.sqs.receive_message(
            QueueUrl=self._url(queue),
            MaxNumberOfMessages=max(1, min(max_messages, 10)),
            VisibilityTimeout=int(hold.total_seconds()),
            AttributeNames=["ApproximateReceiveCount"],
        )
        return [
            DeadLetter(
                raw["MessageId"],
                raw["ReceiptHandle"],
                raw["Body"],
                int(raw.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
            )
            for raw in answer.get("Messages", [])
        ]

    def delete(self, queue: str, letters: Sequence[DeadLetter]) -> None:
        for start in range(0, len(letters), 10):
            entries = [
                {"Id": str(n), "ReceiptHandle": letter.receipt} for n, letter in enumerate(letters[start : start + 10])
            ]
            self.sqs.delete_message_batch(QueueUrl=self._url(queue), Entries=entries)

    def release(self, queue: str, letters: Sequence[DeadLetter]) -> None:
        for letter in letters:  # few (a page of ten at most), and each is told apart when one is gone
            self.sqs.change_message_visibility(
                QueueUrl=self._url(queue), ReceiptHandle=letter.receipt, VisibilityTimeout=0
            )
