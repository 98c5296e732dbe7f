"""The scale model: a burst of 10,000 / 100,000 / 1,000,000 runs due in one minute, and a steady 10,000 runs a
minute, as they would go in AWS.

1. Calibration, measured here: the real ``Dispatcher`` and ``Worker`` run on the in-memory adapters
   (``jobsched.adapters.memory``) with a virtual clock. CPU time per dispatched job and per run, and the store calls
   and write units each makes, come from that run; the CPU boto3 spends per call (signing, HTTP, parsing)
   from calls to a local HTTP endpoint; a cold start's init from importing the worker handler.
2. The model (``jobsched.planning.scale_model``): those costs, with AWS's published scaling rates, quotas and
   latencies (docs/scale-model.md names the source of each), for two deployments: the defaults, and one
   sized for bursts with the CDK context docs/operate/upgrade-and-cost.md "Sizing for a burst" gives.

Prints, per scenario and deployment: p50/p99/max start lateness, dispatcher seconds per tick, peak worker
concurrency, peak write units per second and the limit that held runs back longest; then
``burst_1000000_p99_lateness_s=``, ``burst_100000_p99_lateness_s=``, ``steady_10000_per_min_p99_lateness_s=``
for the burst-sized deployment (goals: 60 s, 10 s, 1 s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobsched.adapters.memory import MemoryEscalations, MemoryJobs, MemoryRuns, MemoryWorkQueues
from jobsched.core.baseline import LEARN_RUNS, settled_baseline
from jobsched.core.limits import TeamLimits
from jobsched.core.names import WORKER_BATCH
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.runs import RunMessage, parse_instant
from jobsched.core.slo import SloTiers
from jobsched.core.spec import JobSpec
from jobsched.pipeline.baselines import HealthWatch
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.lifecycle import announced
from jobsched.pipeline.slo_ledger import JobTerms, SloLedger
from jobsched.pipeline.worker import Worker
from jobsched.planning.scale_model import AwsLimits, Calibration, Deployment, simulate
from jobsched.schedule.company import NO_COMPANY
from jobsched.schedule.fires import first_fire

ROOT = Path(__file__).resolve().parents[1]
TEAMS = 200
BURST_NIGHT = parse_instant("2027-01-05T00:00:00Z")

# The deployment docs/operate/upgrade-and-cost.md "Sizing for a burst" recommends for a million runs a minute
# (account concurrency raised to 3,000 with Service Quotas).
BURST_SIZED = Deployment(
    dispatchers=32,
    due_shards=64,
    dispatcher_memory_mb=1769,
    worker_memory_mb=1769,
    worker_max_concurrency=1000,
    queues_per_class=8,
    warm_wcu=40000,
    account_concurrency=3000,
)
# The same with two more quotas raised: the table's write throughput to 80,000 units a second, the
# account's concurrency to 5,000.
QUOTAS_RAISED = replace(BURST_SIZED, warm_wcu=80000, account_concurrency=5000)
QUOTAS_RAISED_LIMITS = AwsLimits(ddb_table_quota_wcu=80000)


class VirtualClock:
    def __init__(self, start: str) -> None:
        self.now = parse_instant(start)

    def __call__(self) -> datetime:
        return self.now


class InstantTargets:
    """Every target answers at once (the model adds the target's own time)."""

    def execute(self, target: Any, context: RunContext) -> TargetResult:
        return TargetResult("succeeded", output="ok")


def counts(jobs: MemoryJobs, runs: MemoryRuns, queues: MemoryWorkQueues) -> tuple[int, Counter[str], int]:
    """(DynamoDB calls, write units by what serves them: each table and each of its indexes, SQS requests) so far."""
    calls = sum(t.capacity.reads + t.capacity.writes for t in (jobs.table, runs.table))
    units = Counter(jobs.table.capacity.by_store("jobs")) + Counter(runs.table.capacity.by_store("runs"))
    return calls, units, queues.requests


def per_item(units: Counter[str], count: int) -> tuple[tuple[str, float], ...]:
    return tuple((store, value / count) for store, value in sorted(units.items()))


def calibrate_pipeline(jobs_count: int) -> dict[str, Any]:
    """Daily jobs at 00:00 spread over teams: one dispatcher tick plans them all, then the worker runs each (with
    the run's end metered as deployed: its usage and SLO count in one write, its job's baseline judged and, one
    night in four, learned)."""
    clock = VirtualClock("2027-01-04T23:00:00Z")
    jobs = MemoryJobs(team_defaults=TeamLimits(max_running=100_000, max_jobs=100_000))
    runs, queues, escalations = MemoryRuns(), MemoryWorkQueues(clock), MemoryEscalations()
    for index in range(jobs_count):
        spec = JobSpec.model_validate(
            {
                "name": f"nightly-{index}",
                "team": f"team-{index % TEAMS}",
                "schedule": {"expression": "0 0 * * *"},
                "target": {"type": "lambda", "function": "echo"},
            }
        )
        jobs.create(
            spec,
            now=clock(),
            principal="bench",
            cursor=clock(),
            next_visit_at=first_fire(spec, registered_at=clock(), after=clock(), company=NO_COMPANY),
        )
        # A nightly job after weeks of runs, as the burst night finds it: a quarter of them learn that night.
        jobs.put_health(spec.key, baseline=settled_baseline(timedelta(days=1), BURST_NIGHT, index))
    for table in (jobs.table, runs.table):
        table.capacity.reset()
    dispatcher = Dispatcher(jobs, runs, queues, escalations=escalations)
    clock.now = parse_instant("2027-01-04T23:58:00Z")
    before, started = counts(jobs, runs, queues), time.process_time()
    report = dispatcher.tick(clock())
    dispatch_cpu = time.process_time() - started
    after = counts(jobs, runs, queues)
    assert report.messages_sent == jobs_count, report
    # As deployed (``wiring.metered_runs``): each attempt's usage and each ended run's SLO count, one write at the
    # run's end (#51), and the job's health: the run judged against its baseline, which learns now and then.
    terms = JobTerms(jobs)
    health = HealthWatch(jobs, runs, lambda _event: None, clock, terms)
    ledger = announced(runs, SloLedger(jobs, SloTiers(), terms), health)
    worker = Worker(jobs, ledger, queues, escalations, InstantTargets(), clock, usage=jobs)
    clock.now = BURST_NIGHT
    messages = queues.receive("normal", limit=jobs_count, now=clock())
    started = time.process_time()
    for start in range(0, len(messages), WORKER_BATCH):  # as the event source delivers them: batches of ten
        batch = [queued.message for queued in messages[start : start + WORKER_BATCH]]
        assert all(isinstance(message, RunMessage) for message in batch)
        for outcome in worker.process_batch(batch):
            assert outcome.action == "succeeded", outcome
    worker_cpu = time.process_time() - started
    done = counts(jobs, runs, queues)
    return {
        "dispatch_cpu_per_job_s": dispatch_cpu / jobs_count,
        "dispatch_calls_per_job": (after[0] - before[0]) / jobs_count,
        "dispatch_sqs_per_job": (after[2] - before[2]) / jobs_count,
        "dispatch_wcu_by_store": per_item(after[1] - before[1], jobs_count),
        "worker_cpu_per_run_s": worker_cpu / jobs_count,
        "worker_calls_per_run": (done[0] - after[0]) / jobs_count,
        "worker_wcu_by_store": per_item(done[1] - after[1], jobs_count),
    }


def sdk_cpu_per_call(calls: int = 400) -> float:
    """CPU seconds boto3 spends on one DynamoDB UpdateItem (sign, send over HTTP, parse), measured in the
    calling thread against a local endpoint that answers at once."""
    import boto3

    class Answer(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"Attributes": {"pk": {"S": "a"}, "status": {"S": "RUNNING"}}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-amz-json-1.0")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        endpoint_url=f"http://127.0.0.1:{server.server_port}",
    )
    request = {
        "TableName": "runs",
        "Key": {"job": {"S": "team/job"}, "run_id": {"S": "20270105T000000Z"}},
        "UpdateExpression": "SET #s = :s",
        "ConditionExpression": "#s = :old AND attempt = :a",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":s": {"S": "SUCCEEDED"}, ":old": {"S": "RUNNING"}, ":a": {"N": "1"}},
        "ReturnValues": "ALL_NEW",
    }
    client.update_item(**request)
    started = time.thread_time()
    for _ in range(calls):
        client.update_item(**request)
    spent = time.thread_time() - started
    server.shutdown()
    return spent / calls


