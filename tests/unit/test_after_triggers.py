"""After triggers on the memory adapters: one downstream run per logical instant, whatever finishes, is
redelivered, rerun or raced; refused at PUT when it can never run (unknown upstream, not shared, a cycle).

The AWS path (Run Finished put on the bus, the trigger's rule, the intake queue) is tests/aws/test_event_triggers.py.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any, cast

import pytest

from jobsched.adapters.aws.run_events import run_finished_detail
from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.queues import MemoryWorkQueues
from jobsched.adapters.memory.rules import MemoryRules
from jobsched.core.errors import SpecError
from jobsched.core.events import EventEnvelope, after_pattern, after_run_id, trigger_fingerprint
from jobsched.core.run_records import AttemptClaim, Run
from jobsched.core.runs import RunMessage, RunStatus, instant_text, parse_instant, scheduled_run_id
from jobsched.core.spec import JobSpec
from jobsched.pipeline.intake import EventIntake
from jobsched.pipeline.manual_runs import advance_backfill, start_backfill
from jobsched.pipeline.reruns import rerun_run
from jobsched.registry.jobs import put_job

T0 = parse_instant("2027-03-01T03:00:00Z")


class Stack:
    def __init__(self) -> None:
        self.now = T0 + timedelta(minutes=10)
        self.jobs, self.runs, self.rules = MemoryJobs(), MemoryRuns(), MemoryRules()
        self.queues = MemoryWorkQueues(lambda: self.now)
        self.intake = EventIntake(self.jobs, self.runs, self.queues)

    def put(self, key: str, **body: Any) -> JobSpec:
        team, name = key.split("/")
        spec = JobSpec.model_validate({"name": name, "team": team, "target": {"type": "callback"}} | body)
        put_job(self.jobs, spec, now=T0 - timedelta(days=1), principal="test", rules=self.rules)
        return spec

    def finish(self, job: str, status: RunStatus = RunStatus.SUCCEEDED, at: Any = T0) -> Run:
        """An upstream run of instant ``at`` that ended with ``status``."""
        message = RunMessage.scheduled(job=job, team=job.split("/")[0], at=at, fire_at=at, spec_version=1)
        if self.runs.get(job, message.run_id) is None:
            self.runs.create(message, status=RunStatus.SCHEDULED, now=at, retention=timedelta(days=30))
        ended = self.runs.finish(
            job,
            message.run_id,
            attempt=1,
            status=status,
            now=at + timedelta(minutes=1),
            from_status=RunStatus.SCHEDULED,
        )
        run = self.runs.get(job, message.run_id)
        assert run is not None, ended
        return run

    def delivered(self, downstream: JobSpec, run: Run, trigger: int = 0) -> EventEnvelope:
        """The Run Finished event as the downstream's rule delivers it."""
        header = {"job": downstream.key, "trigger": trigger_fingerprint(downstream.triggers[trigger])}
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "source": "jobsched",
            "detail-type": "Run Finished",
            "time": instant_text(self.now),
            "detail": run_finished_detail(run),
        }
        return EventEnvelope.model_validate({"jobsched": header, "event": event})

    def receive(self, downstream: JobSpec, run: Run) -> Any:
        return self.intake.receive(self.delivered(downstream, run), now=self.now)

    def downstream_runs(self, job: str) -> list[Run]:
        return self.runs.history(job, limit=100)


def test_a_run_after_one_job_inherits_its_instant_once_however_often_delivered() -> None:
    stack = Stack()
    stack.put("data/extract")
    report = stack.put("data/report", triggers=[{"after": {"job": "data/extract"}}])
    upstream = stack.finish("data/extract")
    actions = [stack.receive(report, upstream).action for _ in range(3)]
    assert actions == ["started", "resent", "resent"]
    (run,) = stack.downstream_runs("data/report")
    assert run.run_id == f"{scheduled_run_id(T0)}-a" and run.scheduled_at == T0
    assert run.trigger_detail == {
        "kind": "after",
        "upstreams": [{"job": "data/extract", "run_id": upstream.run_id, "status": "SUCCEEDED"}],
    }
    # A rerun of the upstream finishes the same instant again: no second downstream run.
    stack.runs.finish(
        "data/report", run.run_id, attempt=1, status=RunStatus.SUCCEEDED, now=stack.now, from_status=RunStatus.SCHEDULED
    )
    rerun = stack.delivered(report, upstream)
    cast(dict[str, Any], rerun.event["detail"])["attempt"] = 2
    assert stack.intake.receive(rerun, now=stack.now).action == "duplicate"
    assert len(stack.downstream_runs("data/report")) == 1


