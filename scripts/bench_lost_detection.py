"""Lost run messages found at the job's pace: how soon a minutely job's lost instant is recorded MISSED (and paged),
whether an instant only queued behind a deep backlog is ever recorded MISSED, and what the quicker audit costs.

The real dispatcher and worker on the memory adapters and a virtual clock (a tick each minute, the workers taking
every visible message after it unless they are stuck). One instant's message is purged from the queue; the delay
is from its fire time to the tick that records it MISSED and publishes the missed-schedule event.

    python scripts/bench_lost_detection.py
"""

from __future__ import annotations

import heapq
import logging
from datetime import datetime, timedelta

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues
from jobsched.core.messages import WorkMessage
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.runs import RunMessage, RunStatus, parse_instant, scheduled_run_id
from jobsched.core.spec import JobSpec
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.worker import Worker
from jobsched.schedule.company import NO_COMPANY
from jobsched.schedule.fires import first_fire

START = parse_instant("2027-01-04T08:59:30Z")
JOB = "data/minutely"


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def queued_ahead(depth: int) -> list[tuple[WorkMessage, timedelta]]:
    """Another job's messages, all visible: a backlog of ``depth`` in the class."""
    at = parse_instant("2027-01-04T08:00:00Z")
    return [
        (RunMessage.scheduled(job="data/other", team="data", at=at + timedelta(seconds=n), fire_at=at, spec_version=1),
         timedelta(0))
        for n in range(depth)
    ]  # fmt: skip


class Echo:
    def execute(self, target: object, context: RunContext) -> TargetResult:
        return TargetResult("succeeded", output="ok")


class Pipeline:
    def __init__(self, *, quick: bool) -> None:
        self.clock = Clock()
        self.jobs, self.runs = MemoryJobs(), MemoryRuns()
        self.queues, self.escalations = MemoryWorkQueues(self.clock), MemoryEscalations()
        spec = JobSpec.model_validate(
            {
                "name": "minutely",
                "team": "data",
                "schedule": {"expression": "* * * * *"},
                "target": {"type": "callback"},
            }
        )
        now = self.clock()
        self.jobs.create(
            spec,
            now=now,
            principal="bench",
            cursor=now,
            next_visit_at=first_fire(spec, registered_at=now, after=now, company=NO_COMPANY),
        )
        self.dispatcher = Dispatcher(
            self.jobs, self.runs, self.queues, escalations=self.escalations, backlogs=self.queues if quick else None
        )
        self.worker = Worker(self.jobs, self.runs, self.queues, self.escalations, Echo(), self.clock)
        self.visits = 0

    def purge(self, run_id: str) -> bool:
        queue = self.queues._queues["normal"]
        kept = [q for q in queue if not (isinstance(q.message, RunMessage) and q.message.run_id == run_id)]
        purged = len(kept) < len(queue)
        queue[:] = kept
        heapq.heapify(queue)
        return purged

    def minute(self, *, work: bool = True) -> None:
        self.visits += self.dispatcher.tick(self.clock()).due_jobs
        if work:
            for queued in self.queues.receive("normal", limit=100_000):
                assert isinstance(queued.message, RunMessage)
                self.worker.process(queued.message)
        self.clock.now += timedelta(minutes=1)

    def missed(self) -> set[str]:
        return {run.run_id for run in self.runs.history(JOB, limit=1000) if run.status is RunStatus.MISSED}


def detection_delay(lost_minute: int, *, quick: bool, backlog: int = 0) -> float | None:
    """Minutes from the purged instant's fire time to the tick that records it MISSED (None: not within 40)."""
    pipeline = Pipeline(quick=quick)
    if backlog:
        pipeline.queues.send("normal", queued_ahead(backlog))
    lost_at = START + timedelta(seconds=30, minutes=lost_minute)
    lost = scheduled_run_id(lost_at)
    purged = False
    for _ in range(40):
        ticked = pipeline.clock()
        pipeline.minute(work=not backlog)
        purged = purged or pipeline.purge(lost)
        if lost in pipeline.missed():
            return float((ticked - lost_at).total_seconds() / 60)
    return None


def false_missed_under_backlog(depth: int, minutes: int) -> int:
    """Instants recorded MISSED while every message is only queued behind ``depth`` others (workers stuck)."""
    pipeline = Pipeline(quick=True)
    pipeline.queues.send("normal", queued_ahead(depth))
    for _ in range(minutes):
        pipeline.minute(work=False)
    return len(pipeline.missed())


def visits_per_run(*, quick: bool, hours: int = 4) -> float:
    pipeline = Pipeline(quick=quick)
    for _ in range(hours * 60):
        pipeline.minute()
    return pipeline.visits / (hours * 60)


def main() -> None:
    logging.disable(logging.CRITICAL)
    quick = [detection_delay(minute, quick=True) for minute in range(3, 13)]
    slow = [detection_delay(minute, quick=False) for minute in range(3, 13)]
    found_quick = [d for d in quick if d is not None]
    found_slow = [d for d in slow if d is not None]
    print("A minutely job's lost instant, no backlog (10 purged instants, fire time to the recording tick):")
    low, high = min(found_quick), max(found_quick)
    print(f"  quick audit: recorded {len(found_quick)}/10, delay min {low:.1f} max {high:.1f} min")
    print(f"  before (15-minute wait only): recorded {len(found_slow)}/10, "
          f"delay min {min(found_slow):.1f} max {max(found_slow):.1f} min")  # fmt: skip
    print("Under a deep backlog (workers stuck, 500 and 5,000 messages ahead), 14 minutes:")
    for depth in (500, 5000):
        print(f"  {depth} queued: instants recorded MISSED while only queued: {false_missed_under_backlog(depth, 14)}")
    print("Cost: dispatcher visits of a minutely job per run (each visit one conditional write):")
    print(f"  quick audit {visits_per_run(quick=True):.3f}, before {visits_per_run(quick=False):.3f}")


if __name__ == "__main__":
    main()
