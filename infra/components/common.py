"""Helpers every construct shares: physical names, the Lambda code asset, catalog metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StageConfig
from jobsched.core.events import container_envelope_template
from jobsched.core.names import physical_name
from jobsched.watch.signals import CATALOG, NAMESPACE

WORKER_TIMEOUT = Duration.minutes(15)
ESCALATION_TIMEOUT = Duration.seconds(60)
INTAKE_TIMEOUT = Duration.seconds(60)  # a batch of ten events: reads and conditional writes, no target calls
PAGES_TIMEOUT = Duration.seconds(30)  # a batch of pages, delivered concurrently, each within its webhook timeout
LOG_RETENTION = logs.RetentionDays.ONE_MONTH


def resource_name(config: StageConfig, logical: str) -> str:
    return physical_name(config.stage, logical)


def work_end_rule(
    scope: Construct, construct_id: str, *, name: str, description: str, pattern: dict[str, Any], intake_arn: str
) -> events.CfnRule:
    """A rule that brings the end of work the scheduler started (a task, a job, an execution) to the intake,
    wrapped in the container envelope."""
    transformer = events.CfnRule.InputTransformerProperty(
        input_template=container_envelope_template(), input_paths_map={}
    )
    return events.CfnRule(
        scope,
        construct_id,
        name=name,
        description=description,
        event_pattern=pattern,
        state="ENABLED",
        targets=[events.CfnRule.TargetProperty(id="intake", arn=intake_arn, input_transformer=transformer)],
    )


def colon_arn_format() -> Any:
    from aws_cdk import ArnFormat

    return ArnFormat.COLON_RESOURCE_NAME


def lambda_code(config: StageConfig) -> lambda_.Code:
    """The asset holding functions/, shared/ and the pinned dependencies (scripts/build_asset.py);
    without one (tests, offline synth) a stub, so synthesis needs no bundling."""
    if config.asset_dir:
        path = Path(config.asset_dir)
        if not (path / "jobsched").is_dir() or not (path / "functions").is_dir():
            raise ValueError(f"{path} is not a built asset: run scripts/build_asset.py")
        return lambda_.Code.from_asset(str(path))
    return lambda_.Code.from_inline("def handler(event, context):\n    raise RuntimeError('stub: build the asset')\n")


def signal(name: str, statistic: str, period: Duration, **dimensions: str) -> cloudwatch.Metric:
    """A metric from the catalog (jobsched.watch.signals), queried with exactly the dimensions it is published with."""
    definition = CATALOG[name]
    if set(dimensions) != set(definition.dimensions):
        raise ValueError(f"{name} is published with dimensions {definition.dimensions}, not {tuple(dimensions)}")
    return cloudwatch.Metric(
        namespace=NAMESPACE, metric_name=name, dimensions_map=dimensions or None, statistic=statistic, period=period
    )


def search_schema(name: str) -> str:
    """The SEARCH schema of a catalog metric, e.g. {jobsched,outcome} MetricName="Pages"."""
    return "{" + ",".join((NAMESPACE, *CATALOG[name].dimensions)) + '} MetricName="' + name + '"'
