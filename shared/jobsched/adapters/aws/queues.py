"""SQS: run messages onto the work queue of their priority class, and escalation events."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from jobsched.adapters.aws.clients import client
from jobsched.core.errors import QueueSendError
from jobsched.core.messages import WorkMessage
from jobsched.ports import delay_seconds

SEND_CONCURRENCY = 8  # SendMessageBatch calls in flight at once from one sender


class WorkQueues:
    """The work queues by priority class. A class may have several queues (``shards``), each with its own
    event source, so that a burst scales that many event sources side by side; a run's messages always
    go to the same one of them (by job and run id)."""

    def __init__(
        self, queue_urls: dict[str, str], sqs: Any | None = None, *, shards: dict[str, tuple[str, ...]] | None = None
    ) -> None:
        self.urls = queue_urls
        self.shards = {priority: (shards or {}).get(priority) or (url,) for priority, url in queue_urls.items()}
        self._client = sqs

    @property
    def sqs(self) -> Any:
        return self._client or client("sqs")

    def send(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> None:
        """Send all or raise QueueSendError naming how many were not accepted."""
        failed = self.send_each(priority, messages)
        if failed:
            raise QueueSendError(f"{len(failed)} messages not accepted by {self.urls[priority]}")

    def backlog(self, priority: str) -> int:
        """Messages visible now on the class's queues (delayed ones, not yet due, and in-flight ones excluded)."""
        return sum(
            int(
                self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
                    "Attributes"
                ]["ApproximateNumberOfMessages"]
            )
            for url in self.shards[priority]
        )

    def send_each(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> set[int]:
        """Send with per-message delays, 10 per SendMessageBatch (failed entries retried twice), up to
        ``SEND_CONCURRENCY`` batches at a time: a burst tick sends tens of thousands of messages.

        Returns the indices of messages still not accepted, so a caller batching many jobs together
        can hold back exactly the jobs whose messages did not go out.
        """
        by_queue: dict[str, list[int]] = {}
        for index, (message, _) in enumerate(messages):
            by_queue.setdefault(self.queue_for(priority, message), []).append(index)
        batches = [
            (url, indices[start : start + 10])
            for url, indices in by_queue.items()
            for start in range(0, len(indices), 10)
        ]
        if len(batches) <= 1:
            return set().union(*(self._send_batch(url, messages, indices) for url, indices in batches))
        with ThreadPoolExecutor(max_workers=min(SEND_CONCURRENCY, len(batches))) as pool:
            failed = pool.map(lambda batch: self._send_batch(batch[0], messages, batch[1]), batches)
            return set().union(*failed)

    def queue_for(self, priority: str, message: WorkMessage) -> str:
        shards = self.shards[priority]
        if len(shards) == 1:
            return shards[0]
        return shards[zlib.crc32(f"{message.job}/{message.run_id}".encode()) % len(shards)]

    def _send_batch(
        self, url: str, messages: Sequence[tuple[WorkMessage, timedelta]], indices: Sequence[int]
    ) -> set[int]:
        pending = {
            str(index): {
                "Id": str(index),
                "MessageBody": message.model_dump_json(exclude_none=True),
                "DelaySeconds": delay_seconds(delay),
                # On a standard queue the group makes it an SQS fair queue: a team with a backlog
                # cannot raise another team's dwell time.
                "MessageGroupId": message.team,
                "MessageAttributes": {
                    "run_id": {"DataType": "String", "StringValue": message.run_id},
                    "job": {"DataType": "String", "StringValue": message.job},
                },
            }
            for index in indices
            for message, delay in (messages[index],)
        }
        for _ in range(3):
            response = self.sqs.send_message_batch(QueueUrl=url, Entries=list(pending.values()))
            failed = {entry["Id"] for entry in response.get("Failed", [])}
            pending = {key: entry for key, entry in pending.items() if key in failed}
            if not pending:
                break
        return {int(key) for key in pending}


class _OneQueue:
    """One queue by URL; the SQS client is made on first use (never at import time)."""

    def __init__(self, queue_url: str, sqs: Any | None = None) -> None:
        self.url = queue_url
        self._client = sqs

    @property
    def sqs(self) -> Any:
        return self._client or client("sqs")


class EscalationQueue(_OneQueue):
    """Escalation events for the escalation handler (issue #8): FAILED runs, missed instants."""

    def publish(self, event: dict[str, Any]) -> None:
        self.sqs.send_message(QueueUrl=self.url, MessageBody=json.dumps(event, sort_keys=True))


class PageQueue(_OneQueue):
    """Rendered pages waiting for the pages handler (one message per page and destination)."""

    def send(self, bodies: Sequence[str]) -> None:
        """All or raise (the caller keeps the pages in its outbox and tries again)."""
        for start in range(0, len(bodies), 10):
            entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies[start : start + 10])]
            response = self.sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
            if response.get("Failed"):
                raise QueueSendError(f"{len(response['Failed'])} pages not accepted by {self.url}")

    def retry_later(self, receipt_handle: str, delay: timedelta) -> None:
        """A failed delivery comes back after ``delay`` instead of the queue's visibility timeout."""
        self.sqs.change_message_visibility(
            QueueUrl=self.url, ReceiptHandle=receipt_handle, VisibilityTimeout=delay_seconds(delay)
        )
