"""Team A's event storm against team B's event-started runs and the scheduler's own events (#44), before and after
the intake drops a storm early.

Team A has 100 jobs whose s3 triggers all match its landing bucket (``max_runs_per_minute: 1``); 100 objects
land at once: 10,000 intake messages. Team B's job is triggered by its own events, one every half second from
the moment the storm lands (each lands behind all of A's on the queue), and B's downstream job runs after B's
upstream (Run Finished, one every half second too).

The real intake (``EventIntake``) handles every message against moto, on a virtual clock: INTAKE_CONCURRENCY
consumers take the intake queue's messages in the order they were sent (moto's order; SQS fair queues in AWS
favour the quiet team further, so this is the worst case), each consumer a process with its own budget, each
message taking the time its handling took here. "Before" is the intake with its early drop switched off (every
event read and counted, as before #44) and Run Finished on the same queue; "after" is the intake as it is, and
Run Finished on the scheduler's own queue with its SYSTEM_INTAKE_CONCURRENCY consumers. Event start latency =
when B's message was handled minus when it arrived.

    python scripts/bench_event_storm.py [--objects 100] [--jobs 100]
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the offline stack lives with the tests

from moto import mock_aws

from jobsched.adapters.aws.clients import reset_clients
from jobsched.adapters.aws.run_events import run_finished_detail
from jobsched.core.events import EventEnvelope, trigger_fingerprint
from jobsched.core.names import INTAKE_CONCURRENCY, SYSTEM_INTAKE_CONCURRENCY
from jobsched.core.run_records import Run
from jobsched.core.runs import RunMessage, RunStatus, instant_text, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.pipeline.intake import EventIntake
from tests.aws.harness import Clock, FakeLambdas, Stack

START = "2027-01-04T09:00:00Z"
QUIET_EVENTS = 20  # team B's events (and its upstream's finishes), one every half second
SPACING = timedelta(seconds=0.5)


@dataclass(order=True)
class Message:
    arrives: float  # seconds after the storm lands
    seq: int
    envelope: EventEnvelope = field(compare=False)
    team: str = field(compare=False)
    kind: str = field(compare=False)  # storm, event, finished


@dataclass
class Figures:
    quiet: list[float] = field(default_factory=list)  # team B's event start latency, seconds
    finished: list[float] = field(default_factory=list)  # Run Finished to its downstream's start
    drained_s: float = 0.0  # when the last of A's storm was handled
    storm_work_s: float = 0.0  # handling time spent on A's storm, summed


Specs = tuple[list[JobSpec], JobSpec, JobSpec, JobSpec]


class NoBudget:
    """The intake as before #44: every event read, checked and counted."""

    def refusal(self, job: str, team: str, now: datetime) -> str | None:
        return None

    def exhausted(self, job: str, now: datetime) -> None:
        return None


def setup(stack: Stack, jobs: int) -> Specs:
    stack.jobs.set_team_limits("alpha", {"max_bus_rules": 1000})  # the platform let team A have its 100 rules
    stack.sessions.client("alpha", "s3").create_bucket(Bucket="alpha-landing")
    stack.sessions.client("alpha", "s3").put_bucket_tagging(
        Bucket="alpha-landing", Tagging={"TagSet": [{"Key": "jobsched-team", "Value": "alpha"}]}
    )
    noisy = [
        stack.register(
            {
                "name": f"load-{index:03d}",
                "team": "alpha",
                "triggers": [{"s3": {"bucket": "alpha-landing"}}],
                "target": {"type": "callback"},
                "concurrency": {"max_running": 1000, "overlap": "allow", "max_runs_per_minute": 1},
            }
        )
        for index in range(jobs)
    ]
    quiet = stack.register(
        {
            "name": "orders",
            "team": "beta",
            "triggers": [{"event": {"pattern": {"source": ["beta.orders"]}}}],
            "target": {"type": "callback"},
            "concurrency": {"max_running": 1000, "overlap": "allow"},
        }
    )
    upstream = stack.register({"name": "extract", "team": "beta", "target": {"type": "callback"}})
    downstream = stack.register(
        {
            "name": "report",
            "team": "beta",
            "triggers": [{"after": {"job": "beta/extract"}}],
            "target": {"type": "callback"},
            "concurrency": {"max_running": 1000, "overlap": "allow"},
        }
    )
    return noisy, quiet, upstream, downstream


def envelope(spec: JobSpec, event: dict[str, Any]) -> EventEnvelope:
    header = {"job": spec.key, "trigger": trigger_fingerprint(spec.triggers[0])}
    return EventEnvelope.model_validate({"jobsched": header, "event": event})


def object_created(key: str, at: datetime, sequencer: int) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "source": "aws.s3",
        "detail-type": "Object Created",
        "time": instant_text(at),
        "detail": {"bucket": {"name": "alpha-landing"}, "object": {"key": key, "sequencer": f"{sequencer:016X}"}},
    }


