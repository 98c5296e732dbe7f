"""The heartbeat checker: runs waiting for an outside result whose lease expired are timed out, and DAG
tasks waiting for their dependencies are heartbeated so their state's HeartbeatSeconds does not run out.

Reads only the sparse ``leases`` index (runs that wait on a callback), so its cost follows the number
of waiting runs, not of registered jobs or past runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from jobsched.aws.runs_store import ParkedTask, RunsStore, StaleAttempt
from jobsched.names import LEASE_SHARDS
from jobsched.worker import Worker


@dataclass
class CheckReport:
    expired: int = 0
    retried: int = 0
    timed_out: int = 0
    parked_heartbeats: int = 0  # DAG tasks kept alive while they wait for their dependencies
    outcomes: list[str] = field(default_factory=list)


@dataclass
class HeartbeatChecker:
    runs: RunsStore
    worker: Worker

    def check(self, now: datetime) -> CheckReport:
        report = CheckReport()
        for shard in range(LEASE_SHARDS):
            for run in self.runs.expired_leases(shard, now):
                if isinstance(run, ParkedTask):
                    report.parked_heartbeats += int(self.worker.dags.heartbeat_parked(run))
                    continue
                report.expired += 1
                try:
                    outcome = self.worker.time_out(run)
                except StaleAttempt:
                    continue  # a result or heartbeat arrived meanwhile: the fencing decided
                report.outcomes.append(outcome.action)
                if outcome.action == "retrying":
                    report.retried += 1
                elif outcome.action == "failed":
                    report.timed_out += 1
        return report
