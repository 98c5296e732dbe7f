"""Container targets: ECS tasks, Batch jobs and Kubernetes Jobs."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from jobsched.core.durations import Duration
from jobsched.core.spec.base import MAX_ASYNC_TIMEOUT, StrictModel, _bounded, _fail, _TargetBase

_ECS_CLUSTER = re.compile(
    r"^(?:[A-Za-z0-9_-]{1,255}|arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:cluster/[A-Za-z0-9_-]{1,255})$"
)
_TASK_DEFINITION = re.compile(
    r"^(?:[A-Za-z0-9_-]{1,255}(?::\d{1,10})?"
    r"|arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:task-definition/[A-Za-z0-9_-]{1,255}:\d{1,10})$"
)
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SECURITY_GROUP = re.compile(r"^sg-[0-9a-f]{8,17}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_COMMAND_BYTES = 8 * 1024  # a container override's command, all arguments together
MAX_ENVIRONMENT_BYTES = 8 * 1024  # names and values together (ECS allows its overrides 8 KB in all)
RESERVED_ENV_PREFIX = "JOBSCHED_"  # what the scheduler sets: a team may not override them
RESERVED_ENV_NAMES = frozenset({"TRACEPARENT", "TRACESTATE"})  # the run's trace context (core.traces)


def _check_pattern(value: str, pattern: re.Pattern[str], code: str, what: str) -> str:
    if not pattern.fullmatch(value):
        raise _fail(code, "'{value}' is not {what}", value=value, what=what)
    return value


class EcsNetwork(StrictModel):
    """awsvpc networking (Fargate requires it): the team's subnets and security groups."""

    subnets: list[str] = Field(min_length=1, max_length=16)
    security_groups: list[str] = Field(default_factory=list, max_length=5)
    assign_public_ip: bool = False

    @field_validator("subnets")
    @classmethod
    def _subnets(cls, value: list[str]) -> list[str]:
        return [_check_pattern(item, _SUBNET, "invalid_subnet", "a subnet id (subnet-...)") for item in value]

    @field_validator("security_groups")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        return [
            _check_pattern(i, _SECURITY_GROUP, "invalid_security_group", "a security group id (sg-...)") for i in value
        ]


def _bounded_command(value: list[str] | None) -> list[str] | None:
    if value is not None and sum(len(part.encode()) for part in value) > MAX_COMMAND_BYTES:
        raise _fail("command_too_large", "the command is over {limit} bytes", limit=MAX_COMMAND_BYTES)
    return value


