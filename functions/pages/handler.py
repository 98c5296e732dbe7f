"""Pages handler: the pages queue -> SNS topics and webhooks, each page with a short timeout.

Records of a batch are delivered concurrently, so one dead webhook costs its own timeout, not the batch's.
A failed delivery is reported as a batch item failure and comes back after a growing delay (the message's
visibility is set to it); after a few tries the page goes to the deployment's topic instead.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.core.settings import Settings
from jobsched.paging.delivery import PageDelivery, PageNotDelivered
from jobsched.ports import PageQueuePort
from jobsched.warm import warm
from jobsched.watch.observability import make_logger, make_tracer
from jobsched.watch.signals import emit
from jobsched.wiring import default_page_sender, page_queue

logger = make_logger("pages")
tracer = make_tracer("pages")


@warm
def queue() -> PageQueuePort:
    return page_queue(Settings.from_env())


async def record_handler(record: SQSRecord) -> None:
    await asyncio.to_thread(deliver_record, record)


def deliver_record(record: SQSRecord) -> None:
    delivery = PageDelivery.model_validate_json(record.body)
    attempt = int(record.attributes.approximate_receive_count or 1)
    logger.thread_safe_clear_keys()
    logger.thread_safe_append_keys(page_id=delivery.page_id, team=delivery.team, destination=delivery.destination)
    try:
        outcome = default_page_sender().deliver(delivery, attempt=attempt)
    except PageNotDelivered as failed:
        emit("PageDeliveries", 1, destination=delivery.destination, outcome="retry")
        logger.warning(
            "page not delivered",
            extra={"attempt": attempt, "error": str(failed), "retry_in_s": failed.retry_in.total_seconds()},
        )
        queue().retry_later(record.receipt_handle, failed.retry_in)
        raise
    emit("PageDeliveries", 1, destination=delivery.destination, outcome=outcome)
    logger.info("page", extra={"outcome": outcome, "attempt": attempt})


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)  # per invocation
    return async_process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
