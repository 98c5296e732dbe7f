"""The TaskRunsPort contract: a DAG run's task records, for every adapter (moto and memory)."""

from __future__ import annotations

from datetime import timedelta

from jobsched.core.run_records import ParkedTask, lease_shard
from jobsched.core.runs import RunMessage, RunStatus, TaskStatus, parse_instant
from tests.contract.conftest import Stores

T0 = parse_instant("2027-01-04T09:00:00Z")
JOB = "data/nightly"
RUN = "20270104T090000Z"
EXPIRES = int((T0 + timedelta(days=30)).timestamp())


def dag_run(stores: Stores) -> None:
    message = RunMessage.scheduled(job=JOB, team="data", at=T0, fire_at=T0, spec_version=1)
    assert message.run_id == RUN
    assert stores.runs.create(message, status=RunStatus.RUNNING, now=T0, retention=timedelta(days=7)) is not None


def test_a_dag_run_keeps_the_first_execution_recorded(stores: Stores) -> None:
    dag_run(stores)
    graph = {"a": {"depends_on": [], "trigger_rule": "all_success"}}
    assert stores.runs.set_workflow(JOB, RUN, graph=graph, execution_arn="arn:first") == "arn:first"
    assert stores.runs.set_workflow(JOB, RUN, graph={}, execution_arn="arn:second") == "arn:first"
    run = stores.runs.get(JOB, RUN)
    assert run is not None and run.graph == graph and run.execution_arn == "arn:first"


def test_one_claimer_per_attempt_and_only_the_running_attempt_records_its_result(stores: Stores) -> None:
    dag_run(stores)
    lease = T0 + timedelta(minutes=5)

    def claim(attempt: int, token: str = "t1") -> bool:
        return stores.runs.claim_task(
            JOB, RUN, "a", attempt=attempt, token=token, now=T0, lease_until=lease, expires_at=EXPIRES
        )

    def finish(status: TaskStatus, attempt: int | None, output: str | None = None) -> bool:
        return stores.runs.finish_task(
            JOB, RUN, "a", status=status, now=T0, expires_at=EXPIRES, attempt=attempt, output=output
        )

    assert claim(1) is True
    assert claim(1) is False  # a redelivery
    task = stores.runs.tasks(JOB, RUN)["a"]
    assert (task.status, task.attempt, task.token) == (TaskStatus.RUNNING, 1, "t1")
    assert stores.runs.retry_task(JOB, RUN, "a", attempt=2, now=T0, error="x") is False  # not that attempt
    assert stores.runs.retry_task(JOB, RUN, "a", attempt=1, now=T0, error="boom") is True
    assert stores.runs.tasks(JOB, RUN)["a"].status is TaskStatus.RETRYING
    # The state machine's next attempt takes over from the retrying one; a late result of attempt 1 is refused.
    assert claim(2, "t2") is True
    assert finish(TaskStatus.SUCCEEDED, 1) is False
    assert finish(TaskStatus.SUCCEEDED, 2, "ok") is True
    done = stores.runs.tasks(JOB, RUN)["a"]
    assert (done.status, done.attempt, done.output, done.lease_until) == (TaskStatus.SUCCEEDED, 2, "ok", None)
    # A finished task is never claimed or finished again.
    assert claim(3) is False
    assert finish(TaskStatus.CANCELLED, None) is False


