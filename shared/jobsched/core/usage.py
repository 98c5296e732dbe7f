"""What an attempt used, and what that costs (``core.prices``): the scheduler's share (its table units, queue
requests, its functions' invocations and GB-seconds, events) and, where the target's price can be known, the
target's own (a Lambda function's billed GB-seconds and request, a Fargate task's vCPU- and GB-seconds, a state
machine's transitions). Kept as counters in one item per team, job and day (``ports.UsagePort``): a month's
chargeback adds at most 31 items a job, never the runs.

The scheduler's share of an attempt is modelled, not metered: DynamoDB returns no consumed units per run, so the
units are those ``scripts/bench_pipeline.py`` measures for a minutely job's run (5.6 write units: 4.6 on its way,
this item's own write with the run's SLO count among them, and 1.0 for its delete by the sweeper once its retention
has passed; 3.5 read units; an hourly job's run measures 9.2 and 4.0, its due-index move: the model undercounts
those), and 3 queue requests. A target's own usage is
what the target reported (Lambda's billed duration and memory size in its log tail; the task's size and its
running time), and is left out, never guessed, where it did not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobsched.core.prices import PriceTable
from jobsched.core.runs import parse_instant
from jobsched.core.tz import UTC

# Counter names (attributes of the usage item): the scheduler's share, then the target's.
ATTEMPTS = "attempts"
RUNS = "runs"
WRITE_UNITS = "write_units"
READ_UNITS = "read_units"
QUEUE_REQUESTS = "queue_requests"
FUNCTION_REQUESTS = "function_requests"
FUNCTION_GB_SECONDS = "function_gb_seconds"
EVENTS = "events"
TRANSITIONS = "transitions"  # the deployment's DAG state machine's: a DAG run's, counted at its end
TARGET_FUNCTION_REQUESTS = "target_function_requests"
TARGET_FUNCTION_GB_SECONDS = "target_function_gb_seconds"
TARGET_VCPU_SECONDS = "target_vcpu_seconds"
TARGET_GB_SECONDS = "target_gb_seconds"
TARGET_TRANSITIONS = "target_transitions"
SCHEDULER_COUNTERS = (
    WRITE_UNITS,
    READ_UNITS,
    QUEUE_REQUESTS,
    FUNCTION_REQUESTS,
    FUNCTION_GB_SECONDS,
    EVENTS,
    TRANSITIONS,
)
TARGET_COUNTERS = (
    TARGET_FUNCTION_REQUESTS,
    TARGET_FUNCTION_GB_SECONDS,
    TARGET_VCPU_SECONDS,
    TARGET_GB_SECONDS,
    TARGET_TRANSITIONS,
)
COUNTERS = (ATTEMPTS, RUNS, *SCHEDULER_COUNTERS, *TARGET_COUNTERS)

# One attempt of a run through the scheduler (dispatch, claim, result, ledger and health writes; the worker's
# share of a batch of 10): the model scripts/bench_pipeline.py checks against what it measures.
WORKER_MEMORY_GB = 0.256
SCHEDULER_PER_ATTEMPT: Mapping[str, float] = {
    WRITE_UNITS: 5.6,  # 4.6 on the run's way (this item's ADD one of them) and 1.0 its delete by the sweeper
    READ_UNITS: 3.5,
    QUEUE_REQUESTS: 3.0,  # send, receive, delete
    FUNCTION_REQUESTS: 0.2,  # the worker's invocation (10 a batch) and the dispatcher's tick, shared
    FUNCTION_GB_SECONDS: WORKER_MEMORY_GB * 0.12,  # the worker's time on it, and the dispatcher's share
    EVENTS: 1.0,  # "Run Finished" on the deployment's bus
}

_REPORT = re.compile(r"Billed Duration: (\d+) ms\s+Memory Size: (\d+) MB")


def dag_run_usage(tasks: int) -> dict[str, float]:
    """A DAG run, counted at its end: one run, and its state machine's transitions (one a task, and its start, as
    ``scripts/bench_pipeline.py`` counts them for the example pipelines). Its tasks are attempts of their own."""
    return {RUNS: 1.0, TRANSITIONS: 1.0 + tasks}


def lambda_report_usage(log_tail: str) -> dict[str, float]:
    """A Lambda function's own usage from the REPORT line of its log tail (``LogType: Tail``); empty without one."""
    found = _REPORT.search(log_tail)
    if found is None:
        return {}
    billed_ms, memory_mb = int(found.group(1)), int(found.group(2))
    return {TARGET_FUNCTION_REQUESTS: 1.0, TARGET_FUNCTION_GB_SECONDS: billed_ms / 1000 * memory_mb / 1024}


