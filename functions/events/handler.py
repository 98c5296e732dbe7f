"""Events handler: the intake queue (events matched by trigger rules) -> runs, one per event.

A record fails (SQS brings it back, then dead-letters it after INTAKE_MAX_RECEIVES) only on an AWS error: the
redelivery resumes where the first attempt stopped (``jobsched.pipeline.intake``). An envelope that cannot be
parsed never will be: it is dropped with a count and logged with its body's start, not retried.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from jobsched.core.events import EventEnvelope
from jobsched.watch.observability import emit_event_received, make_logger, make_tracer
from jobsched.wiring import default_intake, utc_now

logger = make_logger("events")
tracer = make_tracer("events")


def record_handler(record: SQSRecord) -> None:
    logger.thread_safe_clear_keys()
    try:
        envelope = EventEnvelope.model_validate_json(record.body)
        envelope.time  # noqa: B018 - an event without a time cannot name its run: malformed
    except (ValidationError, KeyError, ValueError) as error:
        emit_event_received("dropped", reason="malformed")
        problem = {"reason": "malformed", "error": str(error)[:300], "body": record.body[:300]}
        logger.warning("event dropped", extra=problem)
        return
    logger.thread_safe_append_keys(job=envelope.job, team=envelope.job.split("/", 1)[0], event_id=envelope.event_id)
    redelivered = str((record.raw_event.get("attributes") or {}).get("ApproximateReceiveCount", "1")) not in ("", "1")
    received = default_intake().receive(envelope, now=utc_now(), redelivered=redelivered)
    emit_event_received(received.action, reason=received.reason, matched=received.matched)
    extra = {
        "outcome": received.action,
        "reason": received.reason,
        "detail": received.detail,
        "source": envelope.source,
    }
    if received.run_id:
        logger.thread_safe_append_keys(run_id=received.run_id)
    if received.action == "dropped":
        logger.warning("event dropped", extra=extra)
    else:
        logger.info("event", extra=extra)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)  # per invocation
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
