"""Waits for data (wait_for) on the memory adapters: a run WAITING holds nothing, an event wakes it at once, a
poll with backoff covers a missed event, a timeout fails (paged) or skips it, and nothing runs twice.

The AWS path (S3 Object Created through the wake rule, the intake queue, DAG tasks on Step Functions) is
tests/aws/test_waits.py; the local runtime's example is in tests/e2e.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobsched.adapters.aws.run_events import run_finished_detail
from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.data_checks import MemoryDataChecks
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues
from jobsched.adapters.memory.rules import MemoryRules
from jobsched.core.errors import SpecError
from jobsched.core.events import EventEnvelope
from jobsched.core.run_records import Run
from jobsched.core.runs import RunMessage, RunStatus, instant_text, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.core.templates import TemplateError, check_key_template, render_key
from jobsched.core.tz import get_zone
from jobsched.core.waits import poll_delay, wake_rules
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.intake import EventIntake
from jobsched.pipeline.worker import Worker
from jobsched.registry.jobs import delete_job, put_job
from tests.unit.test_pipeline_in_memory import ScriptedTargets

T0 = parse_instant("2027-03-01T02:00:00Z")  # 03:00 in Berlin
LANDING = "acme-landing"
FILE = "exports/2027-03-01/_SUCCESS"
NIGHTLY: dict[str, Any] = {
    "schedule": {"expression": "0 3 * * *", "timezone": "Europe/Berlin"},
    "target": {"type": "lambda", "function": "load"},
    "wait_for": [{"s3": "s3://acme-landing/exports/{logical_date:%Y-%m-%d}/_SUCCESS"}],
    "wait": {"timeout": "2h", "on_timeout": "fail"},
}


class Stack:
    def __init__(self) -> None:
        self.now = T0
        self.jobs, self.runs, self.rules = MemoryJobs(), MemoryRuns(), MemoryRules()
        self.queues, self.escalations = MemoryWorkQueues(lambda: self.now), MemoryEscalations()
        self.checks = MemoryDataChecks(owners={LANDING: "data"})
        self.targets = ScriptedTargets()
        self.signals: list[tuple[str, float]] = []
        self.worker = Worker(
            self.jobs,
            self.runs,
            self.queues,
            self.escalations,
            self.targets,
            lambda: self.now,
            checks=self.checks,
            waiters=self.jobs,
            wait_signal=lambda kind, waited: self.signals.append((kind, waited.total_seconds())),
        )
        self.intake = EventIntake(self.jobs, self.runs, self.queues)
        self.dispatcher = Dispatcher(self.jobs, self.runs, self.queues, escalations=self.escalations)

    def put(self, key: str, **body: Any) -> JobSpec:
        team, name = key.split("/")
        spec = JobSpec.model_validate({"name": name, "team": team, "target": {"type": "callback"}} | body)
        put_job(self.jobs, spec, now=T0 - timedelta(days=1), principal="test", rules=self.rules)
        return spec

    def start(self, job: str = "data/nightly", at: datetime = T0) -> RunMessage:
        message = RunMessage.scheduled(job=job, team=job.split("/")[0], at=at, fire_at=at, spec_version=1)
        self.worker.process(message)
        return message

    def deliver(self, until: datetime) -> int:
        """Hand every message visible up to ``until`` to the worker at its visible time; how many."""
        handed = 0
        while (visible := self.queues.next_visible("normal")) is not None and visible <= until:
            self.now = max(self.now, visible)
            for queued in self.queues.receive("normal", limit=100):
                self.worker.process_any(queued.message)
                handed += 1
        self.now = until
        return handed

    def run(self, job: str = "data/nightly", at: datetime = T0) -> Run:
        found = self.runs.get(job, RunMessage.scheduled(job=job, team="x", at=at, fire_at=at, spec_version=1).run_id)
        assert found is not None
        return found

    def wake(self, spec: JobSpec, event: dict[str, Any]) -> Any:
        """An event as the job's wake rule delivers it (the rule for the event's kind)."""
        kind = "s3" if event["source"] == "aws.s3" else "job"
        rule = next(rule for rule in wake_rules(spec) if (rule.trigger.s3 is not None) == (kind == "s3"))
        envelope = EventEnvelope.model_validate(
            {"jobsched": {"job": spec.key, "trigger": rule.fingerprint}, "event": event}
        )
        return self.intake.receive(envelope, now=self.now)


def object_created(key: str, bucket: str = LANDING) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "source": "aws.s3",
        "detail-type": "Object Created",
        "time": "2027-03-01T02:10:00Z",
        "detail": {"bucket": {"name": bucket}, "object": {"key": key, "size": 0, "sequencer": "01"}},
    }


def test_a_run_waits_holding_nothing_and_the_object_landing_wakes_it_at_once() -> None:
    stack = Stack()
    spec = stack.put("data/nightly", **NIGHTLY)
    stack.start()
    run = stack.run()
    assert run.status is RunStatus.WAITING and run.waiting_for == [f"s3://{LANDING}/{FILE}"]
    assert run.reason == "waiting for s3://acme-landing/exports/2027-03-01/_SUCCESS since 2027-03-01T02:00:00Z"
    assert stack.targets.calls == [] and stack.jobs.waiters("data/nightly", limit=10).keys() == {run.run_id}
    stack.deliver(T0 + timedelta(minutes=10))  # polls at +30 s, +1 m, +2 m, +4 m, +8 m: still nothing
    stack.checks.put(LANDING, FILE)
    woke = stack.wake(spec, object_created(FILE))
    assert woke.action == "woke"
    stack.deliver(stack.now)  # the woken delivery, at once
    assert stack.run().status is RunStatus.SUCCEEDED and stack.targets.calls == [(run.run_id, 1)]
    assert stack.jobs.waiters("data/nightly", limit=10) == {}
    assert [kind for kind, _ in stack.signals] == ["begun", "met"] and stack.signals[1][1] == 600
    stack.deliver(T0 + timedelta(hours=3))  # the poll chain still queued finds the run claimed: nothing runs
    assert stack.targets.calls == [(run.run_id, 1)]


def test_a_missed_event_is_covered_by_the_poll_with_backoff() -> None:
    stack = Stack()
    stack.put("data/nightly", **NIGHTLY)
    stack.start()
    stack.deliver(T0 + timedelta(minutes=20))
    stack.checks.put(LANDING, FILE)  # the Object Created event never comes
    checks_before = stack.checks.checks
    stack.deliver(T0 + timedelta(minutes=40))
    run = stack.run()
    assert run.status is RunStatus.SUCCEEDED and stack.targets.calls == [(run.run_id, 1)]
    assert run.started_at is not None and run.started_at - T0 <= timedelta(minutes=36)  # next poll: <= 15 min on
    assert stack.checks.checks - checks_before == 1


def test_the_poll_backs_off_to_fifteen_minutes_and_a_two_hour_wait_costs_a_dozen_checks_and_one_write() -> None:
    assert [poll_delay(timedelta(seconds=s)).total_seconds() for s in (0, 30, 60, 240, 900, 7000)] == [
        30,
        30,
        60,
        240,
        900,
        900,
    ]
    stack = Stack()
    stack.put("data/nightly", **NIGHTLY)
    stack.start()
    writes = stack.runs.table.capacity.writes
    stack.deliver(T0 + timedelta(hours=2, minutes=1))
    run = stack.run()
    assert run.status is RunStatus.FAILED
    assert stack.checks.checks <= 14  # the first check, the polls, the last at the timeout
    assert stack.runs.table.capacity.writes - writes == 1  # polls that find nothing new write nothing; then the end


def test_a_wait_that_times_out_fails_with_the_reason_and_pages_once() -> None:
    stack = Stack()
    stack.put("data/nightly", **NIGHTLY)
    stack.start()
    stack.deliver(T0 + timedelta(hours=3))
    run = stack.run()
    assert run.status is RunStatus.FAILED and stack.targets.calls == []
    assert run.error == "waited 2h for s3://acme-landing/exports/2027-03-01/_SUCCESS"
    assert [event["kind"] for event in stack.escalations.events] == ["run_failed"]
    assert [kind for kind, _ in stack.signals] == ["begun", "timed_out"] and stack.signals[1][1] == 7200
    assert stack.jobs.waiters("data/nightly", limit=10) == {}
    assert stack.queues.depth() == 0  # no poll outlives its wait


def test_on_timeout_skip_records_skipped_without_a_page() -> None:
    stack = Stack()
    stack.put("data/nightly", **(NIGHTLY | {"wait": {"timeout": "30m", "on_timeout": "skip"}}))
    stack.start()
    stack.deliver(T0 + timedelta(hours=1))
    run = stack.run()
    assert (
        run.status is RunStatus.SKIPPED and run.reason == "waited 30m for s3://acme-landing/exports/2027-03-01/_SUCCESS"
    )
    assert stack.escalations.events == []


def test_duplicate_wakes_and_redeliveries_run_the_target_once_and_never_multiply_messages() -> None:
    stack = Stack()
    spec = stack.put("data/nightly", **NIGHTLY)
    message = stack.start()
    for _ in range(3):  # the object's events before it can be read (or a stale one): checked, not re-sent
        assert stack.wake(spec, object_created(FILE)).action == "woke"
    stack.deliver(stack.now)
    assert stack.queues.depth() == 1  # the one poll chain
    stack.checks.put(LANDING, FILE)
    for _ in range(3):
        stack.wake(spec, object_created(FILE))
    stack.worker.process(message)  # and the first delivery, redelivered
    stack.deliver(T0 + timedelta(hours=3))
    run = stack.run()
    assert run.status is RunStatus.SUCCEEDED and stack.targets.calls == [(run.run_id, 1)]


def test_an_object_outside_the_waited_key_or_bucket_wakes_nothing() -> None:
    stack = Stack()
    spec = stack.put("data/nightly", **NIGHTLY)
    stack.start()
    assert stack.wake(spec, object_created("imports/x.csv")).reason == "stale_rule"
    assert stack.wake(spec, object_created(FILE, bucket="other-bucket")).reason == "stale_rule"
    depth = stack.queues.depth()
    other_day = stack.wake(spec, object_created("exports/2027-03-02/_SUCCESS"))  # the rule matches; no run awaits it
    assert (other_day.action, other_day.detail) == ("woke", "0 waiting runs and tasks woken")
    assert stack.queues.depth() == depth


def test_a_job_wait_is_met_by_a_succeeded_upstream_run_in_its_window_and_its_run_finished_wakes_it() -> None:
    stack = Stack()
    stack.put("data/extract")
    spec = stack.put(
        "data/report",
        schedule={"expression": "0 2 * * *"},
        target={"type": "lambda", "function": "report"},
        wait_for=[{"job": "data/extract", "within": "6h"}],
    )
    stack.start("data/report")
    assert stack.run("data/report").waiting_for == [
        "data/extract (a succeeded run for 2027-02-28T20:00:00Z..2027-03-01T02:00:00Z)"
    ]
    too_old = T0 - timedelta(hours=7)  # outside the window: does not count
    upstream = finish(stack, "data/extract", too_old)
    stack.wake(spec, run_finished(upstream))
    stack.deliver(stack.now)
    assert stack.run("data/report").status is RunStatus.WAITING
    stack.now = T0 + timedelta(minutes=5)
    upstream = finish(stack, "data/extract", T0 - timedelta(hours=1))
    assert stack.wake(spec, run_finished(upstream)).action == "woke"
    stack.deliver(stack.now)
    assert stack.run("data/report").status is RunStatus.SUCCEEDED


def finish(stack: Stack, job: str, at: datetime) -> Run:
    message = RunMessage.scheduled(job=job, team=job.split("/")[0], at=at, fire_at=at, spec_version=1)
    stack.runs.create(message, status=RunStatus.SCHEDULED, now=at, retention=timedelta(days=30))
    return stack.runs.finish(
        job, message.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=stack.now, from_status=RunStatus.SCHEDULED
    )


def run_finished(run: Run) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "source": "jobsched",
        "detail-type": "Run Finished",
        "time": instant_text(run.finished_at or T0),
        "detail": run_finished_detail(run),
    }


def test_a_bucket_that_is_not_the_teams_fails_the_run_without_reading_it() -> None:
    stack = Stack()
    stack.checks.owners[LANDING] = "payments"  # re-tagged to another team after the job was stored
    stack.put("data/nightly", **NIGHTLY)
    stack.start()
    run = stack.run()
    assert run.status is RunStatus.FAILED and "may not wait for s3://acme-landing" in (run.error or "")
    assert stack.checks.objects == {} and stack.targets.calls == []


def test_waits_on_another_teams_job_need_its_share_with_and_cycles_are_refused_at_put() -> None:
    stack = Stack()
    stack.put("payments/ledger")
    with pytest.raises(SpecError) as refused:
        stack.put("data/report", wait_for=[{"s3": "s3://acme-landing/x"}, {"job": "payments/ledger"}])
    assert [(e.path, e.code) for e in refused.value.errors] == [("wait_for[1].job", "not_shared")]
    with pytest.raises(SpecError) as unknown:
        stack.put("data/report", wait_for=[{"job": "data/nobody"}])
    assert [(e.path, e.code) for e in unknown.value.errors] == [("wait_for[0].job", "unknown_job")]
    stack.put("data/a")
    stack.put("data/b", wait_for=[{"job": "data/a"}])
    with pytest.raises(SpecError) as cycle:
        stack.put("data/a", triggers=[{"after": {"job": "data/b"}}])
    assert [(e.path, e.code) for e in cycle.value.errors] == [("triggers[0].after.job", "dependency_cycle")]


def test_a_shared_upstream_may_be_waited_on() -> None:
    stack = Stack()
    stack.put("payments/ledger", share_with=["data"])
    spec = stack.put("data/report", wait_for=[{"job": "payments/ledger"}])
    assert spec.upstreams() == ["payments/ledger"]


def test_wake_rules_follow_the_job_and_go_with_it() -> None:
    stack = Stack()
    spec = stack.put("data/nightly", **NIGHTLY)
    [rule] = wake_rules(spec)
    assert rule.trigger.s3 is not None and (rule.trigger.s3.prefix, rule.trigger.s3.suffix) == ("exports/", "/_SUCCESS")
    assert len(stack.rules.rules) == 1
    changed = stack.put("data/nightly", **(NIGHTLY | {"wait_for": [{"s3": "s3://acme-landing/static/ready.flag"}]}))
    [new_rule] = stack.rules.rules.values()
    assert new_rule.pattern["detail"]["object"] == {"key": [{"prefix": "static/ready.flag"}]}
    stored = stack.jobs.get(changed.key)
    assert stored is not None
    delete_job(stack.jobs, stored, now=T0, principal="test", dags=None, rules=stack.rules)
    assert stack.rules.rules == {}


def test_the_dispatcher_ends_a_wait_whose_polls_were_all_lost() -> None:
    stack = Stack()
    stack.put("data/nightly", **NIGHTLY)
    stack.start()
    stack.queues.receive("normal", limit=100, now=T0 + timedelta(days=1))  # every poll message lost
    stack.now = T0 + timedelta(hours=2)
    report = stack.dispatcher.tick(stack.now)
    assert report.retries_woken == 1
    stack.deliver(T0 + timedelta(hours=2, minutes=1))
    assert stack.run().status is RunStatus.FAILED


def test_object_keys_render_the_logical_date_in_the_schedules_timezone_and_nothing_else() -> None:
    instant = parse_instant("2027-03-01T23:30:00Z")  # already 2 March in Berlin
    key = "exports/{logical_date:%Y-%m-%d}/{logical_date:%H%M}/{logical_date}"
    assert render_key(key, instant, get_zone("Europe/Berlin")) == "exports/2027-03-02/0030/2027-03-02"
    for bad in ("{logical_date.__class__}", "{logical_date:%c}", "{other}", "{logical_date:{x}}", "x}"):
        with pytest.raises(TemplateError):
            check_key_template(bad)


def test_a_poll_of_a_long_key_that_finds_nothing_new_writes_nothing() -> None:
    """The record keeps each condition bounded (512 characters); a poll compares what it would write so."""
    stack = Stack()
    stack.put("data/nightly", **(NIGHTLY | {"wait_for": [{"s3": "s3://acme-landing/" + "k" * 700}]}))
    stack.start()
    writes = stack.runs.table.capacity.writes
    stack.deliver(T0 + timedelta(minutes=30))  # several polls, the same condition unmet
    assert stack.runs.table.capacity.writes == writes
