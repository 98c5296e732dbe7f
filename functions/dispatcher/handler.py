"""Dispatcher: fired by an EventBridge rule every minute. Parse, call the domain, report."""

from __future__ import annotations

import statistics
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.observability import make_logger, make_metrics, make_tracer
from jobsched.wiring import default_dispatcher, utc_now

logger = make_logger("dispatcher")
metrics = make_metrics("dispatcher")
tracer = make_tracer("dispatcher")


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    now = utc_now()
    report = default_dispatcher().tick(now)
    metrics.add_metric(name="DueJobs", unit=MetricUnit.Count, value=report.due_jobs)
    metrics.add_metric(name="MessagesDispatched", unit=MetricUnit.Count, value=report.messages_sent)
    metrics.add_metric(name="MissedInstants", unit=MetricUnit.Count, value=report.missed)
    metrics.add_metric(name="DispatchRacesLost", unit=MetricUnit.Count, value=report.lost_races)
    metrics.add_metric(name="RetriesWoken", unit=MetricUnit.Count, value=report.retries_woken)
    metrics.add_metric(name="QuarantinedJobs", unit=MetricUnit.Count, value=report.quarantined)
    metrics.add_metric(name="DispatchJobErrors", unit=MetricUnit.Count, value=report.job_errors)
    summary = {
        "tick": now.isoformat(),
        "due_jobs": report.due_jobs,
        "messages_sent": report.messages_sent,
        "missed": report.missed,
        "advanced": report.advanced,
        "lost_races": report.lost_races,
        "retries_woken": report.retries_woken,
        "quarantined": report.quarantined,
        "job_errors": report.job_errors,
        "deferred": report.deferred,
        "max_send_lateness_s": max(report.lateness_seconds, default=0.0),
        "median_send_lateness_s": statistics.median(report.lateness_seconds) if report.lateness_seconds else 0.0,
    }
    logger.info("tick", extra=summary)
    return summary
