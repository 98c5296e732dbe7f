"""What one dispatcher tick did: its counts, its metrics and its log line."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TickReport:
    due_jobs: int = 0
    messages_sent: int = 0
    missed: int = 0
    lost: int = 0  # instants the audit found without a run record (their message was lost)
    audits_sent: int = 0  # sparse jobs' sent instants, each with its audit message (``sent_audits``)
    advanced: int = 0
    lost_races: int = 0  # another dispatcher (or a spec change) advanced first: our sends were duplicates
    retries_woken: int = 0
    backfills_advanced: int = 0
    job_errors: int = 0  # jobs left due after an error (tried again next tick)
    quarantined: int = 0  # jobs paused because their schedule costs more than its budget
    deferred: int = 0  # due jobs left for the next tick because this one ran out of time
    changes_settled: int = 0  # spec changes a crash left half written, finished by this tick
    lateness_seconds: list[float] = field(default_factory=list)  # how late each sent instant already was
    # (job, team, run ids) per job whose instants went out: the handler logs them, so a run's logs begin here
    sent: list[tuple[str, str, list[str]]] = field(default_factory=list)

    def merge(self, other: TickReport) -> None:
        """Add the counts of one job's part of the tick (jobs are finished concurrently, each on its own)."""
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)

    def metrics(self) -> dict[str, float]:
        """The tick's data points, by metric name (``watch.signals.CATALOG``; no dimensions)."""
        return {
            "DueJobs": self.due_jobs,
            "MessagesDispatched": self.messages_sent,
            "MissedInstants": self.missed,
            "LostRunMessages": self.lost,
            "DispatchRacesLost": self.lost_races,
            "RetriesWoken": self.retries_woken,
            "QuarantinedJobs": self.quarantined,
            "DispatchJobErrors": self.job_errors,
        }

    def summary(self) -> dict[str, Any]:
        """The tick's log line and the handler's answer."""
        lateness = self.lateness_seconds
        return {
            "due_jobs": self.due_jobs,
            "messages_sent": self.messages_sent,
            "missed": self.missed,
            "lost": self.lost,
            "audits_sent": self.audits_sent,
            "advanced": self.advanced,
            "lost_races": self.lost_races,
            "retries_woken": self.retries_woken,
            "quarantined": self.quarantined,
            "job_errors": self.job_errors,
            "changes_settled": self.changes_settled,
            "deferred": self.deferred,
            "max_send_lateness_s": max(lateness, default=0.0),
            "median_send_lateness_s": statistics.median(lateness) if lateness else 0.0,
        }
