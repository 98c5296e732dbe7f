"""Heartbeat checker: fired by an EventBridge rule every minute. Parse, call the domain, report."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.watch.observability import make_logger, make_tracer
from jobsched.watch.signals import emit
from jobsched.wiring import default_heartbeat, utc_now

logger = make_logger("heartbeat")
tracer = make_tracer("heartbeat")


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = default_heartbeat().check(utc_now())
    for name, value in report.metrics().items():
        emit(name, value)
    summary = report.summary()
    logger.info("heartbeat check", extra=summary)
    return summary
