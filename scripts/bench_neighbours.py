"""A canary job's lateness with and without each noisy neighbour, side by side (#13).

Each scenario runs the real dispatcher and worker against moto on a virtual clock for N minutes (default
10). A canary team has one job firing every minute; a neighbour team does its worst:
- backlog:    20 jobs back from 50 minutes of outage catch up 1,000 runs in one tick (10 s each);
- hung:       60 jobs every minute whose target never answers (each run holds a worker for 5 minutes);
- stall:      a job whose blackout makes each next-fire computation walk a month (stored past the API's
              admission check, as a job registered before it existed would be);
each with the platform's default team limits, and the first two also with the neighbour's max_running
lifted (what the limit buys). Pages: the canary team's page delivered while 20 pages of a neighbour
whose webhook accepts connections and never answers are in the same batches.

Modelled, and printed as assumptions: the worker class has 50 concurrent invocations and each holds one
run while its target runs (a hung run holds its invocation); the queue hands out visible messages in
the order they were sent (moto's order; SQS fair queues in AWS favour the quiet team further); a tick's
own wall time delays the runs it sends. Lateness = when the worker starts a run minus its instant.

    python scripts/bench_neighbours.py [--minutes 10]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from jobsched.pipeline.ends import AttemptRef, Reported

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the offline stack lives with the tests

from moto import mock_aws

from jobsched.adapters.aws.clients import reset_clients
from jobsched.adapters.aws.notify import Notifier
from jobsched.core.messages import parse_work_message
from jobsched.core.names import WORK_QUEUES
from jobsched.core.runs import RunMessage, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.paging.delivery import PageDelivery, PageNotDelivered, PageSender
from jobsched.registry.jobs import put_job
from jobsched.tenancy.egress import AddressPolicy, GuardedHttp
from tests.aws.harness import Clock, FakeLambdas, Stack
from tests.helpers import silent_server

WORKERS = WORK_QUEUES["normal"].max_concurrency
CANARY = "canary/probe"
START = "2027-01-04T08:59:00Z"


def job(team: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "team": team,
        "schedule": {"expression": "* * * * *"},
        "target": {"type": "callback", "timeout": "10m"},
        "concurrency": {"max_running": 1000, "overlap": "allow"},
        **extra,
    }


@dataclass(order=True)
class Queued:
    visible_at: datetime
    seq: int
    message: Any = field(compare=False)


@dataclass
class Scenario:
    name: str
    setup: Callable[[Stack, Clock], None]
    hold: dict[str, timedelta]  # team -> how long its run holds a worker
    lifted: bool = False  # the neighbour's max_running lifted
    start: str = START


@dataclass
class Result:
    canary: list[float] = field(default_factory=list)  # per instant: started - scheduled
    canary_not_started: int = 0  # instants still waiting at the end (their lateness counts to the end)
    neighbour_started: int = 0
    slowest_tick_s: float = 0.0
    quarantined: int = 0


def simulate(scenario: Scenario, minutes: int) -> Result:
    with mock_aws():
        reset_clients()
        clock = Clock(scenario.start)
        stack = Stack(clock, FakeLambdas(), in_memory_queues=True)
        scenario.setup(stack, clock)
        # The canary joins when the scenario starts; its lateness is measured from then on.
        stack.register(job("canary", "probe", concurrency={"max_running": 1, "overlap": "queue"}))
        started = clock()
        if scenario.lifted:
            stack.jobs.set_team_limits("noisy", {"max_running": 100_000})
        world = _Workers(stack, clock, scenario)
        end = clock() + timedelta(minutes=minutes)
        while clock() < end:
            if clock().second == 0:
                world.tick()
            world.finish_due()
            world.start_ready()
            clock.advance(timedelta(seconds=1))
        ran = {r.scheduled_at for r in stack.run_list(CANARY) if r.started_at is not None}
        due = [started.replace(second=0) + timedelta(minutes=m) for m in range(1, minutes)]
        for instant in due:
            if instant not in ran:
                world.result.canary_not_started += 1
                world.result.canary.append((end - instant).total_seconds())
        reset_clients()
        return world.result


@dataclass
class _Workers:
    """WORKERS invocations taking messages in visibility order, each busy for its team's hold time."""

    stack: Stack
    clock: Clock
    scenario: Scenario
    result: Result = field(default_factory=Result)
    queue: list[Queued] = field(default_factory=list)
    busy: list[tuple[datetime, RunMessage, int]] = field(default_factory=list)  # (free at, message, attempt)
    seq: int = 0

    def drain_sent(self) -> None:
        held = self.stack._held.setdefault("normal", {})
        for raw in list(held.values()):
            message = parse_work_message(raw["Body"])
            assert isinstance(message, RunMessage)
            visible = self.stack.queues.not_before.pop(raw["Body"], None) or parse_instant(message.fire_at)
            self.queue.append(Queued(visible, self.seq, message))
            self.seq += 1
        held.clear()

    def tick(self) -> None:
        began = time.perf_counter()
        report = self.stack.tick()
        spent = time.perf_counter() - began
        self.result.slowest_tick_s = max(self.result.slowest_tick_s, spent)
        self.result.quarantined += report.quarantined
        self.clock.advance(timedelta(seconds=spent))  # the tick's own time delays what it sends
        self.drain_sent()

    def finish_due(self) -> None:
        now = self.clock()
        for free_at, message, attempt in [entry for entry in self.busy if entry[0] <= now]:
            self.busy.remove((free_at, message, attempt))
            hung = message.team == "noisy" and self.scenario.hold.get("noisy", timedelta(0)) > timedelta(minutes=1)
            self.stack.worker.ends.complete(
                AttemptRef(message.job, message.run_id, attempt), Reported(succeeded=not hung, error="ReadTimeoutError")
            )

    def start_ready(self) -> None:
        now = self.clock()
        for entry in sorted(self.queue):
            if len(self.busy) >= WORKERS or entry.visible_at > now:
                break
            self.queue.remove(entry)
            outcome = self.stack.worker.process_any(entry.message)
            self.drain_sent()  # a run that must wait is sent again, to the back of the queue
            if outcome.action != "pending" or outcome.run is None:
                continue
            if entry.message.job == CANARY and outcome.lateness is not None:
                self.result.canary.append(outcome.lateness.total_seconds())
            elif entry.message.team == "noisy":
                self.result.neighbour_started += 1
            hold = self.scenario.hold.get(entry.message.team, timedelta(seconds=1))
            self.busy.append((now + hold, entry.message, outcome.run.attempt))


