"""The DAG task's stages on the memory adapters and the in-memory Step Functions port: the conductor's orders,
each room's verdicts, the door for ends from outside, and the lifecycle hearing tasks and runs alike."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.core.run_records import StaleAttempt, TargetResult
from jobsched.core.runs import RunStatus
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.lifecycle import Change
from tests.unit.dag_memory import JOB, VISIBILITY, Crash, DagMemoryStack, task

DIAMOND = [task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c")]


def test_a_diamond_runs_each_task_once_after_its_dependencies_and_succeeds() -> None:
    stack = DagMemoryStack()
    stack.register(DIAMOND)
    run_id = stack.trigger()
    stack.pump()
    assert stack.run(run_id).status is RunStatus.SUCCEEDED
    order = stack.targets.records()
    assert sorted(order) == ["a", "b", "c", "d"]
    assert order[0] == "a" and order[-1] == "d"
    assert stack.run(run_id).output == "4 tasks: 4 succeeded"


def test_a_task_end_and_the_run_end_reach_the_same_lifecycle_subscriber() -> None:
    stack = DagMemoryStack()
    stack.register([task("a"), task("b", "a")])
    run_id = stack.trigger()
    stack.pump()
    ends = [(change.task, change.status) for change in stack.heard if change.change is Change.FINISHED]
    assert ends == [("a", "SUCCEEDED"), ("b", "SUCCEEDED"), (None, "SUCCEEDED")]
    last = stack.heard[-1]
    assert last.run is not None and last.run.run_id == run_id and last.run.status is RunStatus.SUCCEEDED


def test_every_message_delivered_twice_executes_each_task_once() -> None:
    stack = DagMemoryStack()
    stack.register(DIAMOND)
    run_id = stack.trigger()
    stack.pump(deliveries=2)
    assert stack.run(run_id).status is RunStatus.SUCCEEDED
    assert sorted(stack.targets.records()) == ["a", "b", "c", "d"]
    # Heard once each, though written for and delivered twice.
    claims = [change.task for change in stack.heard if change.change is Change.CLAIMED and change.task]
    assert sorted(claims) == ["a", "b", "c", "d"]


def test_a_failed_attempt_is_retried_by_the_machine_with_the_next_attempt_number() -> None:
    stack = DagMemoryStack()
    backoff = {"initial": "10s", "max": "10s", "jitter": "none"}
    stack.register([task("a", retry={"max_attempts": 3, "backoff": backoff})])
    stack.targets.answers["a"] = [TargetResult("failed", error="503"), TargetResult("failed", error="503")]
    run_id = stack.trigger()
    stack.pump()
    assert stack.statuses(run_id) == {"a": "RETRYING"}  # its retry waits for the interval
    for _ in range(2):
        stack.clock.advance(timedelta(seconds=10))
        stack.pump()
    assert [attempt for _, attempt, _ in stack.targets.calls] == [1, 2, 3]
    assert stack.run(run_id).status is RunStatus.SUCCEEDED


def test_a_failed_task_skips_what_needs_it_and_an_all_done_task_runs_anyway() -> None:
    stack = DagMemoryStack()
    stack.register([task("a"), task("b", "a"), task("cleanup", "a", trigger_rule="all_done")])
    stack.targets.answers["a"] = [TargetResult("failed", error="bad input", retryable=False)]
    run_id = stack.trigger()
    stack.pump()
    assert stack.statuses(run_id) == {"a": "FAILED", "b": "SKIPPED", "cleanup": "SUCCEEDED"}
    run = stack.run(run_id)
    assert run.status is RunStatus.FAILED and run.error == "task a failed: bad input"
    assert [event["kind"] for event in stack.escalations.events] == ["run_failed"]


def test_data_passes_between_tasks_and_an_unresolvable_reference_fails_the_task_unretried() -> None:
    stack = DagMemoryStack()
    reads = {"type": "lambda", "function": "echo", "payload": {"rows": "{{ tasks.a.output.rows }}"}}
    missing = {"type": "lambda", "function": "echo", "payload": {"n": "{{ tasks.a.output.missing }}"}}
    stack.register([task("a"), task("b", "a", target=reads), task("c", "a", target=missing, retry={"max_attempts": 3})])
    stack.targets.outputs["a"] = {"rows": 12}
    run_id = stack.trigger()
    stack.pump()
    assert ("b", 1, {"rows": 12}) in stack.targets.calls
    assert "c" not in stack.targets.records()
    tasks = stack.tasks(run_id)
    assert tasks["c"].status.value == "FAILED" and tasks["c"].attempt == 1
    assert "missing" in (tasks["c"].error or "")


def test_an_inline_map_runs_each_item_once_and_is_judged_by_its_tolerated_share() -> None:
    stack = DagMemoryStack()
    each = {"type": "lambda", "function": "echo", "payload": {"n": "{{ item }}"}}
    mapped = {"over": "{{ tasks.list.output.items }}", "tolerated_failure_percentage": 34}
    stack.register([task("list"), task("each", "list", target=each, map=mapped), task("after", "each")])
    stack.targets.outputs["list"] = {"items": [1, 2, 3]}
    stack.targets.answers["each"] = [TargetResult("failed", error="one bad item", retryable=False)]
    run_id = stack.trigger()
    stack.pump()
    items = sorted(record for record in stack.targets.records() if record.startswith("each["))
    assert items == ["each[0]", "each[1]", "each[2]"]
    assert sorted(payload["n"] for record, _, payload in stack.targets.calls if record in items) == [1, 2, 3]
    statuses = stack.statuses(run_id)
    assert statuses["each"] == "SUCCEEDED" and statuses["after"] == "SUCCEEDED"
    assert sorted(statuses[name] for name in items) == ["FAILED", "SUCCEEDED", "SUCCEEDED"]
    assert stack.run(run_id).status is RunStatus.SUCCEEDED


def test_a_crash_after_recording_a_task_is_completed_by_the_redelivery() -> None:
    stack = DagMemoryStack()
    stack.register([task("a")])

    def crash_once(step: str) -> None:
        if step == "record_task" and not stack.crashes:
            raise Crash("after recording a, before reporting it")

    stack.worker.after_step = crash_once
    run_id = stack.trigger()
    stack.pump()
    assert stack.crashes and stack.statuses(run_id) == {"a": "SUCCEEDED"}  # recorded, never reported
    execution = stack.run(run_id).execution_arn
    assert stack.run(run_id).status is RunStatus.RUNNING and execution is not None
    stack.clock.advance(VISIBILITY)
    stack.pump()  # the redelivery finds it recorded, reports it and advances
    assert stack.run(run_id).status is RunStatus.SUCCEEDED and stack.workflows.status(execution) == "SUCCEEDED"
    assert stack.targets.records() == ["a"]


def test_an_attempt_whose_worker_died_after_its_claim_is_lost_then_retried() -> None:
    stack = DagMemoryStack()
    stack.register([task("a", retry={"max_attempts": 2, "backoff": {"initial": "1s", "jitter": "none"}})])

    def crash_once(step: str) -> None:
        if step == "claim_task" and not stack.crashes:
            raise Crash("after claiming a, before executing it")

    stack.worker.after_step = crash_once
    run_id = stack.trigger()
    stack.pump()
    stack.clock.advance(VISIBILITY)
    stack.pump()  # the lease still runs: the attempt may be in flight elsewhere
    assert stack.outcomes[-1].action == "waiting" and stack.statuses(run_id) == {"a": "RUNNING"}
    # At its lease's end (5 min, the target's timeout, and a margin) its state times out too: the machine retries.
    stack.clock.advance(timedelta(minutes=5, seconds=30))
    stack.pump()
    assert stack.statuses(run_id) == {"a": "RETRYING"}

    stack.clock.advance(timedelta(seconds=1))
    stack.pump()
    assert stack.targets.calls == [("a", 2, None)]  # attempt 1 never ran; attempt 2 did
    assert stack.tasks(run_id)["a"].attempt == 2
    assert stack.run(run_id).status is RunStatus.SUCCEEDED


def test_a_task_waiting_for_a_dependency_is_parked_and_released_when_it_ends() -> None:
    stack = DagMemoryStack()
    callback = {"type": "callback", "timeout": "1h"}
    stack.register([task("a", target=callback), task("b", "a")])
    run_id = stack.trigger()
    stack.pump()
    assert stack.statuses(run_id) == {"a": "RUNNING", "b": "WAITING"}
    stack.worker.ends.complete(AttemptRef(JOB, run_id, 1, "a"), Reported(succeeded=True, output="{}"))
    stack.pump()
    assert stack.statuses(run_id) == {"a": "SUCCEEDED", "b": "SUCCEEDED"}
    assert stack.run(run_id).status is RunStatus.SUCCEEDED


def test_the_door_for_outside_ends_fences_tasks_by_their_attempt() -> None:
    stack = DagMemoryStack()
    callback = {"type": "callback", "timeout": "1h"}
    stack.register([task("a", target=callback, heartbeat_timeout="3m"), task("b", "a")])
    run_id = stack.trigger()
    stack.pump()
    ends = stack.worker.ends
    with pytest.raises(StaleAttempt):
        ends.complete(AttemptRef(JOB, run_id, 2, "a"), Reported(succeeded=True))  # not the running attempt
    assert ends.heartbeat(AttemptRef(JOB, run_id, 1, "a")).run_id == run_id
    stack.clock.advance(timedelta(minutes=2))
    assert ends.heartbeat(AttemptRef(JOB, run_id, 1, "a")).run_id == run_id
    stack.clock.advance(timedelta(minutes=2))  # 4 minutes since start, 2 since its last heartbeat
    stack.pump()
    assert stack.statuses(run_id)["a"] == "RUNNING"
    ends.stop(AttemptRef(JOB, run_id, 1, "a"), "stopped by the on-call")
    stack.pump()
    assert stack.statuses(run_id) == {"a": "CANCELLED", "b": "SKIPPED"}
    run = stack.run(run_id)
    assert run.status is RunStatus.FAILED and run.error == "task a cancelled: stopped by the on-call"
    with pytest.raises(StaleAttempt):
        ends.heartbeat(AttemptRef(JOB, run_id, 1, "a"))


def test_a_task_without_heartbeats_times_out_by_its_heartbeat_seconds_and_the_run_fails() -> None:
    stack = DagMemoryStack()
    callback = {"type": "callback", "timeout": "1h"}
    stack.register([task("a", target=callback, heartbeat_timeout="3m"), task("b", "a")])
    run_id = stack.trigger()
    stack.pump()
    stack.clock.advance(timedelta(minutes=3))
    stack.pump()
    tasks = stack.tasks(run_id)
    assert tasks["a"].status.value == "TIMED_OUT" and tasks["b"].status.value == "SKIPPED"
    assert (tasks["a"].error or "").startswith("States.HeartbeatTimeout")
    assert stack.run(run_id).status is RunStatus.FAILED


def test_cancelling_the_run_aborts_its_execution_and_cancels_its_unfinished_tasks() -> None:
    stack = DagMemoryStack()
    callback = {"type": "callback", "timeout": "1h"}
    stack.register([task("a"), task("b", "a", target=callback), task("c", "b")])
    run_id = stack.trigger()
    stack.pump()
    cancelled = stack.worker.ends.stop(AttemptRef(JOB, run_id), "cancelled by request")
    assert cancelled.status is RunStatus.CANCELLED
    assert stack.statuses(run_id) == {"a": "SUCCEEDED", "b": "CANCELLED", "c": "CANCELLED"}
    execution = stack.run(run_id).execution_arn
    assert execution is not None and stack.workflows.status(execution) == "ABORTED"
    with pytest.raises(StaleAttempt):  # its callback's late result changes nothing
        stack.worker.ends.complete(AttemptRef(JOB, run_id, 1, "b"), Reported(succeeded=True))


def test_a_rejected_approval_cancels_the_run_and_pages_nobody() -> None:
    from jobsched.pipeline.approvals import decide

    stack = DagMemoryStack()
    approval = {"type": "approval", "message": "Load into the warehouse?", "timeout": "1h"}
    stack.register([task("a"), task("approve", "a", target=approval), task("load", "approve")])
    run_id = stack.trigger()
    stack.pump()
    assert stack.statuses(run_id)["approve"] == "RUNNING"
    with pytest.raises(StaleAttempt):  # a callback can never answer an approval
        stack.worker.ends.complete(AttemptRef(JOB, run_id, 1, "approve"), Reported(succeeded=True))
    decide(
        stack.jobs, stack.worker.dags, JOB, run_id, "approve", approved=False, principal="ann", comment="not today",
        now=stack.clock(),
    )  # fmt: skip
    stack.pump()
    run = stack.run(run_id)
    assert run.status is RunStatus.CANCELLED and run.error == "task approve rejected by ann: not today"
    assert stack.statuses(run_id)["load"] == "SKIPPED"
    assert "run_failed" not in [event["kind"] for event in stack.escalations.events]
