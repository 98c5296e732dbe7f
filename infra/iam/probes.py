"""The walls between teams, probed: the same request another team's session would make, expected denied by IAM
alone (not only by the adapters' own checks).

- From the recording: every call a team's session made on a resource tagged for that team, made again by another
  team's session.
- By kind: one probe for each kind of resource a team names, team ``alpha``'s session on team ``beta``'s resource,
  so that a kind no recorded suite reached is probed too.

Where IAM cannot say the wall, ``ADAPTER_WALLS`` says why, and the adapters' checks (tests/aws/test_tenancy.py and
the target suites) hold it alone.
"""

from __future__ import annotations

import json
from dataclasses import replace

from infra.iam.evaluate import Asked
from infra.iam.requests import ACCOUNT, IamRequest, queue_arn
from infra.iam.template import Policies

OWNER = "jobsched-team"
REGION = "us-east-1"
INTRUDER = "intruder"

# Actions whose wall between teams IAM cannot express, with the reason; the adapters check ownership before each.
ADAPTER_WALLS = {
    "s3:GetObject": "S3 has no bucket-tag condition for object reads (s3:ResourceTag is for objects' own tags, which "
    "teams do not set); the adapter reads the bucket's tags (GetBucketTagging) before every read and refuses "
    "another team's bucket; s3:ResourceAccount keeps reads in the deployment's account",
    "s3:GetBucketTagging": "reading a bucket's tags is how ownership is decided; tags are not secrets",
    "s3:GetBucketNotification": "whether a bucket sends its events to EventBridge (a PUT's warning); it names no "
    "data, and only the bucket's owner may change it",
    "lambda:ListTags": "reading tags is how ownership is decided; tags are not secrets",
    "sqs:ListQueueTags": "reading tags is how ownership is decided; tags are not secrets",
    "states:ListTagsForResource": "reading tags is how ownership is decided; tags are not secrets",
    "events:ListTagsForResource": "reading tags is how ownership is decided; tags are not secrets",
    "sns:ListTagsForResource": "reading tags is how ownership is decided; tags are not secrets",
    "ssm:ListTagsForResource": "reading tags is how ownership is decided; tags are not secrets",
    "logs:ListTagsForResource": "reading tags is how ownership is decided; tags are not secrets",
    "ecs:ListTagsForResource": "reading tags is how ownership is decided; tags are not secrets",
    "secretsmanager:DescribeSecret": "reading a secret's tags (never its value) is how ownership is decided",
    "ecs:DescribeClusters": "reading a cluster's tags is how ownership is decided; it reveals no task",
    "ecs:DescribeTaskDefinition": "reading a definition's tags and roles is how ownership is decided",
    "ecs:DescribeCapacityProviders": "reading tags is how ownership is decided",
    "ec2:DescribeSubnets": "EC2 Describe actions take no resource-level conditions; tags decide ownership",
    "ec2:DescribeSecurityGroups": "EC2 Describe actions take no resource-level conditions; tags decide ownership",
    "batch:DescribeJobQueues": "Batch Describe actions take no resource-level conditions; tags decide ownership",
    "batch:DescribeJobDefinitions": "Batch Describe actions take no resource-level conditions",
    "batch:DescribeJobs": "Batch Describe actions take no resource-level conditions; a job's tags decide",
    "batch:ListJobs": "Batch List actions take no resource-level conditions",
    "ecs:ListTasks": "ListTasks authorizes on the cluster ARN only (ecs:cluster), never its tags; it lists ARNs",
    "sts:GetCallerIdentity": "needs no permission in AWS",
    "states:DescribeExecution": "the kubernetes machine's executions are read as the deployment (one machine, named)",
}


def _team(tags: tuple[tuple[str, str], ...]) -> str | None:
    return dict(tags).get(OWNER)


def cross_team_probes(asked: list[Asked]) -> list[Asked]:
    """Each team session's request on its own team's resource, made by another team's session instead."""
    probes: set[Asked] = set()
    for one in asked:
        team = _team(one.session_tags)
        if not team or not one.expect_allowed or one.request.action.startswith("sts:"):
            continue
        if dict(one.resource_tags).get("jobsched-shared") == "true":
            continue  # shared with every team by design
        owner = _team(one.resource_tags)
        if owner is not None and owner != team:
            continue
        intruder = tuple(sorted({**dict(one.session_tags), OWNER: INTRUDER}.items()))
        probes.add(
            replace(
                one, session_tags=intruder, expect_allowed=False, why=f"team {INTRUDER} on team {team}'s: {one.why}"
            )
        )
    return sorted(probes, key=lambda a: (a.request.action, a.request.resource))