def backlog(stack: Stack, clock: Clock) -> None:
    catch_up = {"expression": "* * * * *", "catchup": {"policy": "all", "window": "1h", "max_runs": 50}}
    for index in range(20):
        stack.register(job("noisy", f"bulk{index:02d}", schedule=catch_up))
    stack.dispatcher.tick(clock())  # then 50 minutes without a tick
    stack._held.clear()  # (those instants were run before the outage)
    clock.advance(timedelta(minutes=50))


def hung(stack: Stack, clock: Clock) -> None:
    for index in range(60):
        stack.register(job("noisy", f"hung{index:02d}"))


def stall(stack: Stack, clock: Clock) -> None:
    spec = JobSpec.model_validate(
        job(
            "noisy",
            "december",
            schedule={"expression": "* * * * *", "blackouts": [{"cron": "* * 1 12 *", "duration": "31d"}]},
        )
    )
    put_job(stack.jobs, spec, now=clock(), principal="registered-before-admission")


def nothing(stack: Stack, clock: Clock) -> None:
    pass


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


# ------------------------------------------------------------------------------------------ pages


@contextmanager
def quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def page_latency(neighbour_pages: int) -> tuple[float, int]:
    """Seconds until the canary's page is out, delivered in batches of 10 run concurrently (as the
    pages handler does) with ``neighbour_pages`` of a dead webhook ahead of it in the queue."""
    published: list[float] = []

    class Topic:
        def publish(self, **_: Any) -> dict[str, Any]:
            published.append(time.perf_counter())
            return {}

    with silent_server() as dead, quiet():
        sender = PageSender(Notifier(sns=Topic(), http=GuardedHttp(AddressPolicy(allow_loopback=True))), None)
        common = {"title": "t", "text": "x", "document": {}, "attributes": {}}
        pages = [
            PageDelivery(page_id=f"noisy/{i}", destination="webhook", address=dead, team="noisy", **common)
            for i in range(neighbour_pages)
        ]
        pages.append(PageDelivery(page_id="canary/0", destination="topic", address="arn:canary", **common))
        retried = 0
        began = time.perf_counter()

        def deliver(page: PageDelivery) -> None:
            nonlocal retried
            try:
                sender.deliver(page, attempt=1)
            except PageNotDelivered:
                retried += 1

        with ThreadPoolExecutor(max_workers=10) as pool:  # one invocation's batch at a time
            for start in range(0, len(pages), 10):
                list(pool.map(deliver, pages[start : start + 10]))
        return published[0] - began, retried


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    hold_hung = {"noisy": timedelta(minutes=5)}
    scenarios = [
        Scenario("alone", nothing, {}),
        Scenario("backlog", backlog, {"noisy": timedelta(seconds=10)}),
        Scenario("backlog, limit lifted", backlog, {"noisy": timedelta(seconds=10)}, lifted=True),
        Scenario("hung target", hung, hold_hung),
        Scenario("hung target, limit lifted", hung, hold_hung, lifted=True),
        # The lookahead reaches December's window within the scenario.
        Scenario("stalling schedule", stall, {}, start="2027-11-30T23:45:00Z"),
    ]
    print(f"assumptions: {WORKERS} worker invocations in the class, one run each; queue order = send order;")
    print(f"  {args.minutes} virtual minutes per scenario; canary = one job of another team every minute")
    header = ("canary runs", "p50 s", "p99 s", "max s", "noisy started", "slowest tick s")
    widths = (11, 7, 7, 7, 13, 14)
    print(f"{'scenario':28} " + " ".join(f"{h:>{w}}" for h, w in zip(header, widths, strict=True)))
    figures: dict[str, float] = {}
    for scenario in scenarios:
        began = time.perf_counter()
        result = simulate(scenario, args.minutes)
        p50, p99 = percentile(result.canary, 0.5), percentile(result.canary, 0.99)
        worst = max(result.canary, default=float("nan"))
        extra = f" (quarantined {result.quarantined})" if result.quarantined else ""
        if result.canary_not_started:
            extra += f" ({result.canary_not_started} canary runs never started: counted late to the end)"
        print(
            f"{scenario.name:28} {len(result.canary):>11} {p50:>7.1f} {p99:>7.1f} {worst:>7.1f} "
            f"{result.neighbour_started:>13} {result.slowest_tick_s:>14.2f}{extra}"
            f"   [{time.perf_counter() - began:.0f} s to simulate]"
        )
        figures[scenario.name] = p99
    alone_page, _ = page_latency(0)
    busy_page, retried = page_latency(20)
    print(
        f"canary page out after {alone_page:.2f} s alone, {busy_page:.2f} s behind 20 dead-webhook pages "
        f"({retried} of those retried later)"
    )
    print(
        json.dumps(
            {
                "canary_p99_lateness_s": figures,
                "canary_page_s": {"alone": round(alone_page, 2), "dead_webhook": round(busy_page, 2)},
            }
        )
    )


if __name__ == "__main__":
    main()
