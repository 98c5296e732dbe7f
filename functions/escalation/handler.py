"""Escalation handler: the escalation queue -> incidents -> pages (SNS topic per job, webhook).

A record fails (SQS brings it back, then dead-letters it) only when the incident cannot be stored or a
page cannot be delivered; the page stays unsent on its incident and goes out on the retry.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.paging.escalation_events import EscalationEvent
from jobsched.watch.observability import emit_escalation, make_logger, make_tracer
from jobsched.wiring import default_escalator

logger = make_logger("escalation")
tracer = make_tracer("escalation")


def record_handler(record: SQSRecord) -> None:
    event = EscalationEvent.model_validate_json(record.body)
    logger.thread_safe_clear_keys()
    logger.thread_safe_append_keys(
        subject=event.subject, kind=event.kind, job=event.job, team=event.team, run_id=event.run_id
    )
    handled = default_escalator().handle(event)
    emit_escalation(team=event.team or "-", kind=event.kind, pages=len(handled.pages), paused=handled.paused)
    logger.info(
        "escalation event",
        extra={"pages": [page.title for page in handled.pages], "auto_paused": handled.paused},
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    # One record at a time: events for one subject must not race each other's incident writes needlessly.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)  # per invocation
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
