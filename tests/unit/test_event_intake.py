"""Event intake on the memory adapters: one run per event, whatever is redelivered; drops counted by reason.

The AWS path (EventBridge rules delivering to the intake queue, the handler, moto's DynamoDB) is
tests/aws/test_event_triggers.py; the rules here are the domain's.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.queues import MemoryWorkQueues
from jobsched.adapters.memory.rules import MemoryRules
from jobsched.core.errors import SpecError
from jobsched.core.events import EventEnvelope, TriggerRule, envelope_template, trigger_fingerprint
from jobsched.core.runs import RunStatus, parse_instant
from jobsched.core.spec import JobSpec
from jobsched.pipeline.intake import EventIntake
from jobsched.registry.jobs import delete_job, pause_job, put_job, resume_job
from jobsched.tenancy.ownership import OwnershipGuard, ResourceRef, TeamGrants

T0 = parse_instant("2027-03-01T10:00:00Z")
ORDERS = {"event": {"pattern": {"source": ["com.acme.orders"], "detail-type": ["OrderBatchReady"]}}}
LANDING = {"s3": {"bucket": "acme-landing", "prefix": "exports/", "suffix": ".csv"}}


class Tags:
    def __init__(self, tags: dict[str, dict[str, str] | None]) -> None:
        self.by_name = tags

    def tags(self, team: str, resource: ResourceRef) -> dict[str, str] | None:
        return self.by_name.get(resource.name)


class Stack:
    def __init__(self, *triggers: dict[str, Any], concurrency: dict[str, Any] | None = None) -> None:
        self.now = T0
        self.jobs, self.runs, self.rules = MemoryJobs(), MemoryRuns(), MemoryRules()
        self.queues = MemoryWorkQueues(lambda: self.now)
        self.tags = Tags({"acme-landing": {"jobsched-team": "data"}})
        sources = TeamGrants(event_sources={"data": ("com.acme.orders", "com.acme.billing")})
        guard = OwnershipGuard(self.tags, ("jobsched-test-",), ttl=0, grants=lambda: sources)
        self.intake = EventIntake(self.jobs, self.runs, self.queues, guard=guard)
        body: dict[str, Any] = {
            "name": "load",
            "team": "data",
            "target": {"type": "callback"},
            "triggers": list(triggers),
        }
        if concurrency:
            body["concurrency"] = concurrency
        self.spec = JobSpec.model_validate(body)
        put_job(self.jobs, self.spec, now=self.now, principal="test", rules=self.rules)

    def envelope(self, event: dict[str, Any], trigger: int = 0) -> EventEnvelope:
        header = {"job": "data/load", "trigger": trigger_fingerprint(self.spec.triggers[trigger])}
        return EventEnvelope.model_validate({"jobsched": header, "event": event})

    def sent(self) -> list[Any]:
        return [queued.message for queued in self.queues.receive("normal", limit=10_000, now=self.now + timedelta(1))]


def order_event(event_id: str | None = None, at: datetime = T0 + timedelta(seconds=5)) -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "source": "com.acme.orders",
        "detail-type": "OrderBatchReady",
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "detail": {"batch": 42},
    }


def object_created(
    key: str, sequencer: str, *, bucket: str = "acme-landing", event_id: str | None = None
) -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "source": "aws.s3",
        "detail-type": "Object Created",
        "time": "2027-03-01T10:00:07Z",
        "detail": {
            "bucket": {"name": bucket},
            "object": {"key": key, "size": 120, "etag": "d41d8cd98f00b204e9800998ecf8427e", "sequencer": sequencer},
        },
    }


def test_the_same_event_delivered_three_times_starts_one_run() -> None:
    stack = Stack(ORDERS)
    event = order_event("11111111-2222-3333-4444-555555555555")
    stack.now = T0 + timedelta(seconds=6)
    actions = [stack.intake.receive(stack.envelope(event), now=stack.now).action for _ in range(3)]
    sent = stack.sent()
    assert actions == ["started", "resent", "resent"]  # still SCHEDULED: re-sent, the claim admits one
    assert len({message.run_id for message in sent}) == 1
    run = stack.runs.get("data/load", sent[0].run_id)
    assert run is not None and run.trigger == "event" and run.status is RunStatus.SCHEDULED
    assert run.scheduled_at == T0 + timedelta(seconds=5)  # the event's time is the run's logical instant
    assert run.trigger_detail == {
        "kind": "event",
        "event_id": event["id"],
        "source": "com.acme.orders",
        "detail_type": "OrderBatchReady",
    }
    assert sent[0].payload_override["event"]["detail"] == {"batch": 42}
    assert run.to_message().payload_override == sent[0].payload_override  # a retry rebuilt from the record has it


def test_a_redelivery_after_the_run_started_is_a_duplicate_and_never_a_second_run() -> None:
    stack = Stack(ORDERS)
    event = order_event()
    first = stack.intake.receive(stack.envelope(event), now=stack.now)
    run = stack.runs.get("data/load", first.run_id or "")
    assert run is not None
    stack.runs.finish(
        "data/load", run.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=stack.now, from_status=RunStatus.SCHEDULED
    )
    again = stack.intake.receive(stack.envelope(event), now=stack.now + timedelta(hours=1))
    assert (again.action, again.run_id) == ("duplicate", first.run_id)


def test_concurrent_deliveries_of_one_event_create_one_run() -> None:
    stack = Stack(ORDERS)
    event = order_event()
    barrier, results = threading.Barrier(8), []

    def deliver() -> None:
        barrier.wait()
        results.append(stack.intake.receive(stack.envelope(event), now=stack.now).action)

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count("started") == 1
    assert len(stack.runs.history("data/load", limit=100)) == 1


def test_two_identical_objects_written_in_the_same_second_are_two_runs() -> None:
    stack = Stack(LANDING)
    first = stack.intake.receive(stack.envelope(object_created("exports/a.csv", "0055AED6DCD90281E5")), now=T0)
    second = stack.intake.receive(stack.envelope(object_created("exports/a.csv", "0055AED6DCD90281E6")), now=T0)
    assert (first.action, second.action) == ("started", "started")
    assert first.run_id != second.run_id
    # S3 notifying one write twice (two event ids, one sequencer) is one run.
    twice = stack.intake.receive(stack.envelope(object_created("exports/a.csv", "0055AED6DCD90281E5")), now=T0)
    assert (twice.action, twice.run_id) == ("resent", first.run_id)
    run = stack.runs.get("data/load", first.run_id or "")
    assert run is not None and run.trigger_detail is not None
    assert {run.trigger_detail[k] for k in ("kind", "bucket", "key", "size")} == {
        "s3",
        "acme-landing",
        "exports/a.csv",
        120,
    }


def test_an_object_outside_the_prefix_or_another_teams_bucket_is_refused_on_arrival() -> None:
    stack = Stack(LANDING)
    outside = stack.intake.receive(stack.envelope(object_created("other/a.csv", "01")), now=T0)
    assert (outside.action, outside.reason) == ("dropped", "not_owned")
    stack.tags.by_name["acme-landing"] = {"jobsched-team": "payments"}  # the bucket changed hands
    moved = stack.intake.receive(stack.envelope(object_created("exports/a.csv", "02")), now=T0)
    assert (moved.action, moved.reason) == ("dropped", "not_owned")
    assert "belongs to another team" in moved.detail
    assert stack.runs.history("data/load", limit=10) == []


def test_a_storm_starts_at_most_max_runs_per_minute_and_drops_the_rest_with_a_reason() -> None:
    stack = Stack(ORDERS, concurrency={"max_runs_per_minute": 60})
    actions = [
        stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(seconds=i * 0.005)).action
        for i in range(10_000)
    ]
    assert actions.count("started") == 60
    assert actions.count("dropped") == 9_940
    assert len(stack.sent()) == 60
    next_minute = stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(minutes=1))
    assert next_minute.action == "started"


def test_paused_and_deleted_jobs_drop_events_and_a_resume_replays_nothing() -> None:
    stack = Stack(ORDERS)
    pause_job(stack.jobs, "data/load", now=T0 + timedelta(minutes=1), principal="ops", reason="maintenance")
    during = order_event(at=T0 + timedelta(minutes=2))
    assert stack.intake.receive(stack.envelope(during), now=T0 + timedelta(minutes=2)).reason == "paused"
    resume_job(stack.jobs, "data/load", now=T0 + timedelta(minutes=5), principal="ops")
    # The same event delivered again after the resume (it sat in the queue): still not run.
    late = stack.intake.receive(stack.envelope(during), now=T0 + timedelta(minutes=6))
    assert (late.action, late.reason) == ("dropped", "paused")
    after = stack.intake.receive(
        stack.envelope(order_event(at=T0 + timedelta(minutes=6))), now=T0 + timedelta(minutes=6)
    )
    assert after.action == "started"
    stored = stack.jobs.get("data/load")
    assert stored is not None
    delete_job(stack.jobs, stored, now=T0 + timedelta(minutes=7), principal="ops", dags=None, rules=stack.rules)
    assert stack.rules.rules == {}
    gone = stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(minutes=8))
    assert (gone.action, gone.reason) == ("dropped", "deleted")


def test_a_changed_trigger_replaces_its_rule_and_events_of_the_old_rule_are_dropped() -> None:
    stack = Stack(ORDERS)
    (old_rule,) = stack.rules.rules.values()
    old_envelope = stack.envelope(order_event())
    changed = JobSpec.model_validate(
        stack.spec.model_dump(mode="json") | {"triggers": [{"event": {"pattern": {"source": ["com.acme.billing"]}}}]}
    )
    put_job(stack.jobs, changed, now=T0 + timedelta(seconds=1), principal="test", rules=stack.rules)
    (new_rule,) = stack.rules.rules.values()
    assert new_rule.name != old_rule.name and new_rule.pattern == {"source": ["com.acme.billing"]}
    assert new_rule.template == envelope_template("data/load", TriggerRule(changed.triggers[0], "triggers[0]"))
    dropped = stack.intake.receive(old_envelope, now=T0 + timedelta(seconds=2))
    assert (dropped.action, dropped.reason) == ("dropped", "stale_rule")


def test_a_missing_bus_or_a_full_bus_is_a_field_error_and_nothing_is_stored() -> None:
    stack = Stack(ORDERS)
    on_team_bus = {"event": {"bus": "data-bus", "pattern": {"source": ["x"]}}}
    spec = JobSpec.model_validate(
        {"name": "other", "team": "data", "target": {"type": "callback"}, "triggers": [ORDERS, on_team_bus]}
    )
    with pytest.raises(SpecError) as refused:
        put_job(stack.jobs, spec, now=T0, principal="test", rules=stack.rules)
    assert [(e.path, e.code) for e in refused.value.errors] == [("triggers[1].event.bus", "event_bus_not_found")]
    assert stack.jobs.get("data/other") is None
    stack.rules.rules_per_bus = 1
    with pytest.raises(SpecError) as full:
        put_job(
            stack.jobs,
            spec.model_copy(update={"triggers": spec.triggers[:1]}),
            now=T0,
            principal="t",
            rules=stack.rules,
        )
    assert full.value.errors[0].code == "rule_quota_reached"


def test_the_event_examples_are_valid_jobs_and_capacity_counts_their_rules() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parents[2]
    jobsched = str(Path(sys.executable).with_name("jobsched"))
    checked = subprocess.run([jobsched, "validate", "examples/events"], cwd=root, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "examples/events/orders-ready.yaml: OK examples/orders-ready" in checked.stdout
    sized = subprocess.run([jobsched, "capacity", "examples/events"], cwd=root, capture_output=True, text=True)
    assert "EventBridge rules on bus default: 3 (default quota 300 per bus)" in sized.stdout, sized.stdout


def test_a_storm_is_dropped_before_any_store_work_once_its_job_or_team_is_spent() -> None:
    """The review's storm: each of 10,000 events read the job, its run and a counter before being dropped, while
    other teams' events waited behind. Now a job whose minute is spent, or a team past its events a minute, drops
    the rest of the minute without reading anything; a redelivery always takes the whole path."""
    stack = Stack(ORDERS, concurrency={"max_runs_per_minute": 60})
    reads: Counter[str] = Counter()
    for name, store in (("jobs", stack.jobs), ("runs", stack.runs)):
        original = store.get

        def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            reads[_name] += 1
            return _original(*args, **kwargs)

        store.get = counted  # type: ignore[method-assign]
    actions = Counter(
        stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(seconds=i * 0.005)).action
        for i in range(10_000)
    )
    assert actions == {"started": 60, "dropped": 9_940}
    assert reads["jobs"] == 61 and reads["runs"] == 61  # was 10,000 each
    redelivered = stack.intake.receive(stack.envelope(order_event()), now=T0 + timedelta(seconds=50), redelivered=True)
    assert redelivered.reason == "rate_limited" and reads["jobs"] == 62  # read, and refused by the counter
    # The team's budget, whatever its jobs: past max_events_per_minute in this process, dropped unread.
    stack.jobs.set_team_limits("data", {"max_events_per_minute": 50})
    stack.intake.budget.limits = lambda team: stack.jobs.team_limits(team, now=0.0)
    later = T0 + timedelta(minutes=1)
    spent = [stack.intake.receive(stack.envelope(order_event()), now=later) for _ in range(150)]
    assert [r.action for r in spent].count("started") == 50
    assert "max_events_per_minute" in spent[-1].detail and spent[-1].team == "data"
