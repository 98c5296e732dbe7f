"""The burst design: sparse jobs are dispatched early (messages wait in SQS for their instant), and the
tick fans out over parallel dispatchers by due shard."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pydantic import ValidationError

from functions.dispatcher.handler import TickEvent
from jobsched.core.names import Env, due_shard_count
from jobsched.core.records import due_shard
from jobsched.core.runs import RunMessage, RunStatus, instant_text, parse_instant
from jobsched.pipeline.dispatch import DISPATCH_AHEAD, DUE_WINDOW, Dispatcher
from tests.aws.harness import Clock, Stack
from tests.aws.test_pipeline import job

MINUTE = timedelta(minutes=1)


def test_a_nightly_job_is_sent_ten_minutes_ahead_and_runs_at_its_instant(stack: Stack, clock: Clock) -> None:
    clock.set("2027-01-04T23:40:00Z")
    stack.register(job("nightly", "0 0 * * *"))
    stack.tick()
    state = stack.jobs.get_state("payments/nightly")
    assert state is not None and state.next_visit_at == parse_instant("2027-01-05T00:00:00Z"), (
        "first visit: the due window"
    )
    clock.set("2027-01-04T23:58:00Z")
    report = stack.tick()
    assert report.messages_sent == 1
    state = stack.jobs.get_state("payments/nightly")
    next_visit = parse_instant("2027-01-06T00:00:00Z") - (DISPATCH_AHEAD - DUE_WINDOW)
    assert state is not None and instant_text(state.cursor) == "2027-01-05T00:12:00Z"
    # Its audit rides on a message beside the run's (#51): no visit of its own, the next is the next night's.
    assert report.audits_sent == 1 and state.next_visit_at == next_visit
    clock.set("2027-01-05T00:00:00Z")
    stack.pump()
    [run] = stack.run_list("payments/nightly")
    assert run.status is RunStatus.SUCCEEDED and run.run_id == "20270105T000000Z"
    clock.set("2027-01-05T23:50:00Z")
    assert stack.tick().messages_sent == 1, "visited ten minutes before its instant"
    # The run message, then its audit's (as far as SQS delays: its instant + 15 minutes is further).
    assert stack.queues.requested_delays[-2:] == [("20270106T000000Z#1", 600), ("20270106T000000Z#1", 900)]
    clock.set("2027-01-06T00:00:00Z")
    stack.pump()
    assert [r.run_id for r in stack.run_list("payments/nightly")] == ["20270105T000000Z", "20270106T000000Z"]


def test_a_frequent_job_keeps_its_late_visits_and_few_cursor_writes(stack: Stack, clock: Clock) -> None:
    stack.register(job("often", "*/5 * * * *"))
    stack.tick()
    state = stack.jobs.get_state("payments/often")
    assert state is not None
    # 14 minutes claimed per visit: three instants; the next visit waits for the next unclaimed one.
    assert state.next_visit_at == parse_instant("2027-01-04T09:15:00Z")


def test_parallel_dispatchers_split_the_due_shards_and_together_dispatch_every_job(stack: Stack, clock: Clock) -> None:
    names = [f"job{index}" for index in range(24)]
    for name in names:
        stack.register(job(name, "*/5 * * * *"))
    parts = 3
    reports = [stack.dispatcher.tick(clock(), part=part, parts=parts) for part in range(parts)]
    by_part = [{name for name in names if due_shard(f"payments/{name}") % parts == part} for part in range(parts)]
    assert [report.due_jobs for report in reports] == [len(part) for part in by_part]
    assert sum(report.advanced for report in reports) == len(names)
    assert stack.tick().due_jobs == 0, "nothing left due"


def test_more_due_shards_are_read_by_every_dispatcher(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(Env.DUE_SHARDS, "32")
    assert due_shard_count() == 32
    for index in range(40):
        stack.register(job(f"job{index}", "*/5 * * * *"))
    assert len({due_shard(f"payments/job{index}") for index in range(40)}) > 8, "jobs spread past the default 8"
    dispatchers = [Dispatcher(stack.jobs, stack.runs, stack.queues) for _ in range(4)]
    reports = [dispatcher.tick(clock(), part=part, parts=4) for part, dispatcher in enumerate(dispatchers)]
    assert sum(report.advanced for report in reports) == 40


def test_the_tick_event_names_a_part_below_the_count() -> None:
    assert TickEvent.model_validate({"source": "aws.events", "detail-type": "Scheduled Event"}).parts == 1
    assert TickEvent.model_validate({"part": 2, "parts": 3}).part == 2
    for bad in ({"part": 3, "parts": 3}, {"part": -1}, {"parts": 0}, {"parts": 1000}):
        with pytest.raises(ValidationError):
            TickEvent.model_validate(bad)


def test_a_class_with_several_queues_spreads_runs_and_keeps_each_runs_messages_on_one(stack: Stack) -> None:
    """-c work_queues: each run's messages (first attempt, waits, retries) go to one queue of its class, and
    a burst spreads over all of them, so their event sources scale side by side."""
    from jobsched.adapters.aws.queues import WorkQueues
    from jobsched.core.settings import Settings

    urls = [stack.sqs.create_queue(QueueName=f"jobsched-test-normal-{index}")["QueueUrl"] for index in range(3)]
    environ = {
        "JOBSCHED_JOBS_TABLE": "jobs",
        "JOBSCHED_RUNS_TABLE": "runs",
        "JOBSCHED_ESCALATION_QUEUE_URL": "esc",
        **{Env.QUEUES_BY_PRIORITY[p]: stack.queue_urls[p] for p in ("high", "low")},
        Env.QUEUES_BY_PRIORITY["normal"]: urls[0],
        Env.WORK_QUEUE_SHARDS: json.dumps({"normal": urls}),
    }
    settings = Settings.from_env(environ)
    assert settings.queue_shards == {"normal": tuple(urls)}
    queues = WorkQueues(settings.queue_urls, stack.sqs, shards=settings.queue_shards)
    at = parse_instant("2027-01-04T09:00:00Z")
    messages = [
        RunMessage.scheduled(job=f"payments/job{index}", team="payments", at=at, fire_at=at, spec_version=1)
        for index in range(60)
    ]
    assert queues.send_each("normal", [(message, timedelta(0)) for message in messages]) == set()
    counts = [
        int(
            stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"][
                "ApproximateNumberOfMessages"
            ]
        )
        for url in urls
    ]
    assert sum(counts) == 60 and min(counts) >= 10, counts
    retry = messages[7].for_attempt(2)
    assert queues.queue_for("normal", retry) == queues.queue_for("normal", messages[7])
    assert queues.queue_for("high", retry) == stack.queue_urls["high"], "a class with one queue keeps it"
