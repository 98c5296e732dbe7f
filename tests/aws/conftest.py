from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from moto import mock_aws

from functions import forget_services
from infra.local.gateway import LocalGateway
from infra.local.moto_patches import fresh_task_token_per_attempt
from jobsched.adapters.aws.clients import reset_clients
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import REGION, Clock, FakeLambdas, Stack


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "jobsched-test",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("JOBSCHED_AWS_ENDPOINT", raising=False)
    assert os.environ["AWS_DEFAULT_REGION"] == REGION


@pytest.fixture
def clock() -> Clock:
    return Clock("2027-01-04T08:59:00Z")


@pytest.fixture
def lambdas() -> FakeLambdas:
    return FakeLambdas(functions={"echo": lambda event: {"echo": event["payload"]}})


@pytest.fixture
def stack(clock: Clock, lambdas: FakeLambdas, request: pytest.FixtureRequest) -> Iterator[Stack]:
    in_memory = request.node.get_closest_marker("in_memory_queues") is not None
    with mock_aws(config={"batch": {"use_docker": False}}):
        reset_clients()
        yield Stack(clock, lambdas, in_memory_queues=in_memory)
    reset_clients()


@pytest.fixture
def dag_stack(clock: Clock, lambdas: FakeLambdas) -> Iterator[Stack]:
    """A stack whose state machines run: moto's Step Functions interpreter, in its own threads, in real time."""
    fresh_task_token_per_attempt()
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        reset_clients()
        yield Stack(clock, lambdas)
    reset_clients()


@pytest.fixture
def deployed(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """Handler environment pointing at the moto stack, as the deployed Lambda configuration would."""
    for name, value in stack.handler_environment().items():
        monkeypatch.setenv(name, value)
    forget_services()
    yield stack
    forget_services()


@pytest.fixture
def gateway(stack: Stack) -> Iterator[LocalGateway]:
    """The API over HTTP on 127.0.0.1 as team payments, with one hourly job for GETs to find."""
    api = ApiClient(stack, requests_per_minute=1_000_000)
    api.call(
        "PUT",
        "/teams/payments/jobs/hourly",
        {"schedule": {"expression": "0 * * * *"}, "target": {"type": "lambda", "function": "echo"}},
    )
    server = LocalGateway(api.handle, principal=team_role("payments")).start()
    yield server
    server.stop()
