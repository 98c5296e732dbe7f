"""Lost run messages found at the job's pace: with no backlog in its priority class, a minutely job's lost instant is
recorded MISSED within 5 minutes; under a deep backlog, an instant that is only queued is never recorded MISSED
(the audit waits the long way, 15 minutes)."""

from __future__ import annotations

import heapq
from datetime import timedelta

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues
from jobsched.core.records import RunContext, TargetResult
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.worker import Worker
from jobsched.schedule.fires import first_fire
from tests.helpers import Clock

JOB = "data/minutely"
LOST = "20270104T090300Z"  # the instant whose message is purged


class Echo:
    def execute(self, target: object, context: RunContext) -> TargetResult:
        return TargetResult("succeeded", output="ok")


class Minutely:
    def __init__(self) -> None:
        self.clock = Clock("2027-01-04T08:59:30Z")
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
            spec, now=now, principal="test", cursor=now, next_visit_at=first_fire(spec, registered_at=now, after=now)
        )
        self.dispatcher = Dispatcher(
            self.jobs, self.runs, self.queues, escalations=self.escalations, backlogs=self.queues
        )
        self.worker = Worker(self.jobs, self.runs, self.queues, self.escalations, Echo(), self.clock)

    def purge(self, run_id: str) -> None:
        """The instant's message vanishes from SQS (a purge, a bug, an operator)."""
        queue = self.queues._queues["normal"]
        kept = [q for q in queue if not (isinstance(q.message, RunMessage) and q.message.run_id == run_id)]
        assert len(kept) == len(queue) - 1
        queue[:] = kept
        heapq.heapify(queue)

    def minute(self, *, work: bool = True) -> None:
        """A dispatcher tick, then (if the workers keep up) every visible message, then a minute passes."""
        self.dispatcher.tick(self.clock())
        if work:
            for queued in self.queues.receive("normal", limit=1000):
                assert isinstance(queued.message, RunMessage)
                self.worker.process(queued.message)
        self.clock.advance(timedelta(minutes=1))

    def missed(self) -> list[str]:
        return [run.run_id for run in self.runs.history(JOB, limit=100) if run.status is RunStatus.MISSED]


def test_with_no_backlog_a_lost_instant_of_a_minutely_job_is_recorded_and_paged_within_5_minutes() -> None:
    pipeline = Minutely()
    pipeline.dispatcher.tick(pipeline.clock())  # sends ahead, the purged instant among them
    pipeline.purge(LOST)
    found_at = None
    for _ in range(20):
        ticked_at = pipeline.clock()
        pipeline.minute()
        if LOST in pipeline.missed() and found_at is None:
            found_at = ticked_at
    assert found_at is not None
    delay = found_at - parse_instant("2027-01-04T09:03:00Z")
    assert delay <= timedelta(minutes=5), delay
    assert pipeline.missed() == [LOST], "only the lost one"
    [page] = [e for e in pipeline.escalations.events if e["kind"] == "missed_schedule"]
    assert page["job"] == JOB


def test_under_a_deep_backlog_an_instant_only_queued_is_never_recorded_missed() -> None:
    pipeline = Minutely()
    # A deep backlog in the class: 500 other runs' messages visible and waiting.
    backlog = [
        (RunMessage.scheduled(job="data/other", team="data", at=at, fire_at=at, spec_version=1), timedelta(0))
        for at in (parse_instant("2027-01-04T08:00:00Z") + timedelta(seconds=n) for n in range(500))
    ]
    pipeline.queues.send("normal", backlog)
    for _ in range(14):  # the workers are stuck: nothing is taken for 14 minutes
        pipeline.minute(work=False)
    assert pipeline.missed() == [], "queued behind the backlog, not lost"
    assert pipeline.queues.backlog("normal") >= 500 + 13
