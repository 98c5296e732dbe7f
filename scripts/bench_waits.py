"""Waits for data: how soon a waiting run starts after its object lands, and what a 2-hour wait costs.

1. Wake-up latency (the local runtime, moto's S3 sending Object Created to EventBridge): RUNS manual runs of
   one job wait, each for its own object; the objects are put one by one and each run's start minus its
   object's put is measured (p50/p99/max). moto and every handler share this machine's cores.
2. Cost of a wait (the memory adapters, the worker's own code on a virtual clock): one run that waits
   2 hours for an object that never lands (the worst case: every poll, then the time-out), and one whose
   object lands after an hour without its event (met by a poll). Counted: S3 HeadObject, SQS requests,
   worker invocations, DynamoDB reads and writes; priced at us-east-1 on-demand list prices.

    python scripts/bench_waits.py [--runs 30] [--skip-local] | grep -v "^{"   # the handlers log JSON to stdout
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from datetime import datetime, timedelta
from typing import Any

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.data_checks import MemoryDataChecks
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.pipeline.worker import Worker
from jobsched.registry.jobs import put_job

PRICE_WRITE_UNIT = 0.625e-6
PRICE_READ_UNIT = 0.125e-6  # a strongly consistent read of up to 4 KB (an eventually consistent one: half)
PRICE_SQS_REQUEST = 0.40e-6
PRICE_S3_HEAD = 0.4e-6  # GET-class request
PRICE_LAMBDA_REQUEST = 0.20e-6
PRICE_GB_SECOND = 0.0000133334
WORKER_GB_SECONDS_PER_CHECK = 0.25 * 0.05  # 256 MB for 50 ms: a record that reads, checks and re-sends
ECHO = {"type": "lambda", "function": "jobsched-example-echo"}
BUCKET = "examples-landing"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--skip-local", action="store_true", help="only the cost of a wait (no local runtime)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    cost_of_a_wait("2-hour wait, object never lands (times out)", lands_after=None)
    met_late = "2-hour wait, object lands after 1 h, its event lost (met by a poll)"
    cost_of_a_wait(met_late, lands_after=timedelta(hours=1))
    if not args.skip_local:
        wake_latency(args.runs)


# ------------------------------------------------------------------------------------------- cost


class Echo:
    def execute(self, target: Any, context: RunContext) -> TargetResult:
        return TargetResult("succeeded", output="ok")


def cost_of_a_wait(title: str, *, lands_after: timedelta | None) -> None:
    start = parse_instant("2027-03-01T02:00:00Z")
    clock = [start]
    jobs, runs = MemoryJobs(), MemoryRuns()
    queues, checks = MemoryWorkQueues(lambda: clock[0]), MemoryDataChecks(owners={BUCKET: "data"})
    worker = Worker(jobs, runs, queues, MemoryEscalations(), Echo(), lambda: clock[0], checks=checks, waiters=jobs)
    spec = JobSpec.model_validate(
        {
            "name": "nightly",
            "team": "data",
            "target": ECHO,
            "wait_for": [{"s3": f"s3://{BUCKET}/exports/{{logical_date:%Y-%m-%d}}/_SUCCESS"}],
            "wait": {"timeout": "2h"},
        }
    )
    put_job(jobs, spec, now=start - timedelta(days=1), principal="bench")
    jobs.table.capacity.reads = jobs.table.capacity.writes = 0
    message = RunMessage.scheduled(job=spec.key, team="data", at=start, fire_at=start, spec_version=1)
    deliveries = 1
    worker.process(message)
    while (visible := queues.next_visible("normal")) is not None:
        clock[0] = visible
        if lands_after is not None and clock[0] - start >= lands_after:
            checks.put(BUCKET, "exports/2027-03-01/_SUCCESS")
        for queued in queues.receive("normal", limit=10):
            deliveries += 1
            worker.process_any(queued.message)
    run = runs.get(spec.key, message.run_id)
    assert run is not None and run.status in (RunStatus.FAILED, RunStatus.SUCCEEDED)
    reads = runs.table.capacity.reads + jobs.table.capacity.reads
    writes = runs.table.capacity.writes + jobs.table.capacity.writes
    sqs = (deliveries - 1) * 3  # each poll: its send, its receive and its delete (batched by the event source)
    lambda_cost = deliveries * (PRICE_LAMBDA_REQUEST + WORKER_GB_SECONDS_PER_CHECK * PRICE_GB_SECOND)
    s3_requests = 2 * checks.checks  # each HeadObject, and at worst a GetBucketTagging (tags cached 5 minutes)
    cost = (
        s3_requests * PRICE_S3_HEAD
        + sqs * PRICE_SQS_REQUEST
        + reads * PRICE_READ_UNIT
        + writes * PRICE_WRITE_UNIT
        + lambda_cost
    )
    ended = run.finished_at if run.status is RunStatus.FAILED else run.started_at
    print(f"{title}: ended {run.status.value} after {ended - start if ended else '?'}")
    print(
        f"  worker deliveries {deliveries} (the first, then polls), S3 requests {s3_requests} (HeadObject"
        f" {checks.checks}, GetBucketTagging at most as many), SQS requests {sqs}, DynamoDB reads {reads},"
        f" writes {writes}"
    )
    print(f"  cost ${cost * 1e6:,.0f} per million such runs (${cost:.6f} each): the wait, and a met run's own start")


# ---------------------------------------------------------------------------------------- latency


def wake_latency(count: int) -> None:
    from infra.local.machine import free_port
    from infra.local.runtime import LocalRuntime

    logging.getLogger().setLevel(logging.WARNING)
    runtime = LocalRuntime(port=free_port(), examples=True).start()
    try:
        import boto3

        from jobsched.client import ApiClient, HttpTransport

        client = ApiClient(HttpTransport(runtime.api_url))
        s3 = boto3.client("s3", endpoint_url=runtime.endpoint, region_name="us-east-1")
        body = {
            "target": ECHO,
            "wait_for": [{"s3": f"s3://{BUCKET}/bench/{{logical_date:%Y%m%dT%H%M%S}}.ready"}],
            "wait": {"timeout": "30m"},
        }
        client.call("PUT", "/teams/examples/jobs/wait-bench", body)
        started = []
        for _ in range(count):
            run = client.call("POST", "/teams/examples/jobs/wait-bench/trigger", {}).body
            started.append(run)
            time.sleep(1.05)  # one logical second each: each run waits for its own object
        for run in started:
            until(lambda run=run: status(client, run["run_id"]) == "WAITING", 60)
        landed: dict[str, float] = {}
        for run in started:
            key = "bench/" + parse_instant(run["scheduled_at"]).strftime("%Y%m%dT%H%M%S") + ".ready"
            landed[run["run_id"]] = time.time()
            s3.put_object(Bucket=BUCKET, Key=key, Body=b"")
            time.sleep(0.5)
        until(lambda: all(status(client, run["run_id"]) == "SUCCEEDED" for run in started), 120)
        latencies = sorted(seconds(detail(client, run_id)["started_at"]) - put_at for run_id, put_at in landed.items())
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        print(
            f"wake-up latency (object put -> run started), {len(latencies)} runs, local:"
            f" p50 {statistics.median(latencies):.2f} s, p99 {p99:.2f} s, max {latencies[-1]:.2f} s"
        )
    finally:
        runtime.stop()


def detail(client: Any, run_id: str) -> dict[str, Any]:
    return dict(client.call("GET", f"/teams/examples/jobs/wait-bench/runs/{run_id}").body)


def status(client: Any, run_id: str) -> str:
    return str(detail(client, run_id).get("status"))


def until(check: Any, seconds_allowed: float) -> None:
    deadline = time.monotonic() + seconds_allowed
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise SystemExit(f"not within {seconds_allowed} s")


def seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    main()
