"""SQS event source mappings, played on the laptop: pollers per queue with the mapping's batch size and
MaximumConcurrency. They report batch item failures, delete what succeeded and leave the rest to SQS (and its
DLQ redrive), as the mapping does."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from infra.iam.recording import acting_as
from infra.local.alarms import LocalAlarms
from infra.local.deploy import REGION, Deployment
from infra.local.machine import LocalContext, LocalMachine

log = logging.getLogger("jobsched.local")

LOCAL_FAILED_RECORD_RETRY = 5  # seconds before a failed record is offered again (AWS: the visibility timeout)
LOCAL_RECEIVERS = 3  # ReceiveMessage loops per queue


@dataclass
class EventSourcePollers:
    machine: LocalMachine
    deployment: Deployment
    handler: Callable[[str], Callable[..., Any]]  # a handler by its path
    alarms: LocalAlarms | None
    invoked: Callable[[str, bool], None]  # (function, failed): counted as AWS/Lambda counts invocations
    paused: set[str] = field(default_factory=set)  # functions whose queue is not polled

    def start(self) -> None:
        import boto3
        from botocore.config import Config

        from jobsched.adapters.aws.clients import LOCAL_POOL_CONNECTIONS

        sqs = boto3.client(
            "sqs",
            endpoint_url=self.machine.endpoint,
            region_name=REGION,
            config=Config(max_pool_connections=LOCAL_POOL_CONNECTIONS),
        )
        for source in self.deployment.event_sources:
            url = self.deployment.queue_url(source.queue)
            function = self.deployment.physical[source.function]
            handler = self.handler(self.deployment.functions[function]["handler"])
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            pool = ThreadPoolExecutor(max_workers=source.max_concurrency, thread_name_prefix=f"poll-{source.queue}")
            mapping = Mapping(sqs, url, arn, handler, function)
            poll = self._poller(mapping, pool, source.batch_size)
            # Several receivers per queue, as an event source polls with several (five to start with in AWS):
            # a burst due at one instant is taken in parallel, not ten messages at a time.
            for receiver in range(min(LOCAL_RECEIVERS, max(1, source.max_concurrency // source.batch_size))):
                self.machine.loop(f"poll-{source.queue}-{receiver}", 0.05, poll)

    def _poller(self, mapping: Mapping, pool: ThreadPoolExecutor, batch: int) -> Callable[[], None]:
        sqs, url, function = mapping.sqs, mapping.url, mapping.function

        def poll() -> None:
            if function in self.paused:
                return  # the function is "down": what arrives waits on its queue, as in SQS
            with acting_as(function):  # an event source mapping receives with its function's role
                messages = sqs.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=batch, WaitTimeSeconds=1, AttributeNames=["All"]
                ).get("Messages", [])
            if messages and function in self.paused:
                # Paused while this receive was waiting: hand the messages back rather than deliver them.
                sqs.change_message_visibility_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                        for n, m in enumerate(messages)
                    ],
                )
                return
            if messages:
                pool.submit(self._deliver, mapping, messages)

        return poll

    def _deliver(self, mapping: Mapping, messages: list[dict[str, Any]]) -> None:
        with acting_as(mapping.function):  # the handler's calls and the mapping's deletes are the function role's
            self._deliver_as_function(mapping, messages)

    def _deliver_as_function(self, mapping: Mapping, messages: list[dict[str, Any]]) -> None:
        sqs, url, function = mapping.sqs, mapping.url, mapping.function
        if self.alarms is not None:
            for message in messages:
                sent = int(message.get("Attributes", {}).get("SentTimestamp", "0")) / 1000
                self.alarms.received(url.rsplit("/", 1)[-1], sent or time.time())
        event = {"Records": [_record(m, mapping.arn) for m in messages]}
        # Invocations of one function run here at once on threads of one process, where AWS gives each its own
        # execution environment: handlers keep what belongs to an invocation inside it (a batch processor held
        # at module level let one invocation's records be taken by another, and lost DAG task messages).
        try:
            response = mapping.handler(event, LocalContext(function, aws_request_id=uuid.uuid4().hex))
            failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
            self.invoked(function, False)
        except Exception:
            log.exception("%s failed a batch", function)
            failed = {m["MessageId"] for m in messages}
            self.invoked(function, True)
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)]
            )
        for message in messages:
            if message["MessageId"] in failed:
                # AWS would wait for the queue's visibility timeout (90 minutes here); locally, seconds.
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=LOCAL_FAILED_RECORD_RETRY
                )


@dataclass(frozen=True)
class Mapping:
    """One event source mapping: its queue and the function it delivers to."""

    sqs: Any
    url: str
    arn: str
    handler: Callable[..., Any]
    function: str


def _record(message: dict[str, Any], arn: str) -> dict[str, Any]:
    attributes = message.get("Attributes", {})
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {
            "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
            "SentTimestamp": attributes.get("SentTimestamp", "0"),
            "SenderId": attributes.get("SenderId", "local"),
            "ApproximateFirstReceiveTimestamp": attributes.get("ApproximateFirstReceiveTimestamp", "0"),
        },
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": REGION,
    }