def test_all_of_starts_once_when_the_last_upstream_of_an_instant_finishes() -> None:
    stack = Stack()
    stack.put("data/orders")
    stack.put("data/customers")
    report = stack.put("data/report", triggers=[{"after": {"all": ["data/orders", "data/customers"]}}])
    orders = stack.finish("data/orders")
    assert stack.receive(report, orders).action == "noted"
    # Another instant's customers run does not complete this instant.
    assert stack.receive(report, stack.finish("data/customers", at=T0 + timedelta(days=1))).action == "noted"
    assert stack.downstream_runs("data/report") == []
    assert stack.receive(report, stack.finish("data/customers")).action == "started"
    assert stack.receive(report, orders).action == "resent"  # a redelivery after: the same run
    (run,) = stack.downstream_runs("data/report")
    assert run.scheduled_at == T0 and {u["job"] for u in run.trigger_detail["upstreams"]} == {  # type: ignore[index]
        "data/orders",
        "data/customers",
    }


def race_once() -> tuple[int, Counter[str]]:
    """Eight deliveries at once, of two upstream finishes for one instant: (downstream runs, actions)."""
    stack = Stack()
    stack.put("data/orders")
    stack.put("data/customers")
    report = stack.put("data/report", triggers=[{"after": {"all": ["data/orders", "data/customers"]}}])
    finished = [stack.finish("data/orders"), stack.finish("data/customers")]
    barrier, actions, lock = threading.Barrier(8), Counter[str](), threading.Lock()

    def deliver(run: Run) -> None:
        barrier.wait()
        got = stack.receive(report, run).action
        with lock:
            actions[got] += 1

    threads = [threading.Thread(target=deliver, args=(finished[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(stack.downstream_runs("data/report")), actions


def test_two_upstreams_finishing_at_once_start_one_all_of_run_not_zero_not_two() -> None:
    for _ in range(20):
        runs, actions = race_once()
        assert runs == 1 and actions["started"] == 1, actions


def test_the_status_filter_and_a_forged_finish() -> None:
    stack = Stack()
    stack.put("data/extract")
    report = stack.put("data/report", triggers=[{"after": {"job": "data/extract"}}])
    cleanup = stack.put("data/cleanup", triggers=[{"after": {"job": "data/extract", "status": ["failed"]}}])
    failed = stack.finish("data/extract", RunStatus.FAILED)
    assert (stack.receive(report, failed).action, stack.receive(report, failed).reason) == ("dropped", "stale_rule")
    assert stack.receive(cleanup, failed).action == "started"
    # A Run Finished naming a run that never ended so (anyone may put on a shared bus): nothing starts.
    forged_event = stack.delivered(report, stack.finish("data/extract", at=T0 + timedelta(hours=1)))
    cast(dict[str, Any], forged_event.event["detail"])["run_id"] = "20270301T050000Z"
    refused = stack.intake.receive(forged_event, now=stack.now)
    assert (refused.action, refused.reason) == ("dropped", "not_owned")


def test_another_teams_upstream_only_if_it_shares_with_the_team_at_put_and_on_arrival() -> None:
    stack = Stack()
    stack.put("payments/settle")
    with pytest.raises(SpecError) as refused:
        stack.put("data/report", triggers=[{"after": {"all": ["payments/settle", "data/nope"]}}])
    assert [(e.path, e.code) for e in refused.value.errors] == [
        ("triggers[0].after.all[0]", "not_shared"),
        ("triggers[0].after.all[1]", "unknown_job"),
    ]
    assert stack.jobs.get("data/report") is None
    stack.put("payments/settle", share_with=["data"])
    report = stack.put("data/report", triggers=[{"after": {"job": "payments/settle"}}])
    settled = stack.finish("payments/settle")
    stack.put("payments/settle", share_with=[])  # no longer shared: its finishes are refused on arrival
    got = stack.receive(report, settled)
    assert (got.action, got.reason) == ("dropped", "not_owned")


def test_cycles_through_after_triggers_are_refused_at_put() -> None:
    stack = Stack()
    with pytest.raises(SpecError) as itself:
        stack.put("data/a", triggers=[{"after": {"job": "data/a"}}])
    assert itself.value.errors[0].code == "dependency_cycle"
    stack.put("data/a")
    stack.put("data/b", triggers=[{"after": {"job": "data/a"}}])
    stack.put("data/c", triggers=[{"after": {"any": ["data/b"]}}])
    with pytest.raises(SpecError) as cycle:
        stack.put("data/a", triggers=[{"after": {"job": "data/c"}}])
    (error,) = cycle.value.errors
    assert (error.path, error.code) == ("triggers[0].after.job", "dependency_cycle")
    assert "data/a runs after data/c runs after data/b runs after data/a" in error.message


def test_the_rule_listens_for_the_upstreams_run_finished_with_the_statuses() -> None:
    stack = Stack()
    for job in ("data/a", "payments/b"):
        stack.put(job, share_with=["data"])
    spec = stack.put("data/c", triggers=[{"after": {"any": ["data/a", "payments/b"], "status": ["succeeded"]}}])
    assert spec.triggers[0].after is not None
    assert after_pattern(spec.triggers[0].after) == {
        "source": ["jobsched"],
        "detail-type": ["Run Finished"],
        "detail": {
            "status": ["SUCCEEDED"],
            "$or": [{"team": ["data"], "job": ["a"]}, {"team": ["payments"], "job": ["b"]}],
        },
    }
    ((bus, _),) = [key for key, rule in stack.rules.rules.items() if rule.tags["jobsched-job"] == "data/c"]
    assert bus == "default"  # the stage's runs bus (here the default)


def test_scheduled_upstreams_that_share_no_instant_are_refused_for_all_of() -> None:
    stack = Stack()
    stack.put("data/nightly", schedule={"expression": "0 3 * * *"})
    stack.put("data/early", schedule={"expression": "0 4 * * *"})
    stack.put("data/hourly", schedule={"expression": "0 * * * *"})
    stack.put("data/manual")  # no schedule: its instants cannot be foretold
    with pytest.raises(SpecError) as refused:
        stack.put("data/report", triggers=[{"after": {"all": ["data/nightly", "data/early"]}}])
    (error,) = refused.value.errors
    assert (error.path, error.code) == ("triggers[0].after.all", "never_lines_up")
    stack.put("data/report", triggers=[{"after": {"all": ["data/nightly", "data/hourly"]}}])  # 03:00 is shared
    stack.put("data/other", triggers=[{"after": {"all": ["data/nightly", "data/manual"]}}])
    stack.put("data/any", triggers=[{"after": {"any": ["data/nightly", "data/early"]}}])  # any: no need to line up


def test_lint_finds_a_cycle_across_job_files(tmp_path: Any) -> None:
    from jobsched.registry.lint import lint
    from jobsched.registry.policy import OrgPolicy

    files = {
        "a.yaml": "name: a\nteam: data\ntarget: {type: callback}\ntriggers: [{after: {job: data/c}}]\n",
        "b.yaml": "name: b\nteam: data\ntarget: {type: callback}\ntriggers: [{after: {job: data/a}}]\n",
        "c.yaml": "name: c\nteam: data\ntarget: {type: callback}\ntriggers: [{after: {any: [data/b, other/x]}}]\n",
        "d.yaml": "name: d\nteam: data\ntarget: {type: callback}\ntriggers: [{after: {job: data/a}}]\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    findings = [f for f in lint([tmp_path], OrgPolicy(), now=T0) if f.rule == "dependency-cycle"]
    assert sorted(f.file.rsplit("/", 1)[-1] for f in findings) == ["a.yaml", "b.yaml", "c.yaml"]
    assert all(f.severity == "error" for f in findings)
    assert "data/a runs after data/c runs after data/b runs after data/a" in findings[0].message


def succeed_next_attempt(stack: Stack, job: str, run_id: str) -> Run:
    """The reopened run's next attempt claimed and succeeded (what the worker does with a rerun's message)."""
    run = stack.runs.get(job, run_id)
    assert run is not None and run.status is RunStatus.RETRYING
    claim = AttemptClaim(run.attempt + 1, RunStatus.RETRYING, run.attempt, stack.now, stack.now + timedelta(hours=1))
    stack.runs.claim_attempt(job, run_id, claim)
    return stack.runs.finish(job, run_id, attempt=run.attempt + 1, status=RunStatus.SUCCEEDED, now=stack.now)


def test_rerun_downstream_reruns_the_jobs_after_it_once_per_upstream_attempt_and_on_down_the_chain() -> None:
    stack = Stack()
    stack.put("data/extract")
    report = stack.put("data/report", triggers=[{"after": {"job": "data/extract"}}])
    publish = stack.put("data/publish", triggers=[{"after": {"job": "data/report"}}])
    upstream = stack.finish("data/extract")
    [started] = [stack.receive(report, upstream).run_id]
    assert started is not None
    first = stack.runs.get("data/report", started)
    assert first is not None
    done = stack.runs.finish(
        "data/report", started, attempt=1, status=RunStatus.SUCCEEDED, now=stack.now, from_status=RunStatus.SCHEDULED
    )
    assert stack.receive(publish, done).action == "started"
    published = stack.runs.get("data/publish", after_run_id(done.scheduled_at))
    assert published is not None
    stack.runs.finish(
        "data/publish",
        published.run_id,
        attempt=1,
        status=RunStatus.SUCCEEDED,
        now=stack.now,
        from_status=RunStatus.SCHEDULED,
    )
    # A plain rerun of the upstream: the downstream already ran for the instant and is left alone.
    rerun_run(
        stack.jobs, stack.runs, stack.queues, "data/extract", upstream.run_id, now=stack.now, principal="t", force=True
    )
    again = succeed_next_attempt(stack, "data/extract", upstream.run_id)
    assert stack.receive(report, again).action == "duplicate"
    # With --downstream: the downstream runs again, once however often the finish is delivered ...
    rerun_run(
        stack.jobs,
        stack.runs,
        stack.queues,
        "data/extract",
        upstream.run_id,
        now=stack.now,
        principal="t",
        force=True,
        downstream=True,
    )
    carried = succeed_next_attempt(stack, "data/extract", upstream.run_id)
    assert carried.downstream_attempt == carried.attempt == 3
    assert [stack.receive(report, carried).action for _ in range(3)] == ["started", "duplicate", "duplicate"]
    reopened = stack.runs.get("data/report", started)
    assert reopened is not None and reopened.status is RunStatus.RETRYING and reopened.downstream_attempt == 2
    # ... and once it has finished, a late redelivery of the upstream's finish reruns nothing more.
    report_done = succeed_next_attempt(stack, "data/report", started)
    assert stack.receive(report, carried).action == "duplicate"
    # Down the chain: the report's rerun carries the publish job.
    assert stack.receive(publish, report_done).action == "started"
    chained = stack.runs.get("data/publish", published.run_id)
    assert chained is not None and chained.status is RunStatus.RETRYING and chained.attempt == 1


def test_a_backfill_of_an_upstream_carries_its_downstreams_one_run_per_instant() -> None:
    """The backfill's runs finish like any run, and each Run Finished starts the downstream's run of its
    instant; one that had run already is left alone (--downstream reruns it: see the test above)."""
    stack = Stack()
    stack.put("data/extract", schedule={"expression": "0 * * * *"})
    report = stack.put("data/report", triggers=[{"after": {"job": "data/extract"}}])
    already = stack.finish("data/extract", at=T0)
    assert stack.receive(report, already).action == "started"
    stack.runs.finish(
        "data/report", after_run_id(T0), attempt=1, status=RunStatus.SUCCEEDED, now=T0, from_status=RunStatus.SCHEDULED
    )
    stack.now = T0 + timedelta(hours=4)
    progress = start_backfill(
        stack.jobs,
        "data/extract",
        start=T0,
        end=T0 + timedelta(hours=3),
        max_in_flight=10,
        now=stack.now,
        principal="t",
        statuses=frozenset({RunStatus.SUCCEEDED}),
    )
    advance_backfill(stack.jobs, stack.runs, stack.queues, "data/extract", progress.backfill_id, now=stack.now)
    sent = [queued.message for queued in stack.queues.receive("normal", limit=100, now=stack.now)]
    assert sorted(m.run_id for m in sent if isinstance(m, RunMessage) and m.job == "data/extract") == [
        "20270301T030000Z",
        "20270301T040000Z",
        "20270301T050000Z",
        "20270301T060000Z",
    ]
    for hour in (1, 2, 3):  # the instants that had never run: their runs end, and start the downstream's
        finished = stack.finish("data/extract", at=T0 + timedelta(hours=hour))
        assert stack.receive(report, finished).action == "started"
    rerun = succeed_next_attempt(stack, "data/extract", already.run_id)  # the one run again, without downstream
    assert stack.receive(report, rerun).action == "duplicate"
    instants = sorted(run.scheduled_at for run in stack.downstream_runs("data/report"))
    assert instants == [T0 + timedelta(hours=hour) for hour in range(4)]


def test_another_teams_downstream_reruns_spend_the_downstreams_own_limit_and_are_in_its_history() -> None:
    """The review's case: six reruns of alpha's upstream with --downstream pushed beta's downstream (limited to one
    run a minute) to attempt 7. Each carried rerun is an event-started run of beta's job: past its
    max_runs_per_minute it is dropped and counted, and the one that runs is in beta's history naming the upstream."""
    stack = Stack()
    stack.put("alpha/extract", share_with=["beta"])
    report = stack.put(
        "beta/report", triggers=[{"after": {"job": "alpha/extract"}}], concurrency={"max_runs_per_minute": 1}
    )
    upstream = stack.finish("alpha/extract")
    started = stack.receive(report, upstream).run_id
    assert started is not None
    stack.runs.finish(
        "beta/report", started, attempt=1, status=RunStatus.SUCCEEDED, now=stack.now, from_status=RunStatus.SCHEDULED
    )
    stack.now += timedelta(minutes=1)  # a new minute: the first run's count is behind
    actions = []
    for _ in range(6):
        rerun_run(
            stack.jobs,
            stack.runs,
            stack.queues,
            "alpha/extract",
            upstream.run_id,
            now=stack.now,
            principal="arn:aws:iam::123456789012:role/team-alpha",
            force=True,
            downstream=True,
        )
        carried = succeed_next_attempt(stack, "alpha/extract", upstream.run_id)
        received = stack.receive(report, carried)
        actions.append((received.action, received.reason))
        downstream = stack.runs.get("beta/report", started)
        if downstream is not None and downstream.status is RunStatus.RETRYING:
            succeed_next_attempt(stack, "beta/report", started)
    assert actions == [("started", None)] + [("dropped", "rate_limited")] * 5
    final = stack.runs.get("beta/report", started)
    assert final is not None and final.attempt == 2  # not 7
    entries, _ = stack.jobs.history("beta/report", limit=10)
    [rerun] = [entry for entry in entries if entry.action == "rerun"]
    assert rerun.details is not None and rerun.details["upstream"] == f"alpha/extract/{upstream.run_id}#2"
    assert "alpha/extract" in rerun.principal
    # A late redelivery of a dropped finish reruns nothing either.
    assert stack.receive(report, carried).action in ("duplicate", "dropped")
    assert stack.runs.get("beta/report", started).attempt == 2  # type: ignore[union-attr]
