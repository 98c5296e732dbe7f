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

from jobsched.core.messages import DagTaskFailure, DagTaskMessage, WorkMessage, parse_work_message
from jobsched.pipeline.worker import WorkerBatch
from jobsched.watch.observability import emit_run_outcome, make_logger, make_tracer
from jobsched.watch.signals import emit
from jobsched.wiring import default_worker

logger = make_logger("worker")
tracer = make_tracer("worker")
# The domain's and the target adapters' own loggers write JSON with the run's keys too (job, run_id,
# attempt, correlation_id), so `jobsched logs` shows what a target adapter said about the run.
copy_config_to_registered_loggers(source_logger=logger, include={"jobsched"})


def process_record(record: SQSRecord, batch: WorkerBatch) -> None:
    message = parse_work_message(record.body)
    # Records run on pool threads at once: keys are per thread, cleared from the record that ran before.
    logger.thread_safe_clear_keys()
    logger.thread_safe_append_keys(job=message.job, team=message.team, run_id=message.run_id)
    if isinstance(message, DagTaskMessage | DagTaskFailure):
        logger.thread_safe_append_keys(task=message.task)
    if not isinstance(message, DagTaskFailure):
        logger.thread_safe_append_keys(attempt=message.attempt, correlation_id=message.correlation_id or message.run_id)
    outcome = default_worker().process_any(message, batch)
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
    batch = start_batch(event.get("Records", []))

    async def record_handler(record: SQSRecord) -> None:
        await asyncio.to_thread(process_record, record, batch)

    try:
        return async_process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    finally:
        end_batch(batch)


def start_batch(records: list[dict[str, Any]]) -> WorkerBatch:
    """The batch's specs in one read and its runs' team slots in one write per team; a malformed record is
    left out here and fails on its own in ``process_record``."""
    return default_worker().start_batch([message for message in map(parsed, records) if message])


def end_batch(batch: WorkerBatch) -> None:
    default_worker().end_batch(batch)


def parsed(record: dict[str, Any]) -> WorkMessage | DagTaskFailure | None:
    try:
        return parse_work_message(record["body"])
    except (KeyError, TypeError, ValueError, AttributeError):  # not even a message: failed below, as such
        return None
