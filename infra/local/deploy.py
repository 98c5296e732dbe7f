"""Deploy the synthesized CDK app into a moto server through CloudFormation: the same template as AWS.

moto lacks some resource types and has a few quirks. The template is adapted, each adaptation is
reported once, and nothing is silently missing:
- Lambda event source mappings are taken out: moto would try to run functions in Docker on every
  send. The local runtime polls the queues itself, with each mapping's own settings.
- Resource types moto cannot create are taken out. References to them become their ARNs, and the
  runtime creates the ones the handlers need (the callback secret) with the same names.
- Tag formats moto reads differently (KMS keys, SSM parameters) are converted.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from infra.local.statefiles import write_atomically
from jobsched.core.names import LOCAL_STAGE

REGION = "us-east-1"
ACCOUNT = "123456789012"
STAGE = LOCAL_STAGE

# What the local runtime does instead, for each type moto cannot create.
UNSUPPORTED = {
    "AWS::ApiGateway::Account": "the local gateway logs requests itself",
    "AWS::ApiGateway::RequestValidator": "the local gateway passes requests to the API handler, which validates them",
    "AWS::ApiGateway::Stage": "the local gateway on 127.0.0.1 serves the API",
    "AWS::ApiGateway::UsagePlan": "per-team throttling runs in the API handler",
    "AWS::CloudWatch::Alarm": "evaluated by the local runtime from the handlers' metrics (jobsched local alarms)",
    "AWS::SNS::TopicPolicy": "moto does not enforce resource policies",
    "AWS::SQS::QueuePolicy": "moto does not enforce resource policies",
    "AWS::SecretsManager::Secret": "created by the local runtime with the same name",
    "AWS::SecretsManager::RotationSchedule": "the local signing key lives for one run of the stack",
    "AWS::DynamoDB::GlobalTable": "created as a table of the same name, keys, indexes and key (its one replica)",
}


@dataclass(frozen=True)
class EventSource:
    function: str  # logical id
    queue: str  # logical id
    batch_size: int
    max_concurrency: int
    report_failures: bool


@dataclass
class Deployment:
    endpoint: str
    stack_name: str
    physical: dict[str, str]  # logical id -> physical id (queue URL, table name, function name, ...)
    functions: dict[str, dict[str, Any]]  # function name -> {"handler": ..., "environment": {...}, "role": arn}
    event_sources: list[EventSource]
    tick_seconds: dict[str, int]  # function logical id -> rule period
    adaptations: list[str] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)  # logical id -> secret name

    def queue_url(self, logical_id: str) -> str:
        return self.physical[logical_id]


ROOT = Path(__file__).resolve().parents[2]
# What a synthesis of the local stage depends on: the app's code and configuration, and the CDK's version.
SYNTH_INPUTS = ("infra", "shared", "functions", "examples", "cdk.json", "pyproject.toml")
TEMPLATE_CACHE = "template-cache.json"
SHARED_TEMPLATES = Path("build") / "local-templates"  # in the checkout, by the digest of their inputs


def synthesize_cached(state_dir: Path, *, examples: bool) -> tuple[dict[str, Any], bool]:
    """The template, reused from ``state_dir`` when nothing it depends on changed (a restart of ``make run``
    skips the 20 s synthesis); True when it was reused."""
    digest = hashlib.sha256(f"examples={examples};cdk={metadata.version('aws-cdk-lib')}".encode())
    for name in SYNTH_INPUTS:
        top = ROOT / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    key = digest.hexdigest()
    # The state's own copy, then the checkout's (another state, or a test's stack, synthesized the same inputs).
    caches = (state_dir / TEMPLATE_CACHE, ROOT / SHARED_TEMPLATES / f"{key}.json")
    for cache in caches:
        try:
            cached = json.loads(cache.read_text())
            if cached["key"] == key:
                write_atomically(caches[0], json.dumps(cached))
                return cached["template"], True
        except (OSError, ValueError, KeyError, TypeError):
            pass  # none yet, or unreadable: synthesize
    template = synthesize(state_dir / "cdk.out", examples=examples)
    for cache in caches:
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(cache, json.dumps({"key": key, "template": template}))
    _keep_newest(ROOT / SHARED_TEMPLATES, 4)  # templates of sources long changed go
    return template, False


def _keep_newest(folder: Path, count: int) -> None:
    dated = []
    for path in folder.glob("*.json"):
        try:
            dated.append((path.stat().st_mtime, path))
        except OSError:
            continue  # another process removed it
    for _, stale in sorted(dated)[:-count]:
        stale.unlink(missing_ok=True)


def synthesize(outdir: Path, *, examples: bool) -> dict[str, Any]:
    """The app's template for the local stage, with stub code (the handlers run from this checkout)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")
    import aws_cdk as cdk

    from infra.app import build

    context = {"stage": STAGE, "account": ACCOUNT, "region": REGION, "examples": str(examples).lower()}
    app = cdk.App(context=context, outdir=str(outdir))
    stack = build(app)
    app.synth()
    template: dict[str, Any] = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
    return template


