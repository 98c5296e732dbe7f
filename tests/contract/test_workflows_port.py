"""The Step Functions port, on moto's interpreter (real time, its own threads) and the memory interpreter (an
injected clock): the same compiled machines send the same messages and take the same reports."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.workflows import Workflows
from jobsched.adapters.memory.workflows import MemoryWorkflows
from jobsched.core.errors import ExecutionNotOurs
from jobsched.core.spec import JobSpec
from jobsched.dag.definition import TASK_FAILED, compile_definition, definition_text, execution_input
from jobsched.pipeline.dag.recording import TASK_FAILED_PERMANENTLY
from jobsched.ports import WorkflowsPort
from tests.helpers import Clock

JOB = "data/etl"
REGION = "us-east-1"


@dataclass
class Machines:
    workflows: WorkflowsPort
    queue_url: str
    receive: Callable[[int], list[dict[str, Any]]]  # at least this many messages the machines sent (or fail)
    later: Callable[[float], None]  # let this many seconds pass (retries' intervals)
    # moto's interpreter takes a report to a token it no longer waits on (a finished task's, a stopped
    # execution's) and drops its cause in a Catch; AWS and the memory port refuse the report (the adapter
    # answers False) and keep the cause. The scheduler never relies on either: its records are fenced.
    refuses_stale_tokens: bool = True


def spec(*tasks: dict[str, Any]) -> JobSpec:
    return JobSpec.model_validate({"name": "etl", "team": "data", "dag": {"tasks": list(tasks)}})


def lambda_task(name: str, *depends_on: str, **extra: Any) -> dict[str, Any]:
    target = extra.pop("target", {"type": "lambda", "function": "echo"})
    return {"name": name, "depends_on": list(depends_on), "target": target, **extra}


RETRIED = {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}}


@pytest.fixture(params=["moto", "memory"])
def machines(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Machines]:
    if request.param == "memory":
        clock, sent = Clock("2027-01-04T09:00:00Z"), []
        memory = MemoryWorkflows(clock, lambda url, body: sent.append(body))

        def taken(count: int) -> list[dict[str, Any]]:
            memory.advance()
            assert len(sent) >= count, sent
            found = sent[:]
            sent.clear()
            return found

        def later(seconds: float) -> None:
            clock.advance(timedelta(seconds=seconds))
            memory.advance()

        yield Machines(memory, "memory://normal", taken, later)
        return
    from infra.local.moto_patches import fresh_task_token_per_attempt

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("JOBSCHED_AWS_ENDPOINT", raising=False)
    fresh_task_token_per_attempt()
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sqs = boto3.client("sqs", region_name=REGION)
        queue = sqs.create_queue(QueueName="contract-work")["QueueUrl"]
        stepfunctions = boto3.client("stepfunctions", region_name=REGION)
        prefix = "arn:aws:states:us-east-1:123456789012:stateMachine:jobsched-contract-dag-"
        workflows = Workflows(
            role_arn="arn:aws:iam::123456789012:role/contract", machine_prefix=prefix, stepfunctions=stepfunctions
        )

        def received(count: int) -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            deadline = time.monotonic() + 20  # moto's interpreter runs in its own threads
            while len(found) < count and time.monotonic() < deadline:
                answer = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0)
                for message in answer.get("Messages", []):
                    found.append(json.loads(message["Body"]))
                    sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
                if len(found) < count:
                    time.sleep(0.05)
            assert len(found) >= count, found
            return found

        yield Machines(workflows, queue, received, lambda seconds: time.sleep(seconds), refuses_stale_tokens=False)


def started(machines: Machines, job: JobSpec, run_id: str = "20270104T090000Z") -> str:
    definition = definition_text(compile_definition(job, queue_url=machines.queue_url))
    machines.workflows.ensure(JOB, "data", definition)
    arn = machines.workflows.execution_arn(JOB, f"{run_id}-0001")
    assert job.dag is not None
    bases = [0] * len(job.dag.tasks)
    payload = execution_input(job=JOB, team="data", run_id=run_id, scheduled_at=run_id, correlation_id="c", bases=bases)
    return machines.workflows.start(arn, payload)


def by_task(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {message["task"]: message for message in messages}


def test_a_machine_is_created_once_and_changed_only_when_its_definition_is(machines: Machines) -> None:
    first = definition_text(compile_definition(spec(lambda_task("a")), queue_url=machines.queue_url))
    second = definition_text(compile_definition(spec(lambda_task("a"), lambda_task("b")), queue_url=machines.queue_url))
    arn, changed = machines.workflows.ensure(JOB, "data", first)
    assert changed and arn.endswith("data_etl")
    assert machines.workflows.ensure(JOB, "data", first) == (arn, False)
    assert machines.workflows.ensure(JOB, "data", second) == (arn, True)


def test_an_execution_sends_each_root_task_its_message_with_a_token_and_starts_once(machines: Machines) -> None:
    job = spec(lambda_task("a"), lambda_task("b"), lambda_task("c", "a"))
    arn = started(machines, job)
    messages = by_task(machines.receive(3))
    assert set(messages) == {"a", "b", "c"}  # every branch at once: a dependant parks itself
    for name, message in messages.items():
        assert message["kind"] == "dag_task" and message["job"] == JOB and message["retry_count"] == 0
        assert message["run_id"] == "20270104T090000Z" and message["token"] and message["task"] == name
    assert started(machines, job) == arn  # the same run's start again: the same execution, nothing sent
    with pytest.raises(ExecutionNotOurs):  # its name with another input: never adopted
        machines.workflows.start(arn, {"job": JOB, "another": "input"})


def test_a_token_takes_one_report_and_unknown_tokens_none(machines: Machines) -> None:
    callback = {"type": "callback", "timeout": "1h"}
    started(machines, spec(lambda_task("a", target=callback, heartbeat_timeout="3m"), lambda_task("b")))
    messages = by_task(machines.receive(2))
    token = messages["a"]["token"]
    assert machines.workflows.heartbeat(token) is True
    assert machines.workflows.succeed(token, {"task": "a", "status": "SUCCEEDED"}) is True
    again = machines.workflows.succeed(token, {"task": "a", "status": "SUCCEEDED"})
    assert again is not machines.refuses_stale_tokens
    unknown = "AAAA" + token[4:]
    assert machines.workflows.fail(unknown, TASK_FAILED, "no such token") is False


def test_a_retried_failure_sends_the_next_attempt_with_a_new_token(machines: Machines) -> None:
    started(machines, spec(lambda_task("a", retry=RETRIED)))
    (first,) = machines.receive(1)
    assert machines.workflows.fail(first["token"], TASK_FAILED, "503 from the target") is True
    machines.later(1.2)
    (second,) = machines.receive(1)
    assert second["task"] == "a" and second["retry_count"] == 1 and second["token"] != first["token"]
    old = machines.workflows.succeed(first["token"], {"task": "a"})  # the old attempt's token
    assert old is not machines.refuses_stale_tokens
    assert machines.workflows.succeed(second["token"], {"task": "a"}) is True


def test_a_failure_not_retried_reports_the_task_failed_with_the_execution(machines: Machines) -> None:
    arn = started(machines, spec(lambda_task("a", retry=RETRIED), lambda_task("b")))
    messages = by_task(machines.receive(2))
    assert machines.workflows.fail(messages["a"]["token"], TASK_FAILED_PERMANENTLY, "bad input") is True
    (report,) = machines.receive(1)
    assert report["kind"] == "dag_task_failed" and report["task"] == "a" and report["execution"] == arn
    assert report["error"] == TASK_FAILED_PERMANENTLY
    assert report["cause"] == ("bad input" if machines.refuses_stale_tokens else None)


def test_a_stopped_execution_takes_no_more_reports(machines: Machines) -> None:
    arn = started(machines, spec(lambda_task("a"), lambda_task("b")))
    messages = by_task(machines.receive(2))
    machines.workflows.stop(arn, cause="cancelled by request")
    machines.later(0.2)
    late = machines.workflows.succeed(messages["a"]["token"], {"task": "a"})
    assert late is not machines.refuses_stale_tokens
