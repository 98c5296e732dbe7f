"""Every metric jobsched publishes, defined once: the handlers emit through ``emit``, and the stack's
alarms and dashboard widgets query through the same definitions (``infra/components/observability.py``), so an alarm can
only watch a (namespace, name, dimension set) that a handler really publishes.

Powertools adds a ``service`` dimension to every metric when ``POWERTOOLS_SERVICE_NAME`` is set (it is,
in Lambda). CloudWatch treats ``{outcome}`` and ``{outcome, service}`` as different metrics, and an alarm
cannot sum across them, so ``emit`` leaves ``service`` out: the dimension sets below are exact. Every
dimension is bounded (team, priority, outcome, destination); never a job or run id.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.base import SingleMetric

from jobsched.core.names import Env

NAMESPACE = "jobsched"


class Component(StrEnum):
    WORKER = "worker"
    DISPATCHER = "dispatcher"
    HEARTBEAT = "heartbeat"
    ESCALATION = "escalation"
    PAGES = "pages"
    EVENTS = "events"


@dataclass(frozen=True)
class MetricDef:
    name: str
    unit: MetricUnit
    dimensions: tuple[str, ...]
    emitter: Component
    purpose: str  # the SLI (reference M1-M8), alarm or widget that reads it


def _catalog(*definitions: MetricDef) -> dict[str, MetricDef]:
    return {definition.name: definition for definition in definitions}


COUNT, SECONDS = MetricUnit.Count, MetricUnit.Seconds
W, D, H, E, P = Component.WORKER, Component.DISPATCHER, Component.HEARTBEAT, Component.ESCALATION, Component.PAGES
EV = Component.EVENTS
CATALOG = _catalog(
    # The worker: one data point per processed run message.
    MetricDef("RunOutcome", COUNT, ("team", "priority", "outcome"), W, "M1 success rate per team (dashboards)"),
    MetricDef(
        "RunsByOutcome",
        COUNT,
        ("outcome",),
        W,
        "run messages by what the worker did: M5 (duplicate: a suppressed redelivery; duplicate_execution: an "
        "attempt that ran twice, alarmed by DuplicateExecutions), M6 (waiting)",
    ),
    MetricDef("FireLatenessSeconds", SECONDS, ("priority",), W, "M2 fire lateness: FireLatenessP99"),
    MetricDef(
        "EventStartLatencySeconds", SECONDS, (), W, "event-to-start latency of runs started by events: EventStartP99"
    ),
    MetricDef("RecordsReceived", COUNT, (), W, "worker batch sizes (debug)"),
    # Once per run, wherever it ends (worker, API callback, heartbeat time-out, DAG run, MISSED).
    MetricDef("RunsFinished", COUNT, ("outcome",), W, "M1 success rate: SloFastBurn, SloSlowBurn"),
    MetricDef(
        "TierRunsEnded",
        COUNT,
        ("tier", "outcome"),
        W,
        "runs counted by their SLO tier (outcome good or bad), and freshness judgements (the heartbeat checker's: "
        "stale is bad): SloFastBurn<Tier>, SloSlowBurn<Tier>",
    ),
    MetricDef(
        "RunAnomalies",
        COUNT,
        ("kind",),
        W,
        "runs far outside their job's learned baseline, by kind (slow, fast, late) (dashboards)",
    ),
    MetricDef("RunDurationSeconds", SECONDS, (), W, "M3 completion time p50/p95/p99 (dashboards)"),
    MetricDef("RunsRetried", COUNT, (), W, "M4 retry rate (on-call)"),
    MetricDef(
        "ChecksFailed",
        COUNT,
        ("severity",),
        W,
        "quality gates failed on finished runs (error: the run failed; warn: it succeeded, and paged) (dashboards)",
    ),
    MetricDef("RunEventsUnpublished", COUNT, (), W, "Run Finished events EventBridge did not take (on-call)"),
    MetricDef("UsageUnrecorded", COUNT, (), W, "attempts whose usage the chargeback does not hold (on-call)"),
    # Waits for data (wait_for): one per wait begun, and per wait ended (met or timed out, with its length).
    MetricDef("WaitsBegun", COUNT, (), W, "runs and DAG tasks that began waiting for data (on-call)"),
    MetricDef("WaitSeconds", SECONDS, (), W, "how long waits for data lasted, p50/p95 (on-call)"),
    MetricDef("WaitTimeouts", COUNT, (), W, "waits for data that timed out: WaitTimeouts"),
    # The dispatcher: one data point per tick.
    MetricDef("DueJobs", COUNT, (), D, "due jobs per tick (debug)"),
    MetricDef("MessagesDispatched", COUNT, (), D, "run messages sent per tick (debug)"),
    MetricDef("MissedInstants", COUNT, (), D, "instants recorded MISSED (on-call)"),
    MetricDef("LostRunMessages", COUNT, (), D, "LostRunMessages: sent instants found without a run record"),
    MetricDef("DispatchRacesLost", COUNT, (), D, "concurrent dispatchers (debug)"),
    MetricDef("RetriesWoken", COUNT, (), D, "long retries sent from the wake index (debug)"),
    MetricDef("QuarantinedJobs", COUNT, (), D, "JobsQuarantined"),
    MetricDef("DispatchJobErrors", COUNT, (), D, "jobs left due after an error (on-call)"),
    # The heartbeat checker: one data point per check.
    MetricDef("ExpiredLeases", COUNT, (), H, "runs whose worker died (on-call)"),
    MetricDef("HeartbeatTimeouts", COUNT, (), H, "callback runs that went silent (on-call)"),
    MetricDef("DeadlineMisses", COUNT, (), H, "SLA deadlines missed (on-call)"),
    MetricDef("OverdueJobs", COUNT, (), H, "jobs whose instant passed without dispatch (on-call)"),
    MetricDef("ParkedTaskHeartbeats", COUNT, (), H, "DAG tasks kept alive while they wait (debug)"),
    MetricDef("StaleJudgements", COUNT, (), H, "freshness judgements that found a job stale (on-call)"),
    # Escalation and pages.
    MetricDef("EscalationEvents", COUNT, ("team", "outcome"), E, "M8 escalation rate (on-call)"),
    MetricDef("Pages", COUNT, ("outcome",), E, "pages decided: one per incident (on-call)"),
    MetricDef("AutoPauses", COUNT, ("team",), E, "jobs auto-paused (on-call)"),
    MetricDef("PageDeliveries", COUNT, ("destination", "outcome"), P, "page delivery: retries, fallbacks"),
    # The event intake: one data point per event a trigger rule delivered.
    MetricDef("EventsReceived", COUNT, (), EV, "events delivered by trigger rules (dashboards)"),
    MetricDef("EventsMatched", COUNT, (), EV, "events a current trigger of an active job matched (dashboards)"),
    MetricDef("EventsDeduplicated", COUNT, (), EV, "redelivered events that named a run already there (dashboards)"),
    MetricDef(
        "EventsDropped",
        COUNT,
        ("reason",),
        EV,
        "events that started no run, by reason (deleted, stale_rule, paused, before_job, not_owned, rate_limited, "
        "malformed): EventsRefused alarms on not_owned and malformed",
    ),
)


class UnknownMetric(ValueError):
    pass


Sink = Callable[[str, float, dict[str, str]], None]
_sinks: list[Sink] = []  # besides stdout (the local runtime evaluates alarms from these)


def add_sink(sink: Sink) -> None:
    _sinks.append(sink)


def remove_sink(sink: Sink) -> None:
    if sink in _sinks:
        _sinks.remove(sink)


def emit(name: str, value: float, **dimensions: str) -> None:
    """Print one metric as CloudWatch EMF, with exactly its catalog dimensions."""
    definition = CATALOG.get(name)
    if definition is None:
        raise UnknownMetric(f"{name} is not in jobsched.watch.signals.CATALOG")
    if set(dimensions) != set(definition.dimensions):
        raise UnknownMetric(f"{name} takes dimensions {definition.dimensions}, not {tuple(dimensions)}")
    if value == 0 and definition.unit is COUNT and os.environ.get(Env.ZERO_METRICS) == "off":
        # CloudWatch bills each custom metric for every hour it is published in; alarms treat the gap as
        # not breaching, so a stage that turns zeros off pays nothing for metrics while idle.
        return
    metric = SingleMetric(namespace=NAMESPACE, service="")  # "": no service dimension (module docstring)
    metric.add_metric(name=name, unit=definition.unit, value=value)
    for dimension in definition.dimensions:
        metric.add_dimension(name=dimension, value=dimensions[dimension])
    print(json.dumps(metric.serialize_metric_set(), separators=(",", ":")))
    for sink in list(_sinks):
        sink(name, value, dict(dimensions))
