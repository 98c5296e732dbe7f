"""Logger, metrics and tracer for every handler, made in one place.

Metric dimensions are bounded: service, team, priority, outcome. Job and run ids go into structured
logs (and the runs table), never into dimensions.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

NAMESPACE = "jobsched"


def make_logger(service: str) -> Logger:
    return Logger(service=f"jobsched-{service}")


def make_metrics(service: str) -> Metrics:
    metrics = Metrics(namespace=NAMESPACE, service=service)
    return metrics


def make_tracer(service: str) -> Tracer:
    return Tracer(service=f"jobsched-{service}")


def emit_run_outcome(
    metrics: Metrics, *, team: str, priority: str, action: str, lateness_seconds: float | None
) -> None:
    """One data point per processed run message: the SLIs success rate, lateness, duplicates, retries."""
    from aws_lambda_powertools.metrics import single_metric

    with single_metric(name="RunOutcome", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="team", value=team)
        metric.add_dimension(name="priority", value=priority)
        metric.add_dimension(name="outcome", value=action)
    # The same count by outcome alone: alarms cannot sum across teams, the SLO alarms read this one.
    with single_metric(name="RunsByOutcome", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="outcome", value=action)
    if lateness_seconds is not None:
        with single_metric(
            name="FireLatenessSeconds", unit=MetricUnit.Seconds, value=lateness_seconds, namespace=NAMESPACE
        ) as metric:
            metric.add_dimension(name="priority", value=priority)


def emit_escalation(metrics: Metrics, *, team: str, kind: str, pages: int, paused: bool) -> None:
    """Escalation SLIs: events by kind (timeouts, missed instants, deadline misses, circuits) and the pages
    they caused, so "100 failures, 1 page" is visible on the dashboard."""
    from aws_lambda_powertools.metrics import single_metric

    with single_metric(name="EscalationEvents", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="team", value=team)
        metric.add_dimension(name="outcome", value=kind)
    with single_metric(name="Pages", unit=MetricUnit.Count, value=pages, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="outcome", value=kind)
    if paused:
        with single_metric(name="AutoPauses", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
            metric.add_dimension(name="team", value=team)


def emit_page(metrics: Metrics, *, destination: str, outcome: str) -> None:
    """Page deliveries by destination (topic, webhook) and outcome (sent, fallback, retry, undeliverable):
    a dead webhook shows as retries and fallbacks here, not as slow incident handling."""
    from aws_lambda_powertools.metrics import single_metric

    with single_metric(name="PageDeliveries", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="destination", value=destination)
        metric.add_dimension(name="outcome", value=outcome)
