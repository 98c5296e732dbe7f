"""Jobs after other jobs through the local runtime: how soon a downstream starts after its upstream finished.

PAIRS upstream jobs (minutely, over TEAMS teams) each with a downstream that runs after it, plus one
downstream after ALL of the first three (same schedule, so their instants line up), for MINUTES minutes.
Prints the downstream start latency (its start minus the upstream run's end) p50/p99/max, and per
downstream the runs against the upstream instants: one each, none twice, none missing.

moto and every handler share this machine's cores: the figures are the design's timing on a laptop, not AWS's.

    python scripts/bench_after.py [--pairs 10] [--teams 5] [--minutes 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from datetime import datetime
from typing import Any

from infra.local.machine import free_port
from infra.local.runtime import LocalRuntime

ECHO = {"type": "lambda", "function": "jobsched-example-echo"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--teams", type=int, default=5)
    parser.add_argument("--minutes", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    runtime = LocalRuntime(port=free_port(), examples=True).start()
    try:
        from jobsched.client import ApiClient, HttpTransport

        client = ApiClient(HttpTransport(runtime.api_url))
        pairs = [
            (f"team-{i % args.teams:02d}/up-{i:02d}", f"team-{i % args.teams:02d}/down-{i:02d}")
            for i in range(args.pairs)
        ]
        for upstream, downstream in pairs:
            put(client, upstream, {"schedule": {"expression": "* * * * *"}, "target": ECHO})
            put(client, downstream, {"target": ECHO, "triggers": [{"after": {"job": upstream}}]})
        # One downstream after all of the first three (three teams): the others share their runs with team-00.
        everyone = [up for up, _ in pairs[:3]]
        for upstream in everyone:
            put(client, upstream, {"schedule": {"expression": "* * * * *"}, "target": ECHO, "share_with": ["team-00"]})
        put(client, "team-00/after-all", {"target": ECHO, "triggers": [{"after": {"all": everyone}}]})
        registered = time.time()  # upstream runs that ended before their downstream existed start nothing
        time.sleep(args.minutes * 60 + 20)
        report(client, pairs, everyone, registered)
    finally:
        runtime.stop()


def put(client: Any, job: str, body: dict[str, Any]) -> None:
    team, name = job.split("/")
    client.call("PUT", f"/teams/{team}/jobs/{name}", body)


def runs(client: Any, job: str) -> list[dict[str, Any]]:
    team, name = job.split("/")
    return list(client.call("GET", f"/teams/{team}/jobs/{name}/runs?limit=100").body["runs"])


def report(client: Any, pairs: list[tuple[str, str]], everyone: list[str], registered: float) -> None:
    latencies: list[float] = []
    duplicates = missing = 0
    for upstream, downstream in pairs:
        finished = {
            r["scheduled_at"]: r
            for r in runs(client, upstream)
            if r["finished_at"] and seconds(r["finished_at"]) > registered
        }
        after = runs(client, downstream)
        per_instant: dict[str, int] = {}
        for run in after:
            per_instant[run["scheduled_at"]] = per_instant.get(run["scheduled_at"], 0) + 1
            up = finished.get(run["scheduled_at"])
            if up is not None and run["started_at"]:
                latencies.append(seconds(run["started_at"]) - seconds(up["finished_at"]))
        duplicates += sum(count - 1 for count in per_instant.values() if count > 1)
        missing += sum(1 for instant in finished if instant not in per_instant)
    latencies.sort()
    print(f"after one job: {len(pairs)} pairs, {len(latencies)} downstream runs")
    print(f"  duplicates {duplicates}, missing {missing}")
    if latencies:
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        p50, top = statistics.median(latencies), latencies[-1]
        print(f"  downstream start after the upstream's end: p50 {p50:.2f} s, p99 {p99:.2f} s, max {top:.2f} s")
    instants = [
        {
            r["scheduled_at"]
            for r in runs(client, upstream)
            if r["status"] == "SUCCEEDED" and seconds(r["finished_at"]) > registered
        }
        for upstream in everyone
    ]
    common = set.intersection(*instants)
    after_all = runs(client, "team-00/after-all")
    print(
        f"after all of {len(everyone)}: {len(common)} instants all succeeded, {len(after_all)} runs,"
        f" {len({r['scheduled_at'] for r in after_all})} distinct instants"
    )


def seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    main()
