"""Targets: what a run calls, one model per type, and the union of them all."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
)

from jobsched.core.bounds import is_stored
from jobsched.core.durations import Duration
from jobsched.core.spec.base import (
    _CREDENTIAL_HEADERS,
    _EVENT_BUS,
    _HEADER_NAME,
    _LAMBDA_ARN,
    _LAMBDA_NAME,
    _STATES_ARN,
    MAX_ASYNC_TIMEOUT,
    MAX_SYNC_TARGET_TIMEOUT,
    HttpUrl,
    SecretRef,
    TargetUrl,
    _bounded,
    _fail,
    _PayloadTarget,
    _TargetBase,
    header_value_allowed,
)
from jobsched.core.spec.containers import BatchTarget, EcsTarget, KubernetesTarget


class LambdaTarget(_PayloadTarget):
    type: Literal["lambda"]
    function: str = Field(
        description="function name, name:alias, or ARN",
        json_schema_extra={"pattern": f"{_LAMBDA_NAME.pattern}|{_LAMBDA_ARN.pattern}"},
    )
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_SYNC_TARGET_TIMEOUT)] = timedelta(minutes=5)

    @field_validator("function")
    @classmethod
    def _function(cls, value: str) -> str:
        if not (_LAMBDA_NAME.fullmatch(value) or _LAMBDA_ARN.fullmatch(value)):
            raise _fail(
                "invalid_function",
                "'{value}' is not a Lambda function name or ARN (arn:aws:lambda:REGION:ACCOUNT:function:NAME)",
                value=value,
            )
        return value


class SqsTarget(_PayloadTarget):
    type: Literal["sqs"]
    queue_url: HttpUrl
    message_group_id: str | None = Field(default=None, max_length=128, description="FIFO queues only")


class StepFunctionsTarget(_PayloadTarget):
    type: Literal["stepfunctions"]
    state_machine_arn: str = Field(json_schema_extra={"pattern": _STATES_ARN.pattern})
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)

    @field_validator("state_machine_arn")
    @classmethod
    def _arn(cls, value: str) -> str:
        if not _STATES_ARN.fullmatch(value):
            raise _fail(
                "invalid_state_machine_arn",
                "'{value}' is not a state machine ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)",
                value=value,
            )
        return value


class EventBridgeTarget(_PayloadTarget):
    type: Literal["eventbridge"]
    bus: str = Field(default="default", json_schema_extra={"pattern": _EVENT_BUS.pattern})
    detail_type: str = Field(default="Scheduled Job Run", min_length=1, max_length=128)
    source: str = Field(default="jobsched", min_length=1, max_length=256)

    @field_validator("bus")
    @classmethod
    def _bus(cls, value: str) -> str:
        if not _EVENT_BUS.fullmatch(value):
            raise _fail("invalid_event_bus", "'{value}' is not an event bus name or ARN", value=value)
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if value.startswith("aws."):
            raise _fail("reserved_source", "sources starting with 'aws.' are reserved for AWS services")
        return value


class HttpTarget(_PayloadTarget):
    type: Literal["http"]
    url: TargetUrl
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, max_length=50)
    secret_headers: dict[str, SecretRef] = Field(default_factory=dict, max_length=20)
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_SYNC_TARGET_TIMEOUT)] = timedelta(seconds=30)

    @field_validator("headers", "secret_headers")
    @classmethod
    def _header_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _HEADER_NAME.fullmatch(name):
                raise _fail("invalid_header", "'{name}' is not a valid HTTP header name", name=name)
        return value

    @field_validator("headers")
    @classmethod
    def _header_values(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if is_stored(info):  # checked since #26: a job stored before fails its runs in the http adapter instead
            return value
        for name, text in value.items():
            if not header_value_allowed(text):
                raise _fail(
                    "invalid_header",
                    "the value of header '{name}' is not one line of text: no CR, LF, NUL or other control characters, "
                    "Latin-1 characters only",
                    name=name,
                )
        return value

    @field_validator("headers")
    @classmethod
    def _no_credentials(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name.lower() in _CREDENTIAL_HEADERS:
                raise _fail(
                    "secret_in_headers",
                    "header '{name}' carries credentials: move it to secret_headers as "
                    "secretsmanager:NAME or ssm:/NAME (values are resolved at run time, never stored)",
                    name=name,
                )
        return value


class CallbackTarget(_TargetBase):
    """The run stays RUNNING until external work reports completion with the run's token."""

    type: Literal["callback"]
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)


class ApprovalTarget(_TargetBase):
    """A DAG task that waits for a person: a member of the team approves or rejects it (API, CLI, console). It
    holds nothing while it waits (the state's task token); ``timeout`` ends the wait (TIMED_OUT). Never retried."""

    type: Literal["approval"]
    timeout: Annotated[Duration, _bounded(timedelta(minutes=1), MAX_ASYNC_TIMEOUT)] = timedelta(hours=24)
    message: str = Field(
        default="", max_length=1000, description="what the approver is asked (in the page and the run view)"
    )
    page_on_reject: bool = Field(
        default=False,
        description="a rejection fails the run and pages like a failure; by default it is a decision: the run "
        "ends CANCELLED with who rejected it and why, recorded and shown, and nobody is paged",
    )


Target = Annotated[
    LambdaTarget
    | SqsTarget
    | StepFunctionsTarget
    | EventBridgeTarget
    | HttpTarget
    | CallbackTarget
    | ApprovalTarget
    | EcsTarget
    | BatchTarget
    | KubernetesTarget,
    Field(discriminator="type"),
]
TARGET_TYPES = (
    "lambda",
    "sqs",
    "stepfunctions",
    "eventbridge",
    "http",
    "callback",
    "approval",
    "ecs",
    "batch",
    "kubernetes",
)
# Targets whose result arrives from outside (a callback, a container's state change): no worker waits for it.
EXTERNAL_TARGETS = (CallbackTarget, ApprovalTarget, EcsTarget, BatchTarget, KubernetesTarget)
# Targets that run as containers: their timeout is a wall-clock limit from the start (heartbeats report progress
# and checkpoints but never extend it), and their task is stopped when the run ends early.
CONTAINER_TARGETS = (EcsTarget, BatchTarget, KubernetesTarget)
ContainerTarget = EcsTarget | BatchTarget | KubernetesTarget
