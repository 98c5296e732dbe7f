"""Heartbeat checker: fired by an EventBridge rule every minute. Parse, call the domain, report."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.observability import make_logger, make_metrics, make_tracer
from jobsched.wiring import default_heartbeat, utc_now

logger = make_logger("heartbeat")
metrics = make_metrics("heartbeat")
tracer = make_tracer("heartbeat")


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = default_heartbeat().check(utc_now())
    metrics.add_metric(name="ExpiredLeases", unit=MetricUnit.Count, value=report.expired)
    metrics.add_metric(name="HeartbeatTimeouts", unit=MetricUnit.Count, value=report.timed_out)
    metrics.add_metric(name="DeadlineMisses", unit=MetricUnit.Count, value=report.deadline_misses)
    metrics.add_metric(name="OverdueJobs", unit=MetricUnit.Count, value=report.overdue_jobs)
    metrics.add_metric(name="ParkedTaskHeartbeats", unit=MetricUnit.Count, value=report.parked_heartbeats)
    summary = {
        "expired": report.expired,
        "retried": report.retried,
        "timed_out": report.timed_out,
        "deadline_misses": report.deadline_misses,
        "overdue_jobs": report.overdue_jobs,
        "parked_heartbeats": report.parked_heartbeats,
    }
    logger.info("heartbeat check", extra=summary)
    return summary
