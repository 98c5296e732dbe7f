"""#49: a team's change history shows, beside its jobs' and limits' changes, CloudTrail's records of changes to the
secrets its jobs name and to the targets' role (through EventBridge), so "check for recent secret or IAM changes" is
one look: a record delivered twice shows once, a failed call never, another team's secret never. The rule's pattern
is the one deployed, matched here by EventBridge as moto implements it (CloudTrail itself does not run offline)."""

from __future__ import annotations

import json
from typing import Any

import boto3

from infra.local.console import _links
from jobsched.console import views
from jobsched.core.changes import resource_change_pattern
from jobsched.core.runs import parse_instant
from jobsched.watch.resource_changes import record_resource_change
from tests.aws.harness import REGION, Clock, Stack

ACCOUNT = "123456789012"
TARGETS_ROLE = f"arn:aws:iam::{ACCOUNT}:role/jobsched-dev-targets"


def cloudtrail(source: str, name: str, parameters: dict[str, Any], event_id: str, **detail: Any) -> dict[str, Any]:
    """An "AWS API Call via CloudTrail" event as EventBridge delivers it (the documented shape, trimmed)."""
    service = source.removeprefix("aws.")
    return {
        "version": "0",
        "id": f"eb-{event_id}",
        "detail-type": "AWS API Call via CloudTrail",
        "source": source,
        "account": ACCOUNT,
        "time": "2027-01-04T09:30:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "eventVersion": "1.09",
            "userIdentity": {"type": "AssumedRole", "arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/admin/alice"},
            "eventTime": "2027-01-04T09:30:00Z",
            "eventSource": f"{service}.amazonaws.com",
            "eventName": name,
            "requestParameters": parameters,
            "responseElements": detail.pop("response", None),
            "eventID": event_id,
            **detail,
        },
    }


ROTATED = cloudtrail(
    "aws.secretsmanager",
    "PutSecretValue",
    {"secretId": f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:ops/token-AbC123", "clientRequestToken": "t"},
    "e-1",
    response={"arn": f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:ops/token-AbC123", "versionId": "v-2"},
)
DETACHED = cloudtrail(
    "aws.iam",
    "DetachRolePolicy",
    {"roleName": "jobsched-dev-targets", "policyArn": f"arn:aws:iam::{ACCOUNT}:policy/ops-targets"},
    "e-2",
)
REFUSED = cloudtrail("aws.secretsmanager", "PutSecretValue", {"secretId": "ops/token"}, "e-3", errorCode="AccessDenied")
FOREIGN = cloudtrail("aws.secretsmanager", "PutSecretValue", {"secretId": "payments/key"}, "e-4")
READ = cloudtrail("aws.secretsmanager", "GetSecretValue", {"secretId": "ops/token"}, "e-5")


def job(team: str, name: str, secret: str) -> dict[str, Any]:
    target = {"type": "http", "url": "https://hooks.example.com/x", "secret_headers": {"X-Token": secret}}
    return {"name": name, "team": team, "schedule": {"expression": "0 * * * *"}, "target": target}


def test_secret_and_role_changes_show_on_the_team_that_depends_on_them(stack: Stack, clock: Clock) -> None:
    clock.set("2027-01-04T10:00:00Z")
    stack.register(job("ops", "report", "secretsmanager:ops/token"))
    stack.register(job("payments", "invoices", "secretsmanager:payments/key"))
    for event in (ROTATED, ROTATED, DETACHED, REFUSED, FOREIGN, READ):  # EventBridge delivers at least once
        record_resource_change(event, stack.jobs)

    shown = views.team_changes(stack.jobs, "ops", now=clock(), links=_links, roles=[TARGETS_ROLE]).body
    assert shown.count("PutSecretValue") == 1 and "secret ops/token" in shown and "versionId: v-2" in shown
    assert "DetachRolePolicy" in shown and "role jobsched-dev-targets" in shown and "policy/ops-targets" in shown
    assert "assumed-role/admin/alice" in shown
    assert "payments/key" not in shown and "GetSecretValue" not in shown
    assert "3 change(s) in the last 14 days" in shown  # the job's creation, the new secret version, the role
    other = views.team_changes(stack.jobs, "payments", now=clock(), links=_links).body
    assert "secret payments/key" in other and "ops/token" not in other and "DetachRolePolicy" not in other
    later = views.team_changes(stack.jobs, "ops", now=parse_instant("2027-01-20T10:00:00Z"), links=_links).body
    assert "PutSecretValue" not in later  # kept briefly: 14 days shown


def test_the_deployed_rule_sends_the_changes_and_only_those(stack: Stack) -> None:
    events, sqs = boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName="changes")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    pattern = resource_change_pattern()
    pattern["detail-type"] = pattern.pop("detail_type")  # CDK's field name, EventBridge's key
    events.put_rule(Name="resource-changes", EventPattern=json.dumps(pattern))
    events.put_targets(Rule="resource-changes", Targets=[{"Id": "q", "Arn": arn}])
    for event in (ROTATED, DETACHED, REFUSED, READ):
        entry = {"Source": event["source"], "DetailType": event["detail-type"], "Detail": json.dumps(event["detail"])}
        assert events.put_events(Entries=[entry])["FailedEntryCount"] == 0
    delivered = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    names = sorted(json.loads(message["Body"])["detail"]["eventName"] for message in delivered)
    assert names == ["DetachRolePolicy", "PutSecretValue"]
