"""Fire lateness through the local runtime: N jobs (default 500) every minute for 3 minutes.

Lateness = the worker's start of a run minus its scheduled instant. Prints p50, p99 and max, the rate at which
each minute's runs started (runs a second from its first start to its last), and the duplicates found (runs
per (job, instant) beyond one, and executions per (run, attempt) beyond one).
moto's server is the bottleneck locally (hundreds of requests a second on one core): this measures the
design's timing on a laptop, not AWS's.

    python scripts/bench_lateness.py [--jobs 500] [--minutes 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from infra.local.machine import free_port
from infra.local.runtime import LocalRuntime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument(
        "--per-team",
        type=int,
        default=10,
        help="jobs per team (teams are held to max_running 20 each: more jobs per team measure that limit)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    runtime = LocalRuntime(port=free_port(), examples=True).start()  # the rule's own 60 s tick
    from jobsched.client import ApiClient, HttpTransport

    client = ApiClient(HttpTransport(runtime.api_url))
    began = time.monotonic()
    for index in range(args.jobs):
        client.call(
            "PUT",
            f"/teams/{_team(index, args.per_team)}/jobs/job-{index:04d}",
            {
                "schedule": {"expression": "* * * * *"},
                "target": {"type": "lambda", "function": "jobsched-example-echo"},
                "concurrency": {"max_running": 1, "overlap": "allow"},
            },
        )
    print(f"registered {args.jobs} jobs in {time.monotonic() - began:.1f} s")
    now = datetime.now(UTC)
    first = (now + timedelta(minutes=1)).replace(second=0, microsecond=0)
    last = first + timedelta(minutes=args.minutes - 1)
    while datetime.now(UTC) < last + timedelta(seconds=45):
        time.sleep(5)
    measured = _measure(client, args.jobs, args.per_team, first, last, args.minutes)
    lateness, by_minute, duplicates, missing = (
        measured.lateness,
        measured.by_minute,
        measured.duplicates,
        measured.missing,
    )
    # A DAG run's tasks share its run id and attempt (the example pipeline calls echo from four tasks): the task
    # names the execution too.
    executions = Counter(
        (e["jobsched"]["job"], e["jobsched"]["run_id"], e["jobsched"].get("task"), e["jobsched"]["attempt"])
        for e in runtime.invocations("jobsched-example-echo")
    )
    duplicate_executions = sum(c - 1 for c in executions.values())
    for key, count in executions.items():
        if count > 1:
            print(f"executed {count} times: {key}")
    if missing:
        import boto3

        sqs = boto3.client("sqs", endpoint_url=runtime.endpoint, region_name="us-east-1")
        for url in sqs.list_queues()["QueueUrls"]:
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            print(url.rsplit("/", 1)[-1], {k: v for k, v in attributes.items() if k.startswith("Approximate")})
    runtime.stop()
    lateness.sort()
    p99 = lateness[min(len(lateness) - 1, int(len(lateness) * 0.99))] if lateness else float("nan")
    teams = (args.jobs + args.per_team - 1) // args.per_team
    print(f"jobs={args.jobs} teams={teams} minutes={args.minutes} runs_measured={len(lateness)} missing={missing}")
    print(
        f"lateness_p50_s={statistics.median(lateness):.3f} lateness_p99_s={p99:.3f} lateness_max_s={max(lateness):.3f}"
    )
    print(f"duplicate_runs={duplicates} duplicate_executions={duplicate_executions}")
    rates = []
    for minute, values in sorted(by_minute.items()):
        values.sort()
        # Runs a second while the minute's runs start: from its first start to its last, so the dispatcher's own
        # sending before the first start is not counted as the workers' slowness.
        spread = values[-1] - values[0]
        rate = (len(values) - 1) / spread if spread > 0 else float("inf")
        rates.append(rate)
        print(
            f"  {minute:%H:%M}: {len(values)} runs, p50 {statistics.median(values):.2f} s, max {values[-1]:.2f} s,"
            f" started over {spread:.1f} s: {rate:.1f} runs/s"
        )
    if rates:
        print(f"start_rate_runs_per_s={min(rates):.1f} (the slowest minute)")


@dataclass
class Measured:
    lateness: list[float] = field(default_factory=list)
    by_minute: dict[datetime, list[float]] = field(default_factory=dict)
    duplicates: int = 0
    missing: int = 0


def _measure(client: Any, jobs: int, per_team: int, first: datetime, last: datetime, minutes: int) -> Measured:
    """Every job's scheduled runs in [first, last]: lateness, duplicates, and instants with no run."""
    measured = Measured()
    for index in range(jobs):
        runs = client.paged(f"/teams/{_team(index, per_team)}/jobs/job-{index:04d}/runs", "runs")
        scheduled = [r for r in runs if r["trigger"] == "schedule" and first <= _instant(r["scheduled_at"]) <= last]
        counts = Counter(r["scheduled_at"] for r in scheduled)
        measured.duplicates += sum(c - 1 for c in counts.values())
        measured.missing += minutes - len(counts)
        for offset in range(minutes):
            instant = first + timedelta(minutes=offset)
            if not any(_instant(at) == instant for at in counts):
                print(f"missing: job-{index:04d} {instant:%H:%M}")
        for r in scheduled:
            if r["lateness_seconds"] is not None:
                measured.lateness.append(r["lateness_seconds"])
                measured.by_minute.setdefault(_instant(r["scheduled_at"]), []).append(r["lateness_seconds"])
    return measured


def _team(index: int, per_team: int) -> str:
    return f"bench{index // per_team}"


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


if __name__ == "__main__":
    main()
