"""Findings of the second IaC scanner (checkov, beside cdk-nag) that this design accepts, each with its reason.

They are written into the resource's template metadata (``Metadata.checkov.skip``), where checkov reads them,
so the template says why; ``tests/infra/test_deploy_commands.py`` fails on a finding that has no reason here.
"""

from __future__ import annotations

from aws_cdk import CfnResource
from constructs import IConstruct

# Every reason, once: the ids are checkov's.
NO_VPC = (
    "CKV_AWS_117",
    "No private resource to reach: the functions call AWS APIs and teams' public HTTPS endpoints (the egress "
    "policy refuses private addresses); a VPC would add NAT gateways (~$32 a month per AZ) and nothing to protect",
)
DLQ_SYNCHRONOUS = (
    "CKV_AWS_116",
    "Invoked synchronously (API Gateway, a CloudWatch custom widget or console button): the error is the caller's "
    "answer, so a dead-letter queue for asynchronous invocations would never receive anything",
)
DLQ_QUEUE_SOURCE = (
    "CKV_AWS_116",
    "Invoked by an SQS event source with partial batch failures: a message that keeps failing goes to the source "
    "queue's dead-letter queue (redrive policy), which an alarm watches",
)
DLQ_TICK = (
    "CKV_AWS_116",
    "Invoked by a rate(1 minute) EventBridge tick: each tick is idempotent and the next one does what a failed one "
    "left, the missed-tick and error alarms page; a failed tick's event holds nothing to replay",
)
DLQ_CLOUDTRAIL = (
    "CKV_AWS_116",
    "Invoked by EventBridge with CloudTrail's record of a console action (8 retries over up to 24 hours); the "
    "action itself is already done and audited, the record only names who pressed",
)
DLQ_ROTATION = (
    "CKV_AWS_116",
    "Invoked by Secrets Manager's rotation, which records a failed rotation on the secret and keeps the current "
    "version; the signing secret's previous version keeps verifying tokens",
)
DLQ_EXAMPLE = ("CKV_AWS_116", "An example target for non-production stages (make run, the README's tour)")
UNRESERVED_WORKER = (
    "CKV_AWS_115",
    "Bounded by its event sources' maximum concurrency per priority class (-c worker_concurrency); reserving "
    "their sum would take it from the account's unreserved pool even when idle",
)
UNRESERVED_EXAMPLE = ("CKV_AWS_115", "An example target for non-production stages, invoked by runs only")
API_CACHE = (
    "CKV_AWS_120",
    "Answers are per caller and change with every run and write (runs, status, history); a cache would serve "
    "stale state and costs by the hour",
)
API_TRACING_OFF = (
    "CKV_AWS_73",
    "X-Ray is off in this non-prod stage to keep its idle cost down (-c tracing=true turns it on; prod has it)",
)
WAF_LOG4J = (
    "CKV_AWS_192",
    "No Java anywhere behind the API (Python handlers parsing JSON with pydantic): Log4j's lookup cannot apply",
)


def waive(construct: IConstruct, *findings: tuple[str, str]) -> None:
    """Add checkov skips (id, reason) to the construct's CloudFormation resource, keeping those it has."""
    resource = construct if isinstance(construct, CfnResource) else construct.node.default_child
    assert isinstance(resource, CfnResource), f"{construct.node.path} has no CloudFormation resource"
    existing = resource.get_metadata("checkov") or {"skip": []}
    skip = [*existing["skip"], *({"id": check, "comment": reason} for check, reason in findings)]
    resource.add_metadata("checkov", {"skip": skip})
