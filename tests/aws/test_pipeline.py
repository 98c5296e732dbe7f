"""The pipeline end to end in moto: register -> tick -> message -> worker -> target -> SUCCEEDED."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobsched.runs import RunStatus
from tests.aws.harness import Clock, Stack

MINUTE = timedelta(minutes=1)


def job(name: str = "hello", expression: str = "* * * * *", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "team": "payments",
        "schedule": {"expression": expression},
        "target": {"type": "lambda", "function": "echo", "payload": {"hello": "world"}},
        **fields,
    }


def test_a_minutely_job_runs_once_per_minute(stack: Stack, clock: Clock) -> None:
    stack.register(job())
    for _ in range(5):
        stack.tick()
        clock.advance(MINUTE)
        stack.pump()
    runs = stack.run_list("payments/hello")
    assert [r.run_id for r in runs] == [f"20270104T090{m}00Z" for m in range(5)]
    assert all(r.status is RunStatus.SUCCEEDED and r.attempt == 1 for r in runs)
    executions = stack.lambdas.executions("echo")
    assert len(executions) == len(set(executions)) == 5
    event = stack.lambdas.calls[0][1]
    assert event["payload"] == {"hello": "world"}
    assert event["jobsched"]["run_id"] == "20270104T090000Z" and event["jobsched"]["attempt"] == 1
    assert event["jobsched"]["scheduled_at"] == "2027-01-04T09:00:00Z"
    assert event["jobsched"]["idempotency_key"] == event["jobsched"]["run_id"]
