"""#51: a warm worker reads its jobs' STATE items and keeps each job's spec by version (half a read unit a run: an
hourly job's every run read its spec), and a run it ended itself frees its job's slot without a read of its record
(another half). The hard cases: a spec replaced and a job paused while the worker holds the older version, a STATE
item read stale (older than the message's version), a job deleted, and a run ended by another process."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.core.names import JobsKeys, RunsKeys
from jobsched.core.records import JobsSnapshot
from jobsched.core.run_records import Run
from jobsched.core.runs import RunStatus
from jobsched.pipeline.claiming import ProvenEnds
from jobsched.pipeline.lifecycle import Change, StateChange
from jobsched.pipeline.worker import Worker
from jobsched.registry.jobs import delete_job, pause_job
from tests.aws.harness import Clock, Stack
from tests.aws.test_pipeline import job

HOURLY = "payments/hourly"
KEY = "payments/hello"


def from_worker() -> bool:
    """Whether the calling AWS request is the worker's."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("jobsched/pipeline/worker.py"):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def count_worker_reads(stack: Stack, job_key: str) -> Counter[str]:
    """From here on, the worker's reads of the job's SPEC and STATE items, and of its runs' records."""
    reads: Counter[str] = Counter()

    def keys_of(params: dict[str, Any]) -> list[tuple[str, str, str]]:
        requests = params.get("RequestItems") or {params["TableName"]: {"Keys": [params["Key"]]}}
        return [(table, *_key(key)) for table, request in requests.items() for key in request.get("Keys", [])]

    def count(params: dict[str, Any], **_: Any) -> None:
        if not from_worker():
            return
        for table, pk, sk in keys_of(params):
            if pk != job_key:
                continue
            if table == stack.jobs_table and sk in (JobsKeys.SPEC, JobsKeys.STATE):
                reads[sk] += 1
            elif table == stack.runs_table:
                reads["run record"] += 1

    for operation in ("BatchGetItem", "GetItem"):
        stack.dynamodb.meta.events.register(f"provide-client-params.dynamodb.{operation}", count)
    return reads


def _key(key: dict[str, Any]) -> tuple[str, str]:
    """A jobs item's (pk, sk) or a run record's (job, run id)."""
    if "pk" in key:
        return key["pk"]["S"], key["sk"]["S"]
    return key[RunsKeys.PK]["S"], key[RunsKeys.SK]["S"]


def payloads(stack: Stack) -> list[Any]:
    return [event["payload"] for name, event in stack.lambdas.calls if name == "echo"]


def cold_worker(stack: Stack) -> None:
    """The stack's worker replaced by one that has read nothing (a Lambda instance just started), subscribed as
    ``wiring.build_worker`` subscribes it."""
    names = ("jobs", "runs", "queues", "escalations", "targets", "clock")
    stack.worker = Worker(**{name: getattr(stack.worker, name) for name in names})
    stack.lifecycle.subscribe(stack.worker.proven_ends.heard)


def test_a_warm_worker_reads_an_hourly_jobs_state_item_and_not_its_spec(stack: Stack, clock: Clock) -> None:
    """Four hourly runs on a warm worker: the job's STATE item read at each batch, its spec not again (it was read
    at each run: 4 reads in these hours before)."""
    stack.register(job("hourly", "0 * * * *"))
    clock.set("2027-01-04T08:45:00Z")
    stack.minutes(20)  # 09:00 ran: the worker has read the spec of the job's version
    reads = count_worker_reads(stack, HOURLY)
    stack.minutes(4 * 60)
    assert reads == {JobsKeys.STATE: 4}, reads
    runs = stack.run_list(HOURLY)
    assert [run.status for run in runs] == [RunStatus.SUCCEEDED] * 5 and len(stack.lambdas.executions("echo")) == 5
    cold_worker(stack)
    stack.minutes(60)
    assert reads == {JobsKeys.STATE: 5, JobsKeys.SPEC: 1}, reads  # a new process reads the spec once


def test_a_minutely_runs_slot_is_freed_without_reading_the_run_before_that_this_worker_ended(
    stack: Stack, clock: Clock
) -> None:
    """A minutely job's run finds the run before it still holding the job's slot (its lease runs for minutes):
    ended by this worker, it is proven by the end this worker wrote, not read (a read each run before: a worker
    that has just started reads the first one's, then hears its own)."""
    stack.register(job())
    stack.minutes(2)
    reads = count_worker_reads(stack, KEY)
    stack.minutes(10)
    assert reads == {JobsKeys.STATE: 10}, reads
    cold_worker(stack)
    stack.minutes(10)
    assert reads == {JobsKeys.STATE: 20, JobsKeys.SPEC: 1, "run record": 1}, reads
    runs = stack.run_list(KEY)
    assert len(runs) == 22 and all(run.status is RunStatus.SUCCEEDED for run in runs)
    assert len(stack.lambdas.executions("echo")) == 22


