"""#51: a job's spec changes without transactions (a table with multi-Region strong consistency has none): the SPEC
item's conditional write commits the change and records what is left (its STATE item, its audit entry); a crash
after any write leaves the change pending, finished by the next change of the job or by the dispatcher a minute
later, with every audit entry written once and no instant run twice or lost."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from jobsched.adapters.aws.jobs.specs import CHANGE_GRACE, PENDING
from jobsched.core.names import JobsKeys
from jobsched.core.runs import RunStatus
from jobsched.registry.jobs import delete_job, pause_job, resume_job
from tests.aws.harness import Clock, Crash, Stack, record_operations
from tests.aws.test_pipeline import job

STEPS = ("commit", "state", "audit")
KEY = "payments/hello"


def crash_at(stack: Stack, step: str) -> Callable[[], None]:
    """The jobs store dies right after ``step`` of its next change; returns what revives it."""

    def hook(name: str) -> None:
        if name == step:
            raise Crash(step)

    stack.jobs.after_change_step = hook
    return lambda: setattr(stack.jobs, "after_change_step", None)


def spec_item(stack: Stack) -> dict[str, Any] | None:
    found = stack.dynamodb.get_item(
        TableName=stack.jobs.table, Key={"pk": {"S": KEY}, "sk": {"S": JobsKeys.SPEC}}, ConsistentRead=True
    )
    item: dict[str, Any] | None = found.get("Item")
    return item


def actions(stack: Stack) -> list[str]:
    entries, _ = stack.jobs.history(KEY, limit=50)
    return [entry.action for entry in reversed(entries)]


def settle_by_dispatcher(stack: Stack, clock: Clock) -> None:
    clock.advance(CHANGE_GRACE)
    report = stack.tick()
    assert report.changes_settled == 1


@pytest.mark.parametrize("step", STEPS)
def test_a_create_that_crashed_is_finished_by_the_dispatcher_and_runs_every_minute(
    stack: Stack, clock: Clock, step: str
) -> None:
    revive = crash_at(stack, step)
    with pytest.raises(Crash):
        stack.register(job())
    revive()
    assert stack.jobs.get(KEY) is not None  # committed: the job exists
    settle_by_dispatcher(stack, clock)
    item = spec_item(stack)
    assert item is not None and PENDING not in item and "due_shard" not in item
    assert actions(stack) == ["create"]
    state = stack.jobs.get_state(KEY)
    assert state is not None and state.spec_version == 1
    stack.minutes(3)
    runs = stack.run_list(KEY)
    counts = Counter(run.run_id for run in runs)
    assert len(runs) >= 2 and max(counts.values()) == 1 and all(r.status is RunStatus.SUCCEEDED for r in runs)


@pytest.mark.parametrize("step", STEPS)
def test_a_replace_that_crashed_is_finished_by_the_next_change_of_the_job(
    stack: Stack, clock: Clock, step: str
) -> None:
    stack.register(job())
    revive = crash_at(stack, step)
    with pytest.raises(Crash):
        stack.register(job(target={"type": "lambda", "function": "echo", "payload": {"v": 2}}))
    revive()
    stored = stack.jobs.get(KEY)
    assert stored is not None and stored.version == 2
    paused = pause_job(stack.jobs, KEY, now=clock(), principal="ops", reason="maintenance")
    assert paused.version == 3 and actions(stack) == ["create", "replace", "pause"]
    state = stack.jobs.get_state(KEY)
    assert state is not None and state.spec_version == 3
    item = spec_item(stack)
    assert item is not None and PENDING not in item
    assert stack.tick().changes_settled == 0 and stack.tick().due_jobs == 0  # paused: off the due index


@pytest.mark.parametrize("step", STEPS)
def test_a_delete_that_crashed_reads_as_gone_and_the_name_can_be_taken_again(
    stack: Stack, clock: Clock, step: str
) -> None:
    stack.register(job())
    stored = stack.jobs.get(KEY)
    assert stored is not None
    revive = crash_at(stack, step)
    with pytest.raises(Crash):
        delete_job(stack.jobs, stored, now=clock(), principal="ops", dags=stack.dags)
    revive()
    assert stack.jobs.get(KEY) is None and KEY not in stack.jobs.get_many([KEY])
    assert KEY not in stack.jobs.snapshot([KEY]).specs
    clock.advance(timedelta(seconds=5))
    again = stack.register(job(schedule={"expression": "*/5 * * * *"}))  # finishes the delete, then creates
    assert again.schedule is not None and again.schedule.expression == "*/5 * * * *"
    recreated = stack.jobs.get(KEY)
    assert recreated is not None and recreated.version == 3  # versions go on after the deleted job's (1, 2)
    assert actions(stack) == ["create", "delete", "create"]
    state = stack.jobs.get_state(KEY)
    assert state is not None and state.spec_version == 3


def test_a_delete_that_crashed_is_finished_by_the_dispatcher(stack: Stack, clock: Clock) -> None:
    stack.register(job())
    stored = stack.jobs.get(KEY)
    assert stored is not None
    revive = crash_at(stack, "commit")
    with pytest.raises(Crash):
        delete_job(stack.jobs, stored, now=clock(), principal="ops", dags=stack.dags)
    revive()
    settle_by_dispatcher(stack, clock)
    assert spec_item(stack) is None and stack.jobs.get_state(KEY) is None
    assert actions(stack) == ["create", "delete"]
    stack.minutes(2)
    assert stack.run_list(KEY) == []


def test_a_resume_that_crashed_before_its_state_item_runs_from_the_resume_on(stack: Stack, clock: Clock) -> None:
    """While a change is pending the dispatcher skips the job (its STATE lags the spec's version), then finishes
    the change and runs it: no instant before the resume, none twice."""
    stack.register(job())
    pause_job(stack.jobs, KEY, now=clock(), principal="ops", reason="hold")
    clock.advance(timedelta(minutes=10))
    revive = crash_at(stack, "commit")
    with pytest.raises(Crash):
        resume_job(stack.jobs, KEY, now=clock(), principal="ops")
    revive()
    resumed_at = clock()
    stack.minutes(4)
    runs = stack.run_list(KEY)
    assert runs and all(run.scheduled_at >= resumed_at for run in runs)
    assert max(Counter(run.run_id for run in runs).values()) == 1
    assert actions(stack) == ["create", "pause", "resume"]


def test_no_job_store_write_is_a_transaction(stack: Stack, clock: Clock) -> None:
    """Creates, replaces, pauses, resumes and deletes make only single-item writes."""
    calls = record_operations(stack)
    stack.register(job())
    stack.register(job(target={"type": "lambda", "function": "echo", "payload": {"v": 2}}))
    pause_job(stack.jobs, KEY, now=clock(), principal="ops", reason="hold")
    resume_job(stack.jobs, KEY, now=clock(), principal="ops")
    stored = stack.jobs.get(KEY)
    assert stored is not None
    delete_job(stack.jobs, stored, now=clock(), principal="ops", dags=stack.dags)
    assert calls and not any(call.startswith("Transact") for call in calls)


def test_a_spec_near_the_request_limit_commits_and_its_audit_entry_keeps_it_whole(stack: Stack, clock: Clock) -> None:
    """The pending change holds no second copy of the spec (the SPEC item has it): four schedules with 60 KB payloads
    each, a 240 KB spec, commit in one item under DynamoDB's 400 KB; the dispatcher's audit entry has it whole."""
    big = "x" * 60_000
    schedules = [{"name": f"s{n}", "expression": f"{n} * * * *", "payload": {"blob": big, "n": n}} for n in range(4)]
    document = job() | {"schedules": schedules}
    document.pop("schedule")
    revive = crash_at(stack, "commit")
    with pytest.raises(Crash):
        stack.register(document)
    revive()
    item = spec_item(stack)
    assert item is not None and len(item[PENDING]["S"]) < 2_000
    settle_by_dispatcher(stack, clock)
    (entry,) = stack.jobs.audit_trail(KEY)
    assert entry["action"] == "create" and entry["spec"].count(big) == 4


def test_a_job_created_again_under_its_name_never_runs_what_was_sent_for_the_one_deleted(
    stack: Stack, clock: Clock
) -> None:
    """Versions go on across a name's lives: the deleted job's messages still queued (sent ahead, delayed) name its
    version, which the new job never has, so they are superseded instead of running the new job at the old one's
    instants (the new job was at version 1 again, and they ran it)."""
    stack.register(job())  # minutely: the tick sends the next minutes ahead
    assert stack.tick().messages_sent > 1
    stored = stack.jobs.get(KEY)
    assert stored is not None
    delete_job(stack.jobs, stored, now=clock(), principal="ops", dags=stack.dags)
    again = stack.register(job(expression="0 3 * * *"))  # nightly now
    recreated = stack.jobs.get(KEY)
    assert recreated is not None and recreated.version > stored.version + 1 and again.key == KEY
    clock.advance(timedelta(minutes=5))
    stack.pump()
    assert stack.run_list(KEY) == []


def test_a_warm_dispatcher_plans_a_job_created_again_under_its_name_by_its_new_schedule(
    stack: Stack, clock: Clock
) -> None:
    """The dispatcher keeps each job's compiled schedule by name and version for its process's life: the job
    created again had the deleted one's version, and ran at the old schedule's instants."""
    stack.register(job(expression="*/2 * * * *"))
    stack.minutes(4)
    assert [run.run_id[9:13] for run in stack.run_list(KEY)] == ["0900", "0902"]
    stored = stack.jobs.get(KEY)
    assert stored is not None
    delete_job(stack.jobs, stored, now=clock(), principal="ops", dags=stack.dags)
    clock.advance(timedelta(minutes=15))
    stack.pump()  # what was sent ahead for the deleted job: gone with it
    before = {run.run_id for run in stack.run_list(KEY)}
    stack.register(job(expression="1-59/2 * * * *"))  # odd minutes now
    stack.minutes(6)
    minutes = [int(run.run_id[11:13]) for run in stack.run_list(KEY) if run.run_id not in before]
    assert minutes == [19, 21, 23], minutes
