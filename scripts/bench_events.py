"""Runs started by events through the local runtime: event-to-start latency, duplicates, losses, and a storm.

1. Latency: RATE events a second for SECONDS over TEAMS teams (one event-triggered job each), put with boto3
   PutEvents on the local stack's default bus; every event delivered once more by EventBridge's at-least-once
   (the same envelope sent to the intake queue a second time). Prints the event-to-start latency (the run's
   start minus the event's time) p50/p99/max, the runs per event (duplicates: more than one), and the events
   without a run (lost).
2. Storm: STORM events within a minute for one job (max_runs_per_minute 60) while another team's minutely
   canary runs: prints the runs started, the events dropped (EventsDropped, from the runs table's absence)
   and the canary's start lateness.

moto and every handler share this machine's cores: the figures are the design's timing on a laptop, not AWS's.

    python scripts/bench_events.py [--rate 100] [--seconds 10] [--teams 10] [--storm 10000]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from infra.local.machine import free_port
from infra.local.runtime import LocalRuntime
from jobsched.core.runs import parse_instant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=int, default=100, help="events a second")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--teams", type=int, default=10)
    parser.add_argument("--storm", type=int, default=10_000, help="events within a minute for one job (0: skip)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    runtime = LocalRuntime(port=free_port(), examples=True).start()
    try:
        import boto3

        from jobsched.client import ApiClient, HttpTransport

        client = ApiClient(HttpTransport(runtime.api_url))
        events = boto3.client("events", endpoint_url=runtime.endpoint, region_name="us-east-1")
        sqs = boto3.client("sqs", endpoint_url=runtime.endpoint, region_name="us-east-1")
        for team in range(args.teams):
            client.call("PUT", f"/teams/team-{team:02d}/jobs/on-event", _job(f"com.bench.t{team:02d}", 1000))
        latency(runtime, client, events, sqs, args)
        if args.storm:
            storm(runtime, client, events, sqs, args.storm)
    finally:
        runtime.stop()


def _job(source: str, per_minute: int) -> dict[str, Any]:
    return {
        "triggers": [{"event": {"pattern": {"source": [source], "detail-type": ["Bench"]}}}],
        "target": {"type": "lambda", "function": "jobsched-example-echo"},
        "concurrency": {"max_running": 1000, "overlap": "allow", "max_runs_per_minute": per_minute},
    }


def latency(runtime: LocalRuntime, client: Any, events: Any, sqs: Any, args: argparse.Namespace) -> None:
    intake = next(url for url in _queue_urls(sqs) if url.endswith("-Events"))
    put_ids: Counter[str] = Counter()
    began = time.monotonic()
    for second in range(args.seconds):
        for start in range(0, args.rate, 10):
            entries = [
                {
                    "Source": f"com.bench.t{(start + i) % args.teams:02d}",
                    "DetailType": "Bench",
                    "Detail": json.dumps({"n": second * args.rate + start + i}),
                }
                for i in range(min(10, args.rate - start))
            ]
            for entry, result in zip(entries, events.put_events(Entries=entries)["Entries"], strict=True):
                put_ids[entry["Source"]] += 1
                assert "EventId" in result, result
        # Redeliver what the rules delivered this second (EventBridge delivers at least once).
        _redeliver(sqs, intake)
        time.sleep(max(0.0, began + second + 1 - time.monotonic()))
    total = sum(put_ids.values())
    deadline = time.monotonic() + 900  # a backlog drains at the local worker's pace
    runs: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        runs = [run for team in range(args.teams) for run in _runs(client, f"team-{team:02d}/on-event")]
        if sum(1 for run in runs if run["started_at"]) >= total:
            break
        time.sleep(2)
    started = [run for run in runs if run["started_at"]]
    delays = sorted(float(run["lateness_seconds"]) for run in started if run["lateness_seconds"] is not None)
    per_event = Counter(run["trigger_detail"]["event_id"] for run in runs if run.get("trigger_detail"))
    duplicates = sum(count - 1 for count in per_event.values() if count > 1)
    print(f"latency: {total} events at {args.rate}/s over {args.teams} teams, each delivered twice")
    print(f"  runs {len(runs)}, started {len(started)}, duplicates {duplicates}, lost {total - len(per_event)}")
    if delays:
        p99 = delays[min(len(delays) - 1, int(0.99 * len(delays)))]
        print(
            f"  event-to-start latency: p50 {statistics.median(delays):.2f} s, p99 {p99:.2f} s, max {delays[-1]:.2f} s"
        )


def storm(runtime: LocalRuntime, client: Any, events: Any, sqs: Any, count: int) -> None:
    client.call("PUT", "/teams/stormy/jobs/on-event", _job("com.bench.storm", 60))
    client.call(
        "PUT",
        "/teams/canary/jobs/minutely",
        {"schedule": {"expression": "* * * * *"}, "target": {"type": "lambda", "function": "jobsched-example-echo"}},
    )
    intake = next(url for url in _queue_urls(sqs) if url.endswith("-Events"))
    # Start at the top of a minute so the storm's minute is one rate window.
    time.sleep(60 - datetime.now(UTC).second + 1)
    began = time.monotonic()
    storm_started = datetime.now(UTC)
    for start in range(0, count, 10):
        entries = [
            {"Source": "com.bench.storm", "DetailType": "Bench", "Detail": json.dumps({"n": start + i})}
            for i in range(min(10, count - start))
        ]
        events.put_events(Entries=entries)
    put_seconds = time.monotonic() - began
    # Until the intake has taken every event (or 30 minutes): what the storm leaves queued is bounded by the
    # intake queue, and what it starts by max_runs_per_minute.
    while time.monotonic() - began < 1800:
        attributes = sqs.get_queue_attributes(
            QueueUrl=intake, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        if (
            int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])
            == 0
        ):
            break
        time.sleep(2)
    drained = time.monotonic() - began
    time.sleep(10)  # the last runs start
    stormy = _runs(client, "stormy/on-event")
    started_at = datetime.now(UTC)
    canary = [
        run
        for run in _runs(client, "canary/minutely")
        if run["lateness_seconds"] is not None and storm_started <= parse_instant(run["scheduled_at"]) <= started_at
    ]
    by_minute = Counter(run["started_at"][:16] for run in stormy if run["started_at"])
    print(f"storm: {count} events put in {put_seconds:.0f} s for one job with max_runs_per_minute 60")
    print(f"  the intake took them all in {drained:.0f} s (this machine's moto and handlers)")
    print(f"  runs {len(stormy)}, dropped (rate_limited) {count - len(stormy)}")
    print(f"  runs started per minute: {dict(sorted(by_minute.items()))}")
    late = sorted(float(run["lateness_seconds"]) for run in canary)
    if late:
        print(f"  another team's minutely canary meanwhile: {len(late)} runs, start lateness max {late[-1]:.2f} s")


def _redeliver(sqs: Any, intake: str) -> None:
    """Send every message now on the intake queue once more, as a second delivery of the same event."""
    seen = sqs.receive_message(QueueUrl=intake, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])
    if seen:
        sqs.send_message_batch(
            QueueUrl=intake, Entries=[{"Id": str(i), "MessageBody": m["Body"]} for i, m in enumerate(seen)]
        )


def _runs(client: Any, job: str) -> list[dict[str, Any]]:
    team, name = job.split("/")
    found: list[dict[str, Any]] = []
    token = None
    while True:
        path = f"/teams/{team}/jobs/{name}/runs?limit=100" + (f"&next_token={token}" if token else "")
        body = client.call("GET", path).body
        found += body["runs"]
        token = body.get("next_token")
        if not token:
            return found


def _queue_urls(sqs: Any) -> list[str]:
    return list(sqs.list_queues().get("QueueUrls", []))


if __name__ == "__main__":
    main()