def test_a_replaced_spec_is_run_by_its_new_version_on_a_warm_worker(stack: Stack, clock: Clock) -> None:
    stack.register(job())
    stack.minutes(3)
    stack.register(job(target={"type": "lambda", "function": "echo", "payload": {"version": 2}}))
    clock.advance(timedelta(seconds=1))  # the change is settled after the minute it was made in
    stack.minutes(3)
    seen = payloads(stack)
    assert seen[:3] == [{"hello": "world"}] * 3 and {"version": 2} in seen
    changed = seen.index({"version": 2})
    assert all(payload == {"version": 2} for payload in seen[changed:])  # never back to the cached version


def test_a_paused_job_is_not_run_by_a_warm_worker(stack: Stack, clock: Clock) -> None:
    """Instants sent before the pause reach a worker that holds the job's active version: the STATE item names the
    pause's version, so the worker reads it and records them SKIPPED, as before."""
    stack.register(job())
    stack.minutes(3)
    executed = len(stack.lambdas.executions("echo"))
    pause_job(stack.jobs, KEY, now=clock(), principal="ops", reason="hold")
    stack.minutes(5)
    assert len(stack.lambdas.executions("echo")) == executed
    skipped = [run for run in stack.run_list(KEY) if run.status is RunStatus.SKIPPED]
    assert all("job paused" in (run.reason or "") for run in skipped)


def test_a_deleted_job_is_not_run_by_a_warm_worker(stack: Stack, clock: Clock) -> None:
    stack.register(job())
    stack.minutes(3)
    executed = len(stack.lambdas.executions("echo"))
    stored = stack.jobs.get(KEY)
    assert stored is not None
    delete_job(stack.jobs, stored, now=clock(), principal="ops", dags=stack.dags)
    stack.minutes(5)
    assert len(stack.lambdas.executions("echo")) == executed


@dataclass
class StaleStates:
    """The jobs store with STATE items read as they were at ``versions`` (an eventually consistent read)."""

    store: JobsStore
    versions: dict[str, int]

    def snapshot(self, jobs: list[str], *, specs: bool = True) -> JobsSnapshot:
        found = self.store.snapshot(jobs, specs=specs)
        found.versions.update({job: v for job, v in self.versions.items() if job in found.versions})
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_state_item_read_stale_does_not_run_a_newer_message_by_an_older_cached_spec(
    stack: Stack, clock: Clock
) -> None:
    """The message names version 2 (the dispatcher planned by it), the batch's STATE read still says 1, whose spec
    this worker holds: it reads the spec instead of running version 2's instant by version 1's target."""
    stack.register(job())
    stack.minutes(2)
    stack.register(job(target={"type": "lambda", "function": "echo", "payload": {"version": 2}}))
    stale = StaleStates(stack.jobs, {KEY: 1})
    stack.worker.jobs = stale
    clock.advance(timedelta(seconds=1))
    stack.minutes(2)
    assert payloads(stack)[2:] == [{"version": 2}] * 2


def test_only_a_run_this_process_ended_is_proven_by_hearing_it() -> None:
    """An end heard from the lifecycle proves the run's holding at its attempt; a MISSED one (the lost-message
    audit's, which may still be claimed at the same attempt) and a task's end prove nothing."""
    proven = ProvenEnds()

    def ended(status: RunStatus, run_id: str, *, task: str | None = None, change: Change = Change.FINISHED) -> None:
        at = datetime(2027, 1, 4, 9, tzinfo=UTC)
        run = Run(KEY, run_id, "payments", status, 2, at, at, "schedule", 1, run_id)
        proven.heard(StateChange(change, KEY, run_id, 2, status.value, run=run, task=task))

    ended(RunStatus.SUCCEEDED, "a")
    ended(RunStatus.MISSED, "b")
    ended(RunStatus.FAILED, "c", task="extract")
    ended(RunStatus.RETRYING, "d", change=Change.RETRYING)
    assert proven.covers((KEY, "a"), 2) and not proven.covers((KEY, "a"), 3)
    assert not any(proven.covers((KEY, run_id), 1) for run_id in "bcd")
