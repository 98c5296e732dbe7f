"""Each target type end to end: the run id, attempt, instant and correlation id reach every target."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import boto3
import pytest

from jobsched.adapters.aws.targets import TargetExecutor
from jobsched.core.names import OWNER_TAG
from jobsched.core.runs import RunStatus
from jobsched.registry.jobs import put_job
from jobsched.tenancy.ownership import OwnershipGuard, ResourceRef
from tests.aws.harness import REGION, Clock, Stack
from tests.helpers import RecordingServer, recording_server

MINUTE = timedelta(minutes=1)
OPS = {OWNER_TAG: "ops"}


def run_one(stack: Stack, clock: Clock, target: dict[str, Any], name: str = "t") -> Any:
    clock.set("2027-01-04T09:59:30Z")
    stack.register({"name": name, "team": "ops", "schedule": {"expression": "0 * * * *"}, "target": target})
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    [run] = stack.run_list(f"ops/{name}")
    return run


def test_sqs_target(stack: Stack, clock: Clock) -> None:
    url = stack.sqs.create_queue(QueueName="team-inbox", tags=OPS)["QueueUrl"]
    run = run_one(stack, clock, {"type": "sqs", "queue_url": url, "payload": {"n": 1}})
    assert run.status is RunStatus.SUCCEEDED
    [message] = stack.sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    body = json.loads(message["Body"])
    assert body["payload"] == {"n": 1} and body["jobsched"]["run_id"] == "20270104T100000Z"
    assert message["MessageAttributes"]["run_id"]["StringValue"] == "20270104T100000Z"


def test_sqs_fifo_target_dedupes_by_run_id(stack: Stack, clock: Clock) -> None:
    url = stack.sqs.create_queue(QueueName="team.fifo", Attributes={"FifoQueue": "true"}, tags=OPS)["QueueUrl"]
    run = run_one(stack, clock, {"type": "sqs", "queue_url": url})
    assert run.status is RunStatus.SUCCEEDED
    [message] = stack.sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert message["Attributes"]["MessageDeduplicationId"] == "20270104T100000Z"


def test_stepfunctions_target_names_the_execution_after_the_run(stack: Stack, clock: Clock) -> None:
    states = boto3.client("stepfunctions", region_name=REGION)
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
    arn = states.create_state_machine(
        name="etl", definition=definition, roleArn=role, tags=[{"key": OWNER_TAG, "value": "ops"}]
    )["stateMachineArn"]
    run = run_one(stack, clock, {"type": "stepfunctions", "state_machine_arn": arn, "payload": {"day": "x"}})
    assert run.status is RunStatus.SUCCEEDED
    [execution] = states.list_executions(stateMachineArn=arn)["executions"]
    assert execution["name"] == "20270104T100000Z"
    started = json.loads(states.describe_execution(executionArn=execution["executionArn"])["input"])
    assert started["payload"] == {"day": "x"} and started["jobsched"]["attempt"] == 1


def test_eventbridge_target(stack: Stack, clock: Clock) -> None:
    events = boto3.client("events", region_name=REGION)
    inbox = stack.sqs.create_queue(QueueName="events-inbox")["QueueUrl"]
    inbox_arn = stack.sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.create_event_bus(Name="ops-bus", Tags=[{"Key": OWNER_TAG, "Value": "ops"}])
    events.put_rule(Name="jobs", EventBusName="ops-bus", EventPattern=json.dumps({"source": ["payments.jobs"]}))
    events.put_targets(Rule="jobs", EventBusName="ops-bus", Targets=[{"Id": "inbox", "Arn": inbox_arn}])
    run = run_one(
        stack,
        clock,
        {
            "type": "eventbridge",
            "bus": "ops-bus",
            "source": "payments.jobs",
            "detail_type": "Nightly",
            "payload": {"a": 1},
        },
    )
    assert run.status is RunStatus.SUCCEEDED
    [message] = stack.sqs.receive_message(QueueUrl=inbox)["Messages"]
    event = json.loads(message["Body"])
    assert event["detail-type"] == "Nightly" and event["detail"]["jobsched"]["run_id"] == "20270104T100000Z"


@pytest.fixture
def webhook() -> Iterator[RecordingServer]:
    with recording_server() as server:
        yield server


def test_http_target_sends_run_headers_and_resolves_secret_headers(stack: Stack, clock: Clock, webhook: Any) -> None:
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secrets.create_secret(
        Name="payments/token",
        SecretString=json.dumps({"header": "Bearer s3cr3t"}),
        Tags=[{"Key": OWNER_TAG, "Value": "ops"}],
    )
    target = {
        "type": "http",
        "url": webhook.url,
        "headers": {"X-Team": "ops"},
        "secret_headers": {"Authorization": "secretsmanager:payments/token#header"},
        "payload": {"report": "daily"},
    }
    webhook.statuses[:] = [503]  # one 5xx: retried within the attempt
    run = run_one(stack, clock, target)
    assert run.status is RunStatus.SUCCEEDED and run.attempt == 1
    assert len(webhook.seen) == 2
    headers = webhook.seen[-1]["headers"]
    assert headers["Authorization"] == "Bearer s3cr3t" and headers["X-Team"] == "ops"
    assert headers["Idempotency-Key"] == headers["X-Jobsched-Run-Id"] == "20270104T100000Z"
    assert headers["X-Jobsched-Attempt"] == "1" and headers["X-Jobsched-Scheduled-At"] == "2027-01-04T10:00:00Z"
    assert headers["X-Correlation-Id"] == "ops/t/20270104T100000Z"
    assert webhook.seen[-1]["body"] == {"report": "daily"}
    assert "s3cr3t" not in json.dumps(stack.dynamodb.scan(TableName=stack.runs_table)["Items"])


def test_http_4xx_fails_without_retrying(stack: Stack, clock: Clock, webhook: Any) -> None:
    webhook.statuses[:] = [400]
    run = run_one(stack, clock, {"type": "http", "url": webhook.url})
    assert run.status is RunStatus.FAILED and run.attempt == 1 and run.error.startswith("HTTP 400")
    assert len(webhook.seen) == 1
    [event] = stack.escalations()
    assert event["kind"] == "run_failed" and event["run_id"] == run.run_id


def test_http_connection_refused_is_retried(stack: Stack, clock: Clock) -> None:
    run = run_one(stack, clock, {"type": "http", "url": "http://127.0.0.1:9/nothing-listens"})
    assert run.status is RunStatus.RETRYING and "connection error" in (run.error or "")


def test_missing_secret_fails_without_calling(stack: Stack, clock: Clock, webhook: Any) -> None:
    target = {"type": "http", "url": webhook.url, "secret_headers": {"Authorization": "ssm:/missing/param"}}
    run = run_one(stack, clock, target)
    assert run.status is RunStatus.FAILED and run.attempt == 1
    assert run.error == (
        "not allowed: SSM parameter '/missing/param' does not exist or is not visible; team 'ops' may not use it"
    )
    assert webhook.seen == []


def test_callback_target_stays_running_on_the_lease_index(stack: Stack, clock: Clock) -> None:
    clock.set("2027-01-04T09:59:30Z")
    stack.register(
        {
            "name": "cb",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "callback", "timeout": "2h"},
            "heartbeat_timeout": "5m",
        }
    )
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    [run] = stack.run_list("ops/cb")
    assert run.status is RunStatus.RUNNING and run.lease_until is not None
    leases = stack.dynamodb.scan(TableName=stack.runs_table, IndexName="leases")["Items"]
    assert len(leases) == 1 and leases[0]["lease_expires_at"]["S"] == "2027-01-04T10:06:00Z"


def test_missing_lambda_function_fails_clearly(stack: Stack, clock: Clock) -> None:
    run = run_one(stack, clock, {"type": "lambda", "function": "does-not-exist"})
    assert run.status is RunStatus.FAILED and run.attempt == 1
    assert "Lambda function 'does-not-exist' does not exist" in (run.error or "")


def test_executor_never_raises_for_aws_errors() -> None:
    from botocore.exceptions import ClientError

    def failing(function: str, payload: bytes, timeout: timedelta) -> tuple[bytes, str | None]:
        raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no"}}, "Invoke")

    from jobsched.core.run_records import RunContext
    from jobsched.core.spec import LambdaTarget

    class Owned:
        def tags(self, team: str, resource: ResourceRef) -> dict[str, str]:
            return {OWNER_TAG: team}

    result = TargetExecutor(guard=OwnershipGuard(Owned(), ()), lambda_invoker=failing).execute(
        LambdaTarget(type="lambda", function="x"), RunContext("a/b", "a", "r", 1, "t", "c")
    )
    assert result.outcome == "failed" and not result.retryable and result.error == "ResourceNotFoundException: no"


def test_a_header_stored_with_a_line_break_fails_the_run_instead_of_the_worker(
    stack: Stack, clock: Clock, webhook: Any
) -> None:
    """A job stored before header values were checked: http.client refuses the value at send time (ValueError).
    The run is FAILED with the reason and its slot freed, not left RUNNING with the message on its way to the
    dead-letter queue."""
    clock.set("2027-01-04T09:59:30Z")
    spec = stack.register(
        {
            "name": "t",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "http", "url": webhook.url},
        }
    )
    injected = spec.model_copy(
        update={"target": spec.target.model_copy(update={"headers": {"X-A": "a\r\nX-Injected: 1"}})}  # type: ignore[union-attr]
    )
    put_job(stack.jobs, injected, now=clock(), principal="test", dags=stack.dags)
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    [run] = stack.run_list("ops/t")
    assert run.status is RunStatus.FAILED and run.attempt == 1, run
    assert run.error == "target adapter error: ValueError"
    assert webhook.seen == []
    assert stack.live_slot_holders("TEAM#ops", "QUOTA") == {}, "the team's slot is free again"


def test_a_secret_header_whose_value_has_a_line_break_is_never_sent(stack: Stack, clock: Clock, webhook: Any) -> None:
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secrets.create_secret(
        Name="ops/token", SecretString="Bearer x\r\nX-Injected: 1", Tags=[{"Key": OWNER_TAG, "Value": "ops"}]
    )
    target = {"type": "http", "url": webhook.url, "secret_headers": {"Authorization": "secretsmanager:ops/token"}}
    run = run_one(stack, clock, target)
    assert run.status is RunStatus.FAILED and run.attempt == 1
    assert run.error == "the secret for header Authorization is not one line of Latin-1 text (CR, LF, NUL...)"
    assert webhook.seen == [] and "Injected" not in json.dumps(stack.dynamodb.scan(TableName=stack.runs_table)["Items"])


def test_an_adapter_that_raises_anything_gives_a_failed_result() -> None:
    from jobsched.core.run_records import RunContext
    from jobsched.core.spec import LambdaTarget

    def broken(function: str, payload: bytes, timeout: timedelta) -> tuple[bytes, str | None]:
        raise RecursionError("maximum recursion depth exceeded")

    class Owned:
        def tags(self, team: str, resource: ResourceRef) -> dict[str, str]:
            return {OWNER_TAG: team}

    result = TargetExecutor(guard=OwnershipGuard(Owned(), ()), lambda_invoker=broken).execute(
        LambdaTarget(type="lambda", function="x"), RunContext("a/b", "a", "r", 1, "t", "c")
    )
    assert (
        result.outcome == "failed" and not result.retryable and result.error == "target adapter error: RecursionError"
    )


def _answering(answer: Any) -> Any:
    """A Lambda invoker that answers (body, function error) or raises what it is given."""

    def invoke(function: str, payload: bytes, timeout: timedelta) -> tuple[bytes, str | None]:
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    return invoke


@pytest.mark.parametrize(
    ("answer", "unhealthy"),
    [
        ((b'{"errorType": "ValueError", "errorMessage": "bad row 7"}', "Unhandled"), False),
        (
            (b'{"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out after 3.00 seconds"}', "Unhandled"),
            True,
        ),
        ((b'{"errorMessage": "2027-01-04 Task timed out after 900.10 seconds"}', "Unhandled"), True),
        ("TooManyRequestsException", True),
        ("ServiceException", True),
        ("ResourceConflictException", True),
        ("InvalidParameterValueException", False),
        ("AccessDeniedException", False),
    ],
)
def test_only_failures_that_say_the_target_is_unwell_count_toward_its_breaker(answer: Any, unhealthy: bool) -> None:
    """A timeout, a throttle, a 5xx or a refused connection says the target is unwell; the job's own exception
    or a request the target refuses says only that this job's work failed (#46: the demo's failing job)."""
    from botocore.exceptions import ClientError

    from jobsched.core.run_records import RunContext
    from jobsched.core.spec import LambdaTarget

    if isinstance(answer, str):
        status = 429 if answer == "TooManyRequestsException" else 500 if answer == "ServiceException" else 400
        answer = ClientError(
            {"Error": {"Code": answer, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Invoke"
        )

    class Owned:
        def tags(self, team: str, resource: ResourceRef) -> dict[str, str]:
            return {OWNER_TAG: team}

    result = TargetExecutor(guard=OwnershipGuard(Owned(), ()), lambda_invoker=_answering(answer)).execute(
        LambdaTarget(type="lambda", function="x"), RunContext("a/b", "a", "r", 1, "t", "c")
    )
    assert result.outcome == "failed" and result.unhealthy is unhealthy


def test_http_5xx_and_refused_connections_are_unhealthy_and_4xx_is_not(
    stack: Stack, clock: Clock, webhook: Any
) -> None:
    refused = run_one(stack, clock, {"type": "http", "url": "http://127.0.0.1:9/nothing-listens"}, name="refused")
    webhook.statuses[:] = [503, 503, 503]
    down = run_one(stack, clock, {"type": "http", "url": webhook.url}, name="down")
    webhook.statuses[:] = [400]
    wrong = run_one(stack, clock, {"type": "http", "url": webhook.url}, name="wrong")
    assert refused.status is down.status is RunStatus.RETRYING and wrong.status is RunStatus.FAILED
    origin = webhook.url.split("/", 3)
    failures = stack.jobs.breaker(f"ops:http:{origin[0]}//{origin[2]}").failures
    assert failures == 1, "the 503s counted once (one attempt); the 400 did not"
    assert stack.jobs.breaker("ops:http:http://127.0.0.1:9").failures == 1


def test_a_secret_rotated_mid_run_is_resolved_again_once_on_401(stack: Stack, clock: Clock, webhook: Any) -> None:
    """#49: the attempt read the secret, then it was rotated; the origin answers 401 to the old value. The header is
    resolved again once (never from a cache) and the request sent with the new value: the run succeeds."""
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secrets.create_secret(Name="ops/rotated", SecretString="Bearer old", Tags=[{"Key": OWNER_TAG, "Value": "ops"}])
    real = stack.targets.secret_resolver
    reads: list[bool] = []

    def rotated_after_the_first_read(reference: str, team: str, *, fresh: bool = False) -> str:
        value = real(reference, team, fresh=fresh)
        reads.append(fresh)
        if len(reads) == 1:
            secrets.put_secret_value(SecretId="ops/rotated", SecretString="Bearer new")
        return value

    stack.targets.secret_resolver = rotated_after_the_first_read
    webhook.statuses[:] = [401]
    target = {"type": "http", "url": webhook.url, "secret_headers": {"Authorization": "secretsmanager:ops/rotated"}}
    run = run_one(stack, clock, target)
    assert run.status is RunStatus.SUCCEEDED and run.attempt == 1, run.error
    assert [request["headers"]["Authorization"] for request in webhook.seen] == ["Bearer old", "Bearer new"]
    assert reads == [False, True]


def test_a_401_with_the_secret_unchanged_fails_without_a_second_request(
    stack: Stack, clock: Clock, webhook: Any
) -> None:
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secrets.create_secret(Name="ops/wrong", SecretString="Bearer wrong", Tags=[{"Key": OWNER_TAG, "Value": "ops"}])
    webhook.statuses[:] = [403]
    target = {"type": "http", "url": webhook.url, "secret_headers": {"Authorization": "secretsmanager:ops/wrong"}}
    run = run_one(stack, clock, target)
    assert run.status is RunStatus.FAILED and (run.error or "").startswith("HTTP 403")
    assert len(webhook.seen) == 1  # read again, the same value: not sent twice


def test_every_target_type_is_metered_with_its_type(stack: Stack, clock: Clock, webhook: RecordingServer) -> None:
    """#50: an attempt of each target type adds its usage to its job's item of the day, under its type (the
    scheduler's share for each; a Lambda's own request besides; its GB-seconds when its log tail says them)."""
    url = stack.sqs.create_queue(QueueName="metered-inbox", tags=OPS)["QueueUrl"]
    events = boto3.client("events", region_name=REGION)
    events.create_event_bus(Name="metered-bus", Tags=[{"Key": OWNER_TAG, "Value": "ops"}])
    states = boto3.client("stepfunctions", region_name=REGION)
    role = "arn:aws:iam::123456789012:role/sfn"
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})
    machine = states.create_state_machine(name="metered", definition=definition, roleArn=role,
                                          tags=[{"key": OWNER_TAG, "value": "ops"}])["stateMachineArn"]  # fmt: skip
    targets = {
        "sqs": {"type": "sqs", "queue_url": url},
        "eventbridge": {"type": "eventbridge", "bus": "metered-bus", "source": "ops.jobs", "detail_type": "x"},
        "http": {"type": "http", "url": webhook.url},
        "stepfunctions": {"type": "stepfunctions", "state_machine_arn": machine},
        "lambda": {"type": "lambda", "function": "echo"},
    }
    for kind, target in targets.items():
        assert run_one(stack, clock, target, name=f"m-{kind}").status is RunStatus.SUCCEEDED
    days = {day.job: day for day in stack.jobs.usage_between("ops", date(2027, 1, 1), date(2027, 1, 31))}
    assert {job: day.target_type for job, day in days.items()} == {f"ops/m-{kind}": kind for kind in targets}
    assert all(day.counters["runs"] == day.counters["attempts"] == 1 for day in days.values())
    assert days["ops/m-lambda"].counters["target_function_requests"] == 1
    assert "target_function_requests" not in days["ops/m-sqs"].counters
