"""Example target functions for non-production stages (what ``make run`` and the README use)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Tags
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.components.common import LOG_RETENTION
from infra.components.waivers import DLQ_EXAMPLE, NO_VPC, UNRESERVED_EXAMPLE, waive
from infra.config import StageConfig
from jobsched.core.names import PROJECT, SHARED_TAG


class Examples(Construct):
    """Example targets with fixed names for the local runtime, docs and tests (off in prod)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, code: lambda_.Code, key: kms.IKey
    ) -> None:
        super().__init__(scope, construct_id)
        for name in ("echo", "flaky", "sleep"):
            function = lambda_.Function(
                self,
                name.title(),
                function_name=f"{PROJECT}-example-{name}",
                runtime=lambda_.Runtime.PYTHON_3_13,
                architecture=lambda_.Architecture.ARM_64,
                handler=f"functions.examples.{name}.handler",
                code=code,
                timeout=Duration.minutes(5),
                memory_size=128,
                tracing=lambda_.Tracing.ACTIVE if config.tracing else lambda_.Tracing.DISABLED,
                logging_format=lambda_.LoggingFormat.JSON,
                log_group=logs.LogGroup(
                    self,
                    f"{name.title()}Logs",
                    retention=LOG_RETENTION,
                    encryption_key=key,
                    removal_policy=RemovalPolicy.DESTROY,
                ),
                environment_encryption=key,
            )
            key.grant_decrypt(function)
            waive(function, NO_VPC, DLQ_EXAMPLE, UNRESERVED_EXAMPLE)
            Tags.of(function).add(SHARED_TAG, "true")  # every team may target the examples
