"""How long the console's team page and team timeline take for a team of 500 jobs (issue #18's goal:
within 2 s), and how big they are (CloudWatch takes at most 6 MB from a custom widget).

The stores are in memory with a per-call delay standing in for DynamoDB (a Query of a page of runs, a
BatchGetItem, an eventually consistent GetItem): the views read each job's runs 16 at a time, so the
figure is the renderer's CPU plus the reads' latency as they overlap. Each job runs hourly and has a week
of runs, so the timeline over the last 7 days is full: every row, every column.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from jobsched.console import render, views
from jobsched.console.widget import WidgetControls, no_links
from jobsched.core.records import AuditEntry, DispatchState, StoredIncident, StoredJob
from jobsched.core.run_records import Run, TaskState
from jobsched.core.runs import RunStatus
from jobsched.core.spec import JobSpec
from jobsched.watch.run_search import RunFilter

NOW = datetime(2027, 1, 4, 12, 0, tzinfo=UTC)
ACTIONS_FN = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-prod-ConsoleActions"
HISTORY_HOURS = 7 * 24
OUTCOMES = [RunStatus.SUCCEEDED] * 16 + [RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.MISSED, RunStatus.SKIPPED]


class Stores:
    def __init__(self, jobs: int, latency_s: float, now: datetime = NOW, **schedule: object) -> None:
        self.latency = latency_s
        self.specs = {
            f"payments/job-{i:03d}": StoredJob(
                JobSpec.model_validate(
                    {
                        "name": f"job-{i:03d}",
                        "team": "payments",
                        "schedule": {"expression": "H * * * *", "timezone": "Europe/Berlin"} | schedule,
                        "target": {"type": "callback"},
                    }
                ),
                1,
                "ACTIVE",
                now - timedelta(days=30),
                now - timedelta(days=30),
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
                    now - timedelta(hours=j),
                    now - timedelta(hours=j),
                    "schedule",
                    1,
                    "c",
                    started_at=now - timedelta(hours=j),
                    finished_at=now - timedelta(hours=j),
                    lateness_ms=rng.randint(50, 3000),
                )
                for j in range(HISTORY_HOURS)
            ]
            for key in self.specs
        }

    def company_entries(self) -> dict[str, dict[str, object]]:
        time.sleep(self.latency)  # one query of the company partition
        return {}

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

    def downstreams(self, job: str) -> list[str]:
        return []

    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        return [], None  # the explain page is not timed here

    def get_state(self, job: str) -> DispatchState | None:
        return None


class RunsView:
    """The runs side of the same stores (the console reads jobs and runs through two ports)."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores

    def page(
        self,
        job: str,
        *,
        limit: int = 50,
        newest_first: bool = True,
        after_run_id: str | None = None,
        between: tuple[str, str] | None = None,
    ) -> tuple[list[Run], str | None]:
        time.sleep(self.stores.latency)
        start = int(after_run_id or 0)
        runs = self.stores.runs[job]
        if between is not None:
            runs = [run for run in runs if between[0] <= run.run_id <= between[1]]
        more = start + limit < len(runs)
        return runs[start : start + limit], (str(start + limit) if more else None)

    def matching(
        self, job: str, *, first: str, last: str, where: RunFilter, evaluate: int, limit: int
    ) -> tuple[list[Run], str | None]:
        """By time and status only (the search page is not timed here)."""
        runs = [run for run in self.stores.runs.get(job, []) if first <= run.run_id <= last]
        found = [run for run in runs if not where.statuses or run.status in where.statuses]
        return sorted(found, key=lambda run: run.run_id, reverse=True), None

    def get(self, job: str, run_id: str) -> Run | None:
        return next((run for run in self.stores.runs.get(job, []) if run.run_id == run_id), None)

    def tasks(self, job: str, run_id: str) -> dict[str, TaskState]:
        return {}

    def history(self, job: str, *, limit: int = 50, newest_first: bool = True) -> list[Run]:
        return self.page(job, limit=limit, newest_first=newest_first)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--latency-ms", type=float, default=8.0, help="per DynamoDB call")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    stores = Stores(args.jobs, args.latency_ms / 1000)
    # The buttons as CloudWatch gets them: a <cwdb-action> per button, through the team's alias.
    controls = WidgetControls(ACTIONS_FN, frozenset({"payments"}))
    runs = RunsView(stores)
    print(f"team_jobs={args.jobs} latency_per_call_ms={args.latency_ms} runs_per_job={HISTORY_HOURS}")

    def timeline(stores: Stores, now: datetime) -> views.View:
        start = now - timedelta(days=7)
        return views.team_timeline(stores, RunsView(stores), "payments", start=start, end=now, now=now, links=no_links)

    # The timeline's costly weeks: one across Berlin's spring DST change (the engine is stepped around it
    # for every row), and one where every job has a holiday calendar (stepped over the whole week).
    across_dst = datetime(2027, 3, 31, 12, 0, tzinfo=UTC)
    dst = Stores(args.jobs, args.latency_ms / 1000, across_dst)
    holidays = Stores(args.jobs, args.latency_ms / 1000, NOW, calendar={"skip_holidays": "DE"})
    shown: dict[str, Callable[[], views.View]] = {
        "team_page": lambda: views.team(stores, runs, "payments", now=NOW, links=no_links, controls=controls),
        "team_timeline_7d": lambda: timeline(stores, NOW),
        "team_timeline_7d_across_dst": lambda: timeline(dst, across_dst),
        "team_timeline_7d_holiday_calendars": lambda: timeline(holidays, NOW),
    }
    for name, view_of in shown.items():
        times = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            view = view_of()
            html = render.page(view.title, view.body, standalone=False)
            times.append(time.perf_counter() - began)
        print(
            f"{name}_seconds_median={statistics.median(times):.2f} max={max(times):.2f} html_kb={len(html) / 1024:.0f}"
        )


if __name__ == "__main__":
    main()
