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

from jobsched.core.messages import parse_work_message, work_message_of
from jobsched.pipeline.worker import WorkerBatch
from jobsched.watch.observability import (
    make_logger,
    make_tracer,
    message_keys,
    run_message_handled,
    trace_annotations,
)
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
    logger.thread_safe_append_keys(**message_keys(message))
    # One X-Ray subsegment a record, annotated with the run's W3C trace (core.traces): X-Ray's search finds the
    # worker's part of a run by it (annotation.jobsched_trace), beside what its target reported under traceparent.
    with tracer.provider.in_subsegment(f"## {message.job}") as subsegment:
        for name, value in trace_annotations(message).items():
            subsegment.put_annotation(name, value)
        run_message_handled(logger, message, default_worker().process_any(message, batch))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    emit("RecordsReceived", len(event.get("Records", [])))
    # A batch's records run at once (ten cost one target's duration); failures are reported, not raised. One
    # processor per invocation, never shared (tests/aws/test_handler_reentrancy.py).
    processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    # Specs in one read, team slots in one write per team; a malformed record fails alone in process_record.
    worker = default_worker()
    batch = worker.start_batch([m for m in map(work_message_of, event.get("Records", [])) if m])

    async def record_handler(record: SQSRecord) -> None:
        await asyncio.to_thread(process_record, record, batch)

    try:
        return async_process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    finally:
        worker.end_batch(batch)
