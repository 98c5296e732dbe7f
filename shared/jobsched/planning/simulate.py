"""``jobsched simulate``: every instant a set of jobs has in a range, fired or skipped, with no cap.

Streams the schedule engine's occurrences (what the dispatcher would do), so a year of a 15-minute job is
35,040 fires counted one by one, never held in memory at once. Per job: fires, skipped and moved instants
by reason, DST events met; across all jobs: the busiest minutes.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from jobsched.core.spec import JobSpec
from jobsched.schedule.company import NO_COMPANY, CompanySettings
from jobsched.schedule.engine import Occurrence
from jobsched.schedule.fires import preview_schedule


@dataclass
class JobSimulation:
    job: str
    fires: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # reason kind -> instants
    moved: Counter[str] = field(default_factory=Counter)  # shifted out of a DST gap, deferred by a blackout
    dst_events: list[str] = field(default_factory=list)  # "2027-03-14 02:30 (DST gap: shifted to 03:30)"
    first: datetime | None = None
    last: datetime | None = None


@dataclass
class Simulation:
    start: datetime
    end: datetime
    jobs: list[JobSimulation]
    per_minute: Counter[datetime]

    @property
    def fires(self) -> int:
        return sum(job.fires for job in self.jobs)

    def busiest(self, count: int = 10) -> list[tuple[datetime, int]]:
        return heapq.nlargest(count, self.per_minute.items(), key=lambda item: (item[1], -item[0].timestamp()))


def simulate(
    specs: Iterable[JobSpec],
    *,
    start: datetime,
    end: datetime,
    on_occurrence: Callable[[JobSpec, Occurrence], None] | None = None,
    company: CompanySettings = NO_COMPANY,
) -> Simulation:
    """Every occurrence of every scheduled job in (start, end], each handed to ``on_occurrence`` as it comes."""
    per_minute: Counter[datetime] = Counter()
    jobs = []
    for spec in specs:
        # start_at, when the schedule has one, wins over the registration
        compiled = preview_schedule(spec, registered_at=start, company=company)
        if compiled is None:
            continue
        result = JobSimulation(spec.key)
        for occurrence in compiled.occurrences(start, until=end):
            _count(result, occurrence)
            if occurrence.fires:
                per_minute[occurrence.fire_at.replace(second=0, microsecond=0)] += 1
            if on_occurrence is not None:
                on_occurrence(spec, occurrence)
        jobs.append(result)
    return Simulation(start, end, jobs, per_minute)


def _count(result: JobSimulation, occurrence: Occurrence) -> None:
    reason = occurrence.reason or ""
    if occurrence.reason_kind in ("dst gap", "dst overlap"):
        result.dst_events.append(f"{occurrence.scheduled_wall:%Y-%m-%d %H:%M}: {reason}")
    if not occurrence.fires:
        result.skipped[occurrence.reason_kind] += 1
        return
    result.fires += 1
    result.first = result.first or occurrence.at
    result.last = occurrence.at
    if occurrence.moved_from:
        # A fire that absorbed a blackout's deferred run keeps its own (empty) reason.
        result.moved[occurrence.reason_kind if reason else "blackout"] += len(occurrence.moved_from)