def init_cpu() -> float:
    """CPU seconds to import the worker handler in a fresh interpreter: a cold start's init phase."""
    code = "import time; t = time.process_time(); import functions.worker.handler; print(time.process_time() - t)"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'shared'}", "JOBSCHED_STAGE": "dev"}
    output = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return float(output.stdout.strip().splitlines()[-1])


def burst(runs: int) -> list[float]:
    return [0.0] * runs  # all due at the same second: the worst case of "the same minute"


def steady(per_minute: int, minutes: int) -> list[float]:
    return [60.0 * minute for minute in range(minutes) for _ in range(per_minute)]


def report(
    name: str,
    deployment_name: str,
    fire_at: list[float],
    deployment: Deployment,
    calibration: Calibration,
    *,
    settled_after: float | None = None,
    **options: Any,
) -> float:
    """Model one scenario and print its line; returns p99 lateness (of runs due from ``settled_after`` on:
    a steady load is judged once the event source has scaled to it)."""
    started = time.perf_counter()
    result = simulate(fire_at, deployment, calibration, **options)
    if settled_after is not None:
        ordered = sorted(fire_at)
        result.lateness = [late for due, late in zip(ordered, result.lateness, strict=True) if due >= settled_after]
    p50, p99 = result.percentile(0.50), result.percentile(0.99)
    print(
        f"{name:<22} {deployment_name:<10} p50 {p50:7.1f} s  p99 {p99:7.1f} s  max {max(result.lateness):7.1f} s  "
        f"dispatcher {result.dispatcher_seconds_per_tick:5.1f} s/tick ({result.dispatch_ticks} part-ticks, "
        f"{result.late_sends} sent late)  peak concurrency {result.peak_concurrency:5d}  "
        f"peak WCU/s {result.peak_wcu_per_second:8.0f}  held back by: {result.binding}  "
        f"[{time.perf_counter() - started:.1f} s to model]"
    )
    return p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibration-jobs", type=int, default=2000)
    parser.add_argument("--skip-million", action="store_true", help="leave out the 1,000,000 burst (faster)")
    args = parser.parse_args()

    measured = calibrate_pipeline(args.calibration_jobs)
    calibration = Calibration(**measured, sdk_cpu_per_call_s=sdk_cpu_per_call(), init_cpu_s=init_cpu())
    print(f"calibration ({args.calibration_jobs} jobs through the real dispatcher and worker on memory adapters):")
    for name, value in vars(calibration).items():
        shown = (
            ", ".join(f"{store} {units:.2f}" for store, units in value) if isinstance(value, tuple) else f"{value:.5f}"
        )
        print(f"  {name} = {shown}")
    print(f"  worker write units a run, all stores: {calibration.worker_wcu_per_run:.2f}")
    print(
        f"  per job, dispatcher CPU with boto3: {calibration.dispatch_cpu() * 1000:.2f} ms; "
        f"per run, worker CPU with boto3: {calibration.worker_cpu() * 1000:.2f} ms (one full vCPU)"
    )
    limits = AwsLimits()
    print("AWS numbers (docs/scale-model.md):", ", ".join(f"{k}={v}" for k, v in vars(limits).items()))
    defaults = Deployment()
    print("deployments:")
    print(f"  default: {defaults}")
    print(f"  sized:   {BURST_SIZED}")
    print(f"  quotas+: {QUOTAS_RAISED}")
    sizes = [10_000, 100_000] + ([] if args.skip_million else [1_000_000])
    figures: dict[str, float] = {}
    for runs in sizes:
        load = burst(runs)
        report(f"burst {runs:,}", "default", load, defaults, calibration)
        figures[f"burst_{runs}_p99_lateness_s"] = report(f"burst {runs:,}", "sized", load, BURST_SIZED, calibration)
        report(f"burst {runs:,}", "quotas+", load, QUOTAS_RAISED, calibration, limits=QUOTAS_RAISED_LIMITS)
    if not args.skip_million:
        # What binds the million: the busiest store's write units a run. As it was before #51, with the run's end in
        # two writes (usage, then the SLO count), the job's baseline written at each nightly run (at one in
        # ``LEARN_RUNS`` since) and every store's units counted against one table's throughput.
        load = burst(1_000_000)
        before = (("jobs", calibration.worker_wcu_per_run + 1.0 + (1 - 1 / LEARN_RUNS)),)
        report("burst 1,000,000", "before #51", load, BURST_SIZED, replace(calibration, worker_wcu_by_store=before))
    # Minutely jobs: their messages were claimed by earlier ticks (lookahead), so the queue has them in time.
    # Ten minutes from a cold event source; p99 over the last five, once it has scaled to the load.
    steady_load = steady(10_000, 10)
    for name, deployment in (("default", defaults), ("sized", BURST_SIZED), ("quotas+", QUOTAS_RAISED)):
        p99 = report(
            "steady 10,000/min", name, steady_load, deployment, calibration, dispatched=False, settled_after=300.0
        )
        if name == "sized":
            figures["steady_10000_per_min_p99_lateness_s"] = p99
    print(
        "default: as deployed without context; sized: with the operator guide's burst context (account concurrency"
        " 3,000); quotas+: also table writes 80,000/s and account concurrency 5,000"
    )
    for name, value in figures.items():
        print(f"{name}={value:.2f}")


if __name__ == "__main__":
    main()