def task_usage(vcpu: float, memory_gb: float, seconds: float) -> dict[str, float]:
    """A Fargate task's (or a Batch job's on Fargate) billed size over its running time (a minute at least)."""
    billed = max(seconds, 60.0)
    return {TARGET_VCPU_SECONDS: vcpu * billed, TARGET_GB_SECONDS: memory_gb * billed}


@dataclass(frozen=True)
class Cost:
    scheduler: float  # USD
    target: float

    @property
    def total(self) -> float:
        return self.scheduler + self.target


def cost_of(counters: Mapping[str, float], prices: PriceTable) -> Cost:
    """What ``counters`` cost at ``prices`` (the scheduler's functions on arm64, a team's Lambda on x86)."""

    def n(name: str) -> float:
        return float(counters.get(name, 0.0))

    scheduler = (
        n(WRITE_UNITS) * prices.write_unit
        + n(READ_UNITS) * prices.read_unit
        + n(QUEUE_REQUESTS) * prices.queue_request
        + n(FUNCTION_REQUESTS) * prices.function_request
        + n(FUNCTION_GB_SECONDS) * prices.function_gb_second_arm
        + n(EVENTS) * prices.event_put
        + n(TRANSITIONS) * prices.state_transition
    )
    target = (
        n(TARGET_FUNCTION_REQUESTS) * prices.function_request
        + n(TARGET_FUNCTION_GB_SECONDS) * prices.function_gb_second_x86
        + n(TARGET_VCPU_SECONDS) * prices.fargate_vcpu_hour / 3600
        + n(TARGET_GB_SECONDS) * prices.fargate_gb_hour / 3600
        + n(TARGET_TRANSITIONS) * prices.state_transition
    )
    return Cost(scheduler, target)


def attempt_usage(target_usage: Mapping[str, float], *, first_attempt: bool) -> dict[str, float]:
    """One attempt's counters: the scheduler's modelled share, and what the target reported."""
    counters = {ATTEMPTS: 1.0, RUNS: 1.0 if first_attempt else 0.0, **SCHEDULER_PER_ATTEMPT}
    for name, value in target_usage.items():
        if name in TARGET_COUNTERS:
            counters[name] = counters.get(name, 0.0) + float(value)
    return counters


def work_usage(detail: dict[str, Any]) -> tuple[dict[str, float], datetime] | None:
    """A Fargate task's (ECS) or Fargate job's (Batch) billed size and time from its state change, with when it
    stopped; None for work whose price is not the team's to know here (EC2 capacity, an EKS pod)."""
    if "taskArn" in detail and detail.get("launchType") == "FARGATE":
        started, stopped = detail.get("startedAt") or detail.get("createdAt"), detail.get("stoppedAt")
        cpu, memory = detail.get("cpu"), detail.get("memory")
        if not (started and stopped and cpu and memory):
            return None
        begun, ended = parse_instant(str(started)), parse_instant(str(stopped))
        seconds = (ended - begun).total_seconds()
        return task_usage(float(cpu) / 1024, float(memory) / 1024, seconds), ended
    if "jobId" in detail and "FARGATE" in (detail.get("platformCapabilities") or []):
        needs = {
            r.get("type"): r.get("value") for r in (detail.get("container") or {}).get("resourceRequirements") or []
        }
        started, stopped = detail.get("startedAt"), detail.get("stoppedAt")
        if not (started and stopped and needs.get("VCPU") and needs.get("MEMORY")):
            return None
        ended = datetime.fromtimestamp(int(stopped) / 1000, tz=UTC)
        seconds = (int(stopped) - int(started)) / 1000
        return task_usage(float(needs["VCPU"]), float(needs["MEMORY"]) / 1024, seconds), ended
    return None