def adapt(
    template: dict[str, Any],
) -> tuple[dict[str, Any], list[EventSource], dict[str, int], list[str], dict[str, str]]:
    """The template as moto can create it: what moto cannot is taken out (and stood in for), event source
    mappings are left to the local runtime; the tick rules' rates are read for it too."""
    template = json.loads(json.dumps(template))
    resources: dict[str, Any] = template["Resources"]
    event_sources: list[EventSource] = []
    secrets: dict[str, str] = {}
    removed: dict[str, str] = {}  # logical id -> ARN stand-in
    removed_kinds: set[str] = set()
    for logical, resource in list(resources.items()):
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::Lambda::EventSourceMapping":
            event_sources.append(_event_source(props))
            del resources[logical]
        elif kind == "AWS::DynamoDB::GlobalTable":
            resources[logical] = _as_table(resource)
            removed_kinds.add(kind)
        elif kind in UNSUPPORTED:
            removed[logical] = _stand_in(kind, logical, props, secrets)
            removed_kinds.add(kind)
            del resources[logical]
        else:
            _fix_tags(kind, props)
    adaptations = [f"moto cannot create {kind}: {UNSUPPORTED[kind]}" for kind in sorted(removed_kinds)]
    if event_sources:
        adaptations.append(
            f"{len(event_sources)} SQS event source mappings run in the local runtime (moto would need Docker)"
        )
    template["Resources"] = _replace_references(resources, removed)
    if "Outputs" in template:
        template["Outputs"] = _replace_references(template["Outputs"], removed)
    template.pop("Rules", None)
    template.get("Parameters", {}).pop("BootstrapVersion", None)
    return template, event_sources, _ticks(template["Resources"]), adaptations, secrets


def _as_table(resource: dict[str, Any]) -> dict[str, Any]:
    """A global table with one replica as moto's CloudFormation can create it: a table (same name, keys, indexes)."""
    props = resource["Properties"]
    provisioned = props.get("BillingMode") == "PROVISIONED"
    throughput = {"ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}} if provisioned else {}
    [replica] = props["Replicas"]
    table = {
        "TableName": props["TableName"],
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
        "GlobalSecondaryIndexes": [
            {"IndexName": i["IndexName"], "KeySchema": i["KeySchema"], "Projection": i["Projection"], **throughput}
            for i in props.get("GlobalSecondaryIndexes", [])
        ],
        "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS"}
        | {"KMSMasterKeyId": replica.get("SSESpecification", {}).get("KMSMasterKeyId")},
        **throughput,
    }
    return {**resource, "Type": "AWS::DynamoDB::Table", "Properties": table}


def _event_source(props: dict[str, Any]) -> EventSource:
    return EventSource(
        function=props["FunctionName"]["Ref"],
        queue=props["EventSourceArn"]["Fn::GetAtt"][0],
        batch_size=int(props.get("BatchSize", 10)),
        max_concurrency=int(props.get("ScalingConfig", {}).get("MaximumConcurrency", 2)),
        report_failures="ReportBatchItemFailures" in props.get("FunctionResponseTypes", []),
    )