def resource_kind_probes(found: Policies, physical: dict[str, str]) -> list[Asked]:
    """Team alpha's session on team beta's resource, for every kind of resource a team names."""
    target_role = next((arn for arn in found.roles if arn.endswith("-targets")), "")
    if not target_role:
        return []

    def arn(service: str, resource: str) -> str:
        return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"

    beta = ((OWNER, "beta"),)
    kinds = [
        ("lambda:InvokeFunction", arn("lambda", "function:beta-fn"), {}),
        ("sqs:SendMessage", arn("sqs", "beta-queue"), {}),
        ("states:StartExecution", arn("states", "stateMachine:beta-machine"), {}),
        ("events:PutEvents", arn("events", "event-bus/beta-bus"), {}),
        ("s3:GetObject", "arn:aws:s3:::beta-bucket/data.csv", {"s3:ResourceAccount": ACCOUNT}),
        ("secretsmanager:GetSecretValue", arn("secretsmanager", "secret:beta-secret-AbCdEf"), {}),
        ("ssm:GetParameter", arn("ssm", "parameter/beta/param"), {}),
        ("sns:Publish", arn("sns", "beta-topic"), {}),
        ("logs:GetLogEvents", arn("logs", "log-group:/beta/app:log-stream:x"), {}),
        ("ecs:RunTask", arn("ecs", "task-definition/beta-task:1"), {"ecs:cluster": arn("ecs", "cluster/beta")}),
        ("ecs:StopTask", arn("ecs", "task/beta/0123456789abcdef"), {"ecs:cluster": arn("ecs", "cluster/beta")}),
        ("ecs:DescribeTasks", arn("ecs", "task/beta/0123456789abcdef"), {"ecs:cluster": arn("ecs", "cluster/beta")}),
        ("batch:SubmitJob", arn("batch", "job-queue/beta-queue"), {}),
        ("batch:SubmitJob", arn("batch", "job-definition/beta-job:1"), {}),
        ("batch:TerminateJob", arn("batch", "job/0123-beta"), {}),
        ("eks:DescribeCluster", arn("eks", "cluster/beta-eks"), {}),
        (
            "iam:PassRole",
            f"arn:aws:iam::{ACCOUNT}:role/beta-task-role",
            {"iam:PassedToService": "ecs-tasks.amazonaws.com"},
        ),
    ]
    alpha = ((OWNER, "alpha"),)
    return _broad_role_probes(physical, set(found.encrypted_by.values())) + [
        Asked(
            target_role,
            alpha,
            IamRequest(action, resource, tuple(sorted(context.items()))),
            beta,
            expect_allowed=False,
            why=f"team alpha's session on team beta's {action.split(':')[0]} resource",
        )
        for action, resource, context in kinds
    ]


def _broad_role_probes(physical: dict[str, str], keys: set[str]) -> list[Asked]:
    """A team's own role with `sqs:*`, `events:*` and `kms:*` on `*` in the account: it must not put an intake
    envelope or a Run Finished event, nor decrypt with the stack key itself, which only the resources' own policies
    (a Deny) can stop."""
    broad = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "Broad", "Effect": "Allow", "Action": ["sqs:*", "events:*", "kms:*"], "Resource": "*"}
            ],
        }
    )
    role = f"arn:aws:iam::{ACCOUNT}:role/team-alpha-admin"
    probes = []
    for name in physical.values():
        if name.startswith("https://") and name.endswith(("-Events", "-SystemEvents")):  # the intake queues
            request = IamRequest("sqs:SendMessage", queue_arn(name, REGION))
        elif name.startswith("jobsched-") and name.endswith("-runs"):  # the runs bus
            request = IamRequest("events:PutEvents", f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{name}")
        else:
            continue
        probes.append(
            Asked(role, (), request, expect_allowed=False, why="a team's broad role forges an input", identity=broad)
        )
    for key in sorted(keys):
        for action in ("kms:Decrypt", "kms:GenerateDataKey"):
            probes.append(
                Asked(
                    role,
                    (),
                    IamRequest(action, key),
                    expect_allowed=False,
                    why="a team's broad role uses the stack key itself",
                    identity=broad,
                )
            )
    return probes
