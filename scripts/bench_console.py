"""How long the console's team page takes for a team of 500 jobs (issue #18's goal: within 2 s).

The stores are in memory with a per-call delay standing in for DynamoDB (a Query of 20 runs, a
BatchGetItem, an eventually consistent GetItem): the page reads each job's runs 16 at a time, so the
figure is the renderer's CPU plus the reads' latency as they overlap. Prints the wall time and the size.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from jobsched.console import render, views
from jobsched.console.widget import WidgetControls
from jobsched.core.records import Run, StoredIncident, StoredJob, TaskState
from jobsched.core.runs import RunStatus
from jobsched.core.spec import JobSpec

NOW = datetime(2027, 1, 4, 12, 0, tzinfo=UTC)
ACTIONS_FN = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-prod-ConsoleActions"
OUTCOMES = [RunStatus.SUCCEEDED] * 16 + [RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.MISSED, RunStatus.SKIPPED]


class Stores:
    def __init__(self, jobs: int, latency_s: float) -> None:
        self.latency = latency_s
        self.specs = {
            f"payments/job-{i:03d}": StoredJob(
                JobSpec.model_validate(
                    {
                        "name": f"job-{i:03d}",
                        "team": "payments",
                        "schedule": {"expression": "H * * * *", "timezone": "Europe/Berlin"},
                        "target": {"type": "callback"},
                    }
                ),
                1,
                "ACTIVE",
                NOW - timedelta(days=30),
                NOW - timedelta(days=30),
                "bench",
            )
            for i in range(jobs)
        }
        rng = random.Random(7)
        self.runs = {
            key: [
                Run(
                    key,
                    f"r{j:02d}",
                    "payments",
                    rng.choice(OUTCOMES),
                    1,
                    NOW - timedelta(hours=j),
                    NOW - timedelta(hours=j),
                    "schedule",
                    1,
                    "c",
                    started_at=NOW - timedelta(hours=j),
                    finished_at=NOW - timedelta(hours=j),
                    lateness_ms=rng.randint(50, 3000),
                )
                for j in range(20)
            ]
            for key in self.specs
        }

    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]:
        time.sleep(self.latency * 3)  # the team index, a page of 500 keys
        return sorted(self.specs)[:limit], None

    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]:
        time.sleep(self.latency * len(jobs) / 100)  # BatchGetItem, 100 keys a call
        return {key: self.specs[key] for key in jobs}

    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None:
        return self.specs.get(job)

    def open_incidents(self, job: str) -> set[str]:
        time.sleep(self.latency)
        return set()

    def open_incident_list(self, *, limit: int = 200) -> list[StoredIncident]:
        return []


class RunsView:
    """The runs side of the same stores (the console reads jobs and runs through two ports)."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores

    def page(
        self, job: str, *, limit: int = 50, newest_first: bool = True, after_run_id: str | None = None
    ) -> tuple[list[Run], str | None]:
        time.sleep(self.stores.latency)
        return self.stores.runs[job][:limit], None

    def get(self, job: str, run_id: str) -> Run | None:
        return next((run for run in self.stores.runs.get(job, []) if run.run_id == run_id), None)

    def tasks(self, job: str, run_id: str) -> dict[str, TaskState]:
        return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--latency-ms", type=float, default=8.0, help="per DynamoDB call")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    stores = Stores(args.jobs, args.latency_ms / 1000)
    # The buttons as CloudWatch gets them: a <cwdb-action> per button, through the team's alias.
    controls = WidgetControls(ACTIONS_FN, frozenset({"payments"}))
    times = []
    for _ in range(args.rounds):
        began = time.perf_counter()
        view = views.team(stores, RunsView(stores), "payments", now=NOW, links=lambda path: None, controls=controls)
        html = render.page(view.title, view.body, standalone=False)
        times.append(time.perf_counter() - began)
    print(f"team_page_jobs={args.jobs} latency_per_call_ms={args.latency_ms}")
    print(
        f"team_page_seconds_median={statistics.median(times):.2f} max={max(times):.2f} html_kb={len(html) / 1024:.0f}"
    )


if __name__ == "__main__":
    main()