def _bounded_environment(value: dict[str, str]) -> dict[str, str]:
    for name in value:
        _check_pattern(name, _ENV_NAME, "invalid_env_name", "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        if name.startswith(RESERVED_ENV_PREFIX) or name.upper() in RESERVED_ENV_NAMES:
            raise _fail(
                "reserved_env_name",
                "'{name}': JOBSCHED_ variables and the trace context are the scheduler's",
                name=name,
            )
    if sum(len(k.encode()) + len(v.encode()) for k, v in value.items()) > MAX_ENVIRONMENT_BYTES:
        raise _fail("environment_too_large", "the environment is over {limit} bytes", limit=MAX_ENVIRONMENT_BYTES)
    return value


class ContainerOverride(StrictModel):
    """What one run changes in the task definition's container: bounded, so a job cannot make the task huge."""

    name: str = Field(min_length=1, max_length=255, description="the container of the task definition")
    command: list[str] | None = Field(default=None, max_length=100)
    environment: dict[str, str] = Field(default_factory=dict, max_length=100)
    cpu: int | None = Field(default=None, ge=128, le=16384, description="CPU units (1024 = 1 vCPU)")
    memory: int | None = Field(default=None, ge=128, le=122880, description="MiB")

    _command = field_validator("command")(staticmethod(_bounded_command))
    _environment = field_validator("environment")(staticmethod(_bounded_environment))


class EcsTarget(_TargetBase):
    """A task on ECS (Fargate or EC2), started with RunTask once per attempt; no Lambda waits on it: its Task
    State Change ends the run. Cluster and task definition must be the team's."""

    type: Literal["ecs"]
    cluster: str = Field(max_length=2048, json_schema_extra={"pattern": _ECS_CLUSTER.pattern})
    task_definition: str = Field(max_length=2048, json_schema_extra={"pattern": _TASK_DEFINITION.pattern})
    launch_type: Literal["FARGATE", "EC2"] | None = None
    capacity_provider: str | None = Field(default=None, min_length=1, max_length=255)
    network: EcsNetwork | None = None
    container: ContainerOverride | None = None
    timeout: Annotated[Duration, _bounded(timedelta(seconds=10), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        return _check_pattern(value, _ECS_CLUSTER, "invalid_cluster", "an ECS cluster name or ARN")

    @field_validator("task_definition")
    @classmethod
    def _task_definition(cls, value: str) -> str:
        return _check_pattern(
            value, _TASK_DEFINITION, "invalid_task_definition", "a task definition family[:revision] or ARN"
        )

    @model_validator(mode="after")
    def _capacity(self) -> EcsTarget:
        if self.launch_type is not None and self.capacity_provider is not None:
            raise _fail("launch_type_or_capacity_provider", "give launch_type or capacity_provider, not both")
        if self.launch_type == "FARGATE" and self.network is None:
            raise _fail("fargate_needs_network", "a FARGATE task needs network: {subnets: [...]} (awsvpc)")
        return self


_JOB_QUEUE = re.compile(
    r"^(?:[A-Za-z0-9_-]{1,128}|arn:aws[a-z-]*:batch:[a-z0-9-]+:\d{12}:job-queue/[A-Za-z0-9_-]{1,128})$"
)
_JOB_DEFINITION = re.compile(
    r"^(?:[A-Za-z0-9_-]{1,128}(?::\d{1,10})?"
    r"|arn:aws[a-z-]*:batch:[a-z0-9-]+:\d{12}:job-definition/[A-Za-z0-9_-]{1,128}:\d{1,10})$"
)
MAX_ARRAY_SIZE = 10_000  # AWS Batch's own limit of an array job's children


class BatchContainerOverride(StrictModel):
    """What one run changes in the job definition's container: bounded like an ECS override."""

    command: list[str] | None = Field(default=None, max_length=100)
    environment: dict[str, str] = Field(default_factory=dict, max_length=100)
    vcpus: float | None = Field(default=None, gt=0, le=256, description="vCPUs (0.25 steps on Fargate)")
    memory: int | None = Field(default=None, ge=128, le=1_048_576, description="MiB")

    _command = field_validator("command")(staticmethod(_bounded_command))
    _environment = field_validator("environment")(staticmethod(_bounded_environment))


class BatchTarget(_TargetBase):
    """A job on AWS Batch (SubmitJob once per attempt; an array job when array_size is given, succeeding when
    every child does). No Lambda waits: its Batch Job State Change ends the run. Queue and definition must be
    the team's."""

    type: Literal["batch"]
    job_queue: str = Field(max_length=2048, json_schema_extra={"pattern": _JOB_QUEUE.pattern})
    job_definition: str = Field(max_length=2048, json_schema_extra={"pattern": _JOB_DEFINITION.pattern})
    array_size: int | None = Field(default=None, ge=2, le=MAX_ARRAY_SIZE, description="children of an array job")
    container: BatchContainerOverride | None = None
    timeout: Annotated[Duration, _bounded(timedelta(seconds=60), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)

    @field_validator("job_queue")
    @classmethod
    def _job_queue(cls, value: str) -> str:
        return _check_pattern(value, _JOB_QUEUE, "invalid_job_queue", "a Batch job queue name or ARN")

    @field_validator("job_definition")
    @classmethod
    def _job_definition(cls, value: str) -> str:
        return _check_pattern(
            value, _JOB_DEFINITION, "invalid_job_definition", "a Batch job definition name[:revision] or ARN"
        )


_EKS_CLUSTER = re.compile(
    r"^(?:[A-Za-z0-9][A-Za-z0-9_-]{0,99}|arn:aws[a-z-]*:eks:[a-z0-9-]+:\d{12}:cluster/[A-Za-z0-9][A-Za-z0-9_-]{0,99})$"
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,1023}$")
# Kubernetes quantities: CPU as 500m, 0.5 or 2; memory as 512Mi, 4Gi, 1G or a number of bytes.
_QUANTITY = re.compile(r"^(?:\d+(?:\.\d+)?)(?:m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


class ComputeResources(StrictModel):
    cpu: str | None = Field(default=None, max_length=32, json_schema_extra={"pattern": _QUANTITY.pattern})
    memory: str | None = Field(default=None, max_length=32, json_schema_extra={"pattern": _QUANTITY.pattern})

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None:
            _check_pattern(value, _QUANTITY, "invalid_quantity", "a Kubernetes quantity (500m, 2, 512Mi, 4Gi)")
        return value


class KubernetesResources(StrictModel):
    requests: ComputeResources = Field(default_factory=ComputeResources)
    limits: ComputeResources = Field(default_factory=ComputeResources)


class KubernetesTarget(_TargetBase):
    """A batch/v1 Job on an EKS cluster, run by the deployment's Step Functions state machine
    (``eks:runJob.sync``): one execution per attempt, named by the attempt. The cluster must be the team's (or
    shared by the platform); the namespace and service account the team's, by the platform's grants
    (``tenancy.ownership.TeamGrants``)."""

    type: Literal["kubernetes"]
    cluster: str = Field(max_length=2048, json_schema_extra={"pattern": _EKS_CLUSTER.pattern})
    namespace: str = Field(max_length=63, description="the team's namespace: its name, or one the platform grants it")
    image: str = Field(max_length=1024, json_schema_extra={"pattern": _IMAGE.pattern})
    command: list[str] | None = Field(default=None, max_length=100)
    args: list[str] | None = Field(default=None, max_length=100)
    environment: dict[str, str] = Field(default_factory=dict, max_length=100)
    resources: KubernetesResources = Field(default_factory=KubernetesResources)
    service_account: str | None = Field(default=None, max_length=253)
    ttl_after_finished: Annotated[Duration, _bounded(timedelta(0), timedelta(days=7))] = Field(
        default=timedelta(hours=1), description="how long the finished Job stays for its logs (ttlSecondsAfterFinished)"
    )
    timeout: Annotated[Duration, _bounded(timedelta(minutes=1), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)

    _command = field_validator("command")(staticmethod(_bounded_command))
    _args = field_validator("args")(staticmethod(_bounded_command))
    _environment = field_validator("environment")(staticmethod(_bounded_environment))

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        return _check_pattern(value, _EKS_CLUSTER, "invalid_eks_cluster", "an EKS cluster name or ARN")

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return _check_pattern(value, _IMAGE, "invalid_image", "a container image reference")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return _check_pattern(value, _DNS_LABEL, "invalid_namespace", "a Kubernetes namespace (a DNS label)")

    @field_validator("service_account")
    @classmethod
    def _service_account(cls, value: str | None) -> str | None:
        if value is not None:
            _check_pattern(value, _DNS_SUBDOMAIN, "invalid_service_account", "a Kubernetes service account name")
        return value