def test_a_parked_task_waits_with_its_token_and_is_heartbeated_until_claimed(stores: Stores) -> None:
    dag_run(stores)
    beat = T0 + timedelta(minutes=3)

    def park() -> bool:
        return stores.runs.park_task(
            JOB, RUN, "b", attempt=1, token="t1", now=T0, expires_at=EXPIRES, heartbeat_at=beat
        )

    assert park() is True
    assert park() is False  # parked at this attempt already
    assert stores.runs.tasks(JOB, RUN)["b"].status is TaskStatus.WAITING
    shard = lease_shard(JOB, f"{RUN}/b")
    assert list(stores.runs.expired_leases(shard, beat - timedelta(seconds=1))) == []
    [parked] = list(stores.runs.expired_leases(shard, beat))
    assert isinstance(parked, ParkedTask) and (parked.job, parked.run_id, parked.task.name) == (JOB, RUN, "b")
    later = beat + timedelta(minutes=3)
    assert stores.runs.parked_heartbeat_sent(JOB, RUN, "b", attempt=1, next_at=later) is True
    assert list(stores.runs.expired_leases(shard, beat)) == []
    assert stores.runs.parked_heartbeat_sent(JOB, RUN, "b", attempt=2, next_at=later) is False
    # Claimed from parked: off the heartbeat list, RUNNING.
    claimed = stores.runs.claim_task(
        JOB, RUN, "b", attempt=1, token="t1", now=later, lease_until=later + timedelta(minutes=5), expires_at=EXPIRES
    )
    assert claimed is True and list(stores.runs.expired_leases(shard, later)) == []
    assert stores.runs.parked_heartbeat_sent(JOB, RUN, "b", attempt=1, next_at=later) is False


def test_a_task_that_never_started_is_skipped_or_cancelled_at_attempt_zero(stores: Stores) -> None:
    dag_run(stores)
    assert stores.runs.finish_task(
        JOB, RUN, "c", status=TaskStatus.SKIPPED, now=T0, expires_at=EXPIRES, error="upstream failed"
    )
    skipped = stores.runs.tasks(JOB, RUN)["c"]
    assert (skipped.status, skipped.attempt, skipped.error) == (TaskStatus.SKIPPED, 0, "upstream failed")
    assert set(stores.runs.tasks(JOB, RUN)) == {"c"}
    assert stores.runs.tasks(JOB, "20270105T090000Z") == {}


def test_a_task_output_is_kept_for_its_attempt_and_a_stale_attempt_never_overwrites_a_later_one(
    stores: Stores,
) -> None:
    dag_run(stores)

    def put(attempt: int, text: str) -> bool:
        return stores.runs.put_task_output(JOB, RUN, "extract", attempt=attempt, text=text, expires_at=EXPIRES)

    assert stores.runs.task_outputs(JOB, RUN, ["extract"]) == {}
    assert put(1, '{"rows": 1}') is True
    assert put(2, '{"rows": 2}') is True  # the retry's own output replaces the first attempt's
    assert put(1, '{"rows": 1}') is False  # a late writer of attempt 1
    assert put(2, '{"rows": 2}') is True  # the same attempt again (a redelivery): idempotent
    found = stores.runs.task_outputs(JOB, RUN, ["extract", "extract", "absent"])
    assert {name: (o.attempt, o.text) for name, o in found.items()} == {"extract": (2, '{"rows": 2}')}
    # Outputs live apart from the tasks: listing the tasks never reads (or bills) them.
    assert stores.runs.tasks(JOB, RUN) == {}


def test_some_task_records_are_read_by_name_and_the_absent_ones_left_out(stores: Stores) -> None:
    dag_run(stores)
    lease = T0 + timedelta(minutes=5)
    for name in ("list", "each[0]", "each[1]"):
        stores.runs.claim_task(JOB, RUN, name, attempt=1, token=name, now=T0, lease_until=lease, expires_at=EXPIRES)
    stores.runs.finish_task(JOB, RUN, "list", status=TaskStatus.SUCCEEDED, now=T0, expires_at=EXPIRES, attempt=1)
    found = stores.runs.task_states(JOB, RUN, ["each[1]", "list", "each[7]", "list"])
    assert sorted(found) == ["each[1]", "list"]
    assert found["list"].status is TaskStatus.SUCCEEDED and found["each[1]"].token == "each[1]"
    assert stores.runs.task_states(JOB, RUN, []) == {}
