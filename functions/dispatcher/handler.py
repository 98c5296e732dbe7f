"""Dispatcher: fired by an EventBridge rule every minute. Parse, call the domain, report."""

from __future__ import annotations

import statistics
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.observability import make_logger, make_tracer
from jobsched.signals import emit
from jobsched.wiring import default_dispatcher, utc_now

logger = make_logger("dispatcher")
tracer = make_tracer("dispatcher")


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    now = utc_now()
    report = default_dispatcher().tick(now)
    emit("DueJobs", report.due_jobs)
    emit("MessagesDispatched", report.messages_sent)
    emit("MissedInstants", report.missed)
    emit("LostRunMessages", report.lost)
    emit("DispatchRacesLost", report.lost_races)
    emit("RetriesWoken", report.retries_woken)
    emit("QuarantinedJobs", report.quarantined)
    emit("DispatchJobErrors", report.job_errors)
    summary = {
        "tick": now.isoformat(),
        "due_jobs": report.due_jobs,
        "messages_sent": report.messages_sent,
        "missed": report.missed,
        "lost": report.lost,
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
