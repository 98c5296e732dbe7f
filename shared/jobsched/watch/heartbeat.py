"""The heartbeat checker: runs waiting for an outside result whose lease expired are timed out, and DAG
tasks waiting for their dependencies are heartbeated so their state's HeartbeatSeconds does not run out.

Reads only the sparse ``leases`` index (runs that wait on a callback), so its cost follows the number
of waiting runs, not of registered jobs or past runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobsched.core.names import LEASE_SHARDS, due_shard_count
from jobsched.core.outcome import Outcome
from jobsched.core.run_records import ParkedTask, Run, StaleAttempt
from jobsched.core.runs import TERMINAL, instant_text
from jobsched.paging.escalation_events import SYSTEM, Alerts, EscalationEvent, deadline_event
from jobsched.ports import JobsPort, RunsPort
from jobsched.registry import wheel

# The dispatcher sends each instant up to 14 minutes ahead and then moves the job's next instant on; one
# still waiting this long after it passed was not dispatched.
STALL_AFTER = timedelta(minutes=3)


@dataclass
class CheckReport:
    expired: int = 0
    retried: int = 0
    timed_out: int = 0
    parked_heartbeats: int = 0  # DAG tasks kept alive while they wait for their dependencies
    deadline_misses: int = 0
    overdue_jobs: int = 0  # due instants the dispatcher has not handled (it is stalled or failing)
    stale_jobs: int = 0  # freshness judgements that found a job stale
    budget_crossings: int = 0  # budget thresholds crossed (paged; a hard one paused jobs)
    swept: int = 0  # expired items deleted (``watch.retention``: the hot tables keep no TTL)
    outcomes: list[str] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        """The check's data points, by metric name (``watch.signals.CATALOG``; no dimensions)."""
        return {
            "ExpiredLeases": self.expired,
            "HeartbeatTimeouts": self.timed_out,
            "DeadlineMisses": self.deadline_misses,
            "OverdueJobs": self.overdue_jobs,
            "ParkedTaskHeartbeats": self.parked_heartbeats,
            "StaleJudgements": self.stale_jobs,
        }

    def summary(self) -> dict[str, int]:
        """The check's log line and the handler's answer."""
        return {
            "expired": self.expired,
            "retried": self.retried,
            "timed_out": self.timed_out,
            "deadline_misses": self.deadline_misses,
            "overdue_jobs": self.overdue_jobs,
            "parked_heartbeats": self.parked_heartbeats,
            "stale_jobs": self.stale_jobs,
            "budget_crossings": self.budget_crossings,
            "swept": self.swept,
        }


@dataclass
class HeartbeatChecker:
    runs: RunsPort
    jobs: JobsPort
    alerts: Alerts
    time_out: Callable[[Run], Outcome]  # the worker's rules for a lost attempt (retry or TIMED_OUT)
    heartbeat_parked: Callable[[ParkedTask], bool]  # keeps a DAG task alive while it waits
    # Judges the jobs whose freshness judgement is due, returns how many it found stale (``pipeline.freshness``).
    freshness: Callable[[datetime], int] | None = None
    # Checks the teams' budgets when due (every 15 minutes), returns the thresholds crossed (``planning.budgets``).
    budgets: Callable[[datetime], int] | None = None
    # Deletes a bounded page of expired items from the hot tables (``watch.retention``), returns how many.
    sweep: Callable[[datetime], int] | None = None

    def check(self, now: datetime) -> CheckReport:
        report = CheckReport()
        for shard in range(LEASE_SHARDS):
            self._expired_leases(shard, now, report)
            for run in self.runs.past_deadline(shard, now):
                report.deadline_misses += self._deadline_missed(run, now)
        report.overdue_jobs = self._watch_dispatcher(now)
        if self.freshness is not None:
            report.stale_jobs = self.freshness(now)
        if self.budgets is not None:
            report.budget_crossings = self.budgets(now)
        if self.sweep is not None:
            report.swept = self.sweep(now)
        return report

    def _expired_leases(self, shard: int, now: datetime, report: CheckReport) -> None:
        for run in self.runs.expired_leases(shard, now):
            if isinstance(run, ParkedTask):
                report.parked_heartbeats += int(self.heartbeat_parked(run))
                continue
            report.expired += 1
            try:
                outcome = self.time_out(run)
            except StaleAttempt:
                continue  # a result or heartbeat arrived meanwhile: the fencing decided
            report.outcomes.append(outcome.action)
            if outcome.action == "retrying":
                report.retried += 1
            elif outcome.action == "failed":
                report.timed_out += 1

    def _deadline_missed(self, run: Run, now: datetime) -> int:
        stored = self.jobs.get(run.job, consistent=False)
        if stored is None or stored.spec.deadline is None or run.status in TERMINAL:
            self.runs.deadline_reported(run.job, run.run_id)  # nothing to report: just off the index
            return 0
        if not self.runs.deadline_reported(run.job, run.run_id):
            return 0  # another checker (or the worker, finishing late) reported it
        self.alerts.publish(deadline_event(run, stored.spec, now))
        return 1

    def _watch_dispatcher(self, now: datetime) -> int:
        """The scheduler as its own dead-man's switch: a due instant the dispatcher has not moved past
        within STALL_AFTER means no tick is running (or every tick fails). Pages once per outage; when the
        index is clean again, the incident resolves. The dispatcher's catch-up policy decides, when it is
        back, which of the instants still run and which are recorded MISSED (and escalated per job)."""
        overdue = [
            entry.next_visit_at
            for shard in range(due_shard_count())
            for entry in self.jobs.due(shard, now - STALL_AFTER)
            if entry.backfill_id is None
        ]
        # The timing wheel's jobs are on no due index: where a shard's wheel has not been read for STALL_AFTER (its
        # mark moves every tick), its slots since are read here, and the jobs due on them count as overdue.
        stale = [shard for shard, mark in self.jobs.wheel_marks().items() if mark < now - STALL_AFTER]
        if stale:
            overdue += [entry.next_visit_at for entry in wheel.scan(self.jobs, stale, now - STALL_AFTER).entries]
        if overdue:
            oldest = min(overdue)
            self.alerts.publish(
                EscalationEvent(
                    kind="dispatcher_stalled",
                    subject=SYSTEM,
                    occurred_at=instant_text(now),
                    scheduled_at=instant_text(now.replace(second=0, microsecond=0)),
                    count=len(overdue),
                    lateness_seconds=round((now - oldest).total_seconds(), 3),
                    error=f"{len(overdue)} job(s) overdue; the oldest instant, {instant_text(oldest)}, was not sent",
                    detail="check the dispatcher function's errors and its EventBridge rule",
                )
            )
        elif self.jobs.get_incident(SYSTEM, "dispatcher") is not None:
            self.alerts.publish(
                EscalationEvent(kind="dispatcher_recovered", subject=SYSTEM, occurred_at=instant_text(now))
            )
        return len(overdue)
