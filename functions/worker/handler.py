"""Worker: SQS work queues -> one run per message.

A record fails (and SQS brings it back, then dead-letters it after maxReceiveCount) only when it cannot
be processed at all: a malformed body or an AWS error. Waiting is not failing: the worker re-sends a
message that must wait, so the original is deleted.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.observability import emit_run_outcome, make_logger, make_metrics, make_tracer
from jobsched.runs import RunMessage
from jobsched.wiring import default_worker

logger = make_logger("worker")
metrics = make_metrics("worker")
tracer = make_tracer("worker")
# Report failed records rather than erroring the invocation: the effect on SQS is the same, the logs are clearer.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> None:
    message = RunMessage.model_validate_json(record.body)
    logger.append_keys(
        job=message.job,
        team=message.team,
        run_id=message.run_id,
        attempt=message.attempt,
        correlation_id=message.correlation_id or message.run_id,
    )
    outcome = default_worker().process(message)
    priority = outcome.priority
    lateness = outcome.lateness.total_seconds() if outcome.lateness is not None else None
    emit_run_outcome(metrics, team=message.team, priority=priority, action=outcome.action, lateness_seconds=lateness)
    logger.info("run message", extra={"outcome": outcome.action, "detail": outcome.detail, "lateness_s": lateness})


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
