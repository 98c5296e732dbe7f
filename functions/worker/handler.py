"""Worker: SQS work queues -> one run per message.

A record fails (and SQS brings it back, then dead-letters it after maxReceiveCount) only when it cannot
be processed at all: a malformed body or an AWS error. Waiting is not failing: the worker re-sends a
message that must wait, so the original is deleted.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.core.messages import DagTaskFailure, DagTaskMessage, parse_work_message
from jobsched.watch.observability import emit_run_outcome, make_logger, make_tracer
from jobsched.watch.signals import emit
from jobsched.wiring import default_worker

logger = make_logger("worker")
tracer = make_tracer("worker")
# The domain's and the target adapters' own loggers write JSON with the run's keys too (job, run_id,
# attempt, correlation_id), so `jobsched logs` shows what a target adapter said about the run.
copy_config_to_registered_loggers(source_logger=logger, include={"jobsched"})


async def record_handler(record: SQSRecord) -> None:
    await asyncio.to_thread(process_record, record)


def process_record(record: SQSRecord) -> None:
    message = parse_work_message(record.body)
    # Records run on pool threads at once: keys are per thread, cleared from the record that ran before.
    logger.thread_safe_clear_keys()
    logger.thread_safe_append_keys(job=message.job, team=message.team, run_id=message.run_id)
    if isinstance(message, DagTaskMessage | DagTaskFailure):
        logger.thread_safe_append_keys(task=message.task)
    if not isinstance(message, DagTaskFailure):
        logger.thread_safe_append_keys(attempt=message.attempt, correlation_id=message.correlation_id or message.run_id)
    outcome = default_worker().process_any(message)
    priority = outcome.priority
    lateness = outcome.lateness.total_seconds() if outcome.lateness is not None else None
    started_by_event = getattr(message, "trigger", None) == "event"
    emit_run_outcome(
        team=message.team,
        priority=priority,
        action=outcome.action,
        lateness_seconds=lateness,
        started_by_event=started_by_event,
    )
    logger.info("run message", extra={"outcome": outcome.action, "detail": outcome.detail, "lateness_s": lateness})


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    emit("RecordsReceived", len(event.get("Records", [])))
    # Records of a batch run concurrently (each waits on its own target), so a batch of ten costs about one
    # target's duration, not ten. Failed records are reported rather than erroring the whole invocation.
    # The processor holds the batch's records and failures: one per invocation, never shared (the local
    # runtime invokes a handler from several threads at once; tests/aws/test_handler_reentrancy.py).
    processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return async_process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