def _stand_in(kind: str, logical: str, props: dict[str, Any], secrets: dict[str, str]) -> str:
    """The ARN a resource moto cannot create is referred to by (a secret is kept, by name, in ``secrets``)."""
    if kind == "AWS::SecretsManager::Secret":
        secrets[logical] = props["Name"]
        # ARNs keep their real shape: templates take them apart with Fn::Split / Fn::Select.
        return f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{props['Name']}-local"
    service = kind.split("::")[1].lower()
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{kind.split('::')[2].lower()}/{logical}"


def _fix_tags(kind: str, props: dict[str, Any]) -> None:
    """Tags in the shape moto's parser expects for these two resource types."""
    if kind == "AWS::KMS::Key" and props.get("Tags"):
        props["Tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} for t in props["Tags"]]
    elif kind == "AWS::SSM::Parameter" and isinstance(props.get("Tags"), dict):
        props["Tags"] = [{"Key": k, "Value": v} for k, v in props["Tags"].items()]


def _ticks(resources: dict[str, Any]) -> dict[str, int]:
    """Seconds between ticks of each function an EventBridge rule invokes."""
    ticks: dict[str, int] = {}
    for resource in resources.values():
        # A rule on an event pattern (CloudTrail's record of a console action) has no tick: nothing
        # locally produces those events, and the local console confirms its caller itself.
        if resource["Type"] == "AWS::Events::Rule" and "ScheduleExpression" in resource["Properties"]:
            expression = resource["Properties"]["ScheduleExpression"]
            for target in resource["Properties"].get("Targets", []):
                ticks[target["Arn"]["Fn::GetAtt"][0]] = _rate_seconds(expression)
    return ticks


def _replace_references(value: Any, removed: dict[str, str]) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, inner),) = value.items()
            if key == "Ref" and inner in removed:
                return removed[inner]
            if key == "Fn::GetAtt" and isinstance(inner, list) and inner[0] in removed:
                return removed[inner[0]]
        return {k: _replace_references(v, removed) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_references(v, removed) for v in value]
    return value


def _rate_seconds(expression: str) -> int:
    """rate(1 minute) -> 60."""
    amount, unit = expression.removeprefix("rate(").removesuffix(")").split()
    return int(amount) * {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600}[unit]


def deploy(endpoint: str, template: dict[str, Any]) -> Deployment:
    import boto3

    adapted, event_sources, ticks, adaptations, secrets = adapt(template)
    stack_name = f"jobsched-{STAGE}"
    cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, region_name=REGION)
    cloudformation.create_stack(
        StackName=stack_name, TemplateBody=json.dumps(adapted), Capabilities=["CAPABILITY_NAMED_IAM"]
    )
    status = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]["StackStatus"]
    if status != "CREATE_COMPLETE":
        raise RuntimeError(f"the local stack did not deploy: {status}")
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]
        if r.get("PhysicalResourceId")
    }
    lambda_client = boto3.client("lambda", endpoint_url=endpoint, region_name=REGION)
    # moto's CloudFormation drops Lambda tags; ownership is decided by them (the shared examples), so the
    # tags the template gives each function are applied here.
    for logical, resource in adapted["Resources"].items():
        tags = resource.get("Properties", {}).get("Tags")
        if resource["Type"] == "AWS::Lambda::Function" and tags and logical in physical:
            arn = lambda_client.get_function(FunctionName=physical[logical])["Configuration"]["FunctionArn"]
            lambda_client.tag_resource(Resource=arn, Tags={tag["Key"]: tag["Value"] for tag in tags})
    functions = {
        f["FunctionName"]: {
            "handler": f["Handler"],
            "environment": (f.get("Environment") or {}).get("Variables", {}),
            "role": f["Role"],
        }
        for f in lambda_client.list_functions()["Functions"]
    }
    return Deployment(endpoint, stack_name, physical, functions, event_sources, ticks, adaptations, secrets)