def finished_upstream(stack: Stack, upstream: JobSpec, at: datetime) -> Run:
    message = RunMessage.scheduled(job=upstream.key, team="beta", at=at, fire_at=at, spec_version=1)
    stack.runs.create(message, status=RunStatus.SCHEDULED, now=at, retention=timedelta(days=1))
    stack.runs.finish(
        upstream.key, message.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=at, from_status=RunStatus.SCHEDULED
    )
    run = stack.runs.get(upstream.key, message.run_id)
    assert run is not None
    return run


def messages(stack: Stack, specs: Specs, objects: int, landed: datetime) -> tuple[list[Message], list[Message]]:
    """(intake queue, the scheduler's own events) in the order they arrive."""
    noisy, quiet, upstream, downstream = specs
    seq = iter(range(10**9))
    storm = [
        Message(0.0, next(seq), envelope(job, object_created(f"drop/{obj}.csv", landed, obj)), "alpha", "storm")
        for obj in range(objects)
        for job in noisy
    ]
    events, finishes = [], []
    for index in range(QUIET_EVENTS):
        offset = (index + 1) * SPACING
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "source": "beta.orders",
            "detail-type": "OrderBatchReady",
            "time": instant_text(landed + offset),
            "detail": {"batch": index},
        }
        events.append(Message(offset.total_seconds(), next(seq), envelope(quiet, event), "beta", "event"))
        run = finished_upstream(stack, upstream, landed - timedelta(hours=index + 1))
        done = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "source": "jobsched",
            "detail-type": "Run Finished",
            "time": instant_text(landed + offset),
            "detail": run_finished_detail(run),
        }
        finishes.append(Message(offset.total_seconds(), next(seq), envelope(downstream, done), "beta", "finished"))
    return sorted(storm + events), finishes


def serve(queue: list[Message], consumers: list[EventIntake], landed: datetime, figures: Figures) -> None:
    """Each consumer takes the next message in arrival order when it is free; a message takes as long as its
    handling took here."""
    free = [(0.0, index) for index in range(len(consumers))]
    heapq.heapify(free)
    for message in queue:
        at, index = heapq.heappop(free)
        begins = max(at, message.arrives)
        began = time.perf_counter()
        received = consumers[index].receive(message.envelope, now=landed + timedelta(seconds=begins))
        spent = time.perf_counter() - began
        ends = begins + spent
        heapq.heappush(free, (ends, index))
        if message.kind == "storm":
            figures.drained_s, figures.storm_work_s = max(figures.drained_s, ends), figures.storm_work_s + spent
        elif received.action == "started":
            (figures.quiet if message.kind == "event" else figures.finished).append(ends - message.arrives)


def run(objects: int, jobs: int, *, before: bool) -> Figures:
    with mock_aws():
        reset_clients()
        clock = Clock(START)
        stack = Stack(clock, FakeLambdas(functions={}), in_memory_queues=True)
        landed = parse_instant(START) + timedelta(minutes=1)
        intake_queue, system_queue = messages(stack, setup(stack, jobs), objects, landed)

        def consumers(count: int) -> list[EventIntake]:
            made = [EventIntake(stack.jobs, stack.runs, stack.queues, guard=stack.guard) for _ in range(count)]
            for consumer in made:
                if before:
                    consumer.budget = NoBudget()  # type: ignore[assignment]
            return made

        figures = Figures()
        if before:  # Run Finished behind the storm on the one intake queue
            serve(sorted(intake_queue + system_queue), consumers(INTAKE_CONCURRENCY), landed, figures)
        else:
            serve(intake_queue, consumers(INTAKE_CONCURRENCY), landed, figures)
            serve(system_queue, consumers(SYSTEM_INTAKE_CONCURRENCY), landed, figures)
        reset_clients()
        return figures


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def lines(objects: int, jobs: int) -> Iterator[str]:
    yield (
        f"== team A's storm: {objects} objects x {jobs} rules = {objects * jobs} intake messages at once "
        f"(max_runs_per_minute 1 each); team B: {QUIET_EVENTS} events and {QUIET_EVENTS} Run Finished, one every "
        f"{SPACING.total_seconds():g} s; {INTAKE_CONCURRENCY} intake consumers, FIFO (moto's order)"
    )
    for label, before in (("before (every event read and counted)", True), ("after (#44)", False)):
        figures = run(objects, jobs, before=before)
        yield (
            f"{label}: team B event start p50 {percentile(figures.quiet, 0.5):.2f} s, "
            f"p99 {percentile(figures.quiet, 0.99):.2f} s; Run Finished -> downstream start "
            f"p99 {percentile(figures.finished, 0.99):.2f} s; A's storm handled by {figures.drained_s:.1f} s "
            f"({figures.storm_work_s:.1f} s of intake work)"
        )
        key = "before" if before else "after"
        yield f"storm_b_event_start_p99_s[{key}]={percentile(figures.quiet, 0.99):.2f}"
        yield f"storm_run_finished_p99_s[{key}]={percentile(figures.finished, 0.99):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()
    for line in lines(args.objects, args.jobs):
        print(line, flush=True)


if __name__ == "__main__":
    main()
