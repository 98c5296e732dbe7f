"""One SDK call as the IAM requests AWS authorizes for it: the action, the resource ARN, and the request context a real
call carries (``ecs:cluster``, ``s3:ResourceAccount``...). Resource tags are not known here: the evaluation adds
them from the resource (``aws:ResourceTag/...``).

An operation not in the table is kept as ``unmapped`` (its action by the SDK's name, resource ``*``): the evaluation
counts it as unexplained, so a new call cannot pass unseen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

ACCOUNT = "123456789012"  # the account the local runtime and the tests deploy into

# botocore's service name -> IAM's service prefix, where they differ.
PREFIX = {"stepfunctions": "states"}
# SDK operation -> IAM action, where they differ.
ACTIONS = {
    ("lambda", "Invoke"): "lambda:InvokeFunction",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "GetBucketNotificationConfiguration"): "s3:GetBucketNotification",
    ("logs", "FilterLogEvents"): "logs:FilterLogEvents",
    ("dynamodb", "TransactWriteItems"): "dynamodb:PutItem",  # each item's own action, below
    # The batch forms are authorized as the single action.
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
}


@dataclass(frozen=True)
class IamRequest:
    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()
    unmapped: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "resource": self.resource, "context": self.context, "unmapped": self.unmapped}

    @staticmethod
    def from_json(data: dict[str, Any]) -> IamRequest:
        context = tuple((str(k), str(v)) for k, v in data["context"])
        return IamRequest(data["action"], data["resource"], context, bool(data["unmapped"]))


def arn(service: str, region: str, resource: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:{service}:{region}:{account}:{resource}"


def queue_arn(url: str, region: str) -> str:
    path = urlparse(url).path.strip("/").split("/")
    return arn("sqs", region, path[-1], path[-2] if len(path) > 1 and path[-2].isdigit() else ACCOUNT)


def named(service: str, kind: str, value: str, region: str, sep: str = "/") -> str:
    """An ARN from a name or an ARN (many APIs take either)."""
    return value if value.startswith("arn:") else arn(service, region, f"{kind}{sep}{value}")


Builder = Callable[[dict[str, Any], str], list[tuple[str, dict[str, str]]]]  # -> [(resource, context)]


def _request_tags(tags: list[dict[str, str]], key: str = "Key", value: str = "Value") -> dict[str, str]:
    """The tags a request sets, as IAM sees them (``aws:TagKeys`` is a list: kept comma-joined here)."""
    found = {f"aws:RequestTag/{t[key]}": t[value] for t in tags}
    return found | ({"aws:TagKeys": ",".join(t[key] for t in tags)} if tags else {})


def _one(resource: str, **context: str) -> list[tuple[str, dict[str, str]]]:
    return [(resource, context)]


def _table(p: dict[str, Any], region: str) -> list[tuple[str, dict[str, str]]]:
    table = named("dynamodb", "table", p["TableName"], region)
    return _one(f"{table}/index/{p['IndexName']}" if p.get("IndexName") else table)


def _log_group(p: dict[str, Any], region: str) -> list[tuple[str, dict[str, str]]]:
    group = p.get("logGroupName") or p.get("logGroupIdentifier") or ""
    found = group if group.startswith("arn:") else arn("logs", region, f"log-group:{group}")
    # GetLogEvents is authorized on the stream (``log-group:G:log-stream:S``).
    return _one(f"{found}:log-stream:{p['logStreamName']}" if p.get("logStreamName") else found)


def _ecs_task(p: dict[str, Any], region: str) -> list[tuple[str, dict[str, str]]]:
    cluster = named("ecs", "cluster", p.get("cluster", "default"), region)
    tasks = p.get("tasks") or ([p["task"]] if "task" in p else [])
    short = cluster.rsplit("/", 1)[-1]
    return [
        (t if t.startswith("arn:") else arn("ecs", region, f"task/{short}/{t}"), {"ecs:cluster": cluster})
        for t in tasks
    ]


def _rule(p: dict[str, Any], name: str, region: str) -> list[tuple[str, dict[str, str]]]:
    bus = p.get("EventBusName") or "default"
    return _one(arn("events", region, f"rule/{name}" if bus == "default" else f"rule/{bus}/{name}"))


BUILDERS: dict[tuple[str, str], Builder] = {
    **{
        ("dynamodb", op): _table
        for op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "DescribeTable")
    },
    **{
        ("sqs", op): lambda p, r: _one(queue_arn(p["QueueUrl"], r))
        for op in (
            "SendMessage",
            "SendMessageBatch",
            "ReceiveMessage",
            "DeleteMessage",
            "DeleteMessageBatch",
            "ChangeMessageVisibility",
            "ChangeMessageVisibilityBatch",
            "GetQueueAttributes",
            "ListQueueTags",
        )
    },
    ("sqs", "GetQueueUrl"): lambda p, r: _one(arn("sqs", r, p["QueueName"])),
    ("lambda", "Invoke"): lambda p, r: _one(named("lambda", "function", p["FunctionName"], r, ":")),
    ("lambda", "ListTags"): lambda p, r: _one(p["Resource"]),
    ("lambda", "GetFunction"): lambda p, r: _one(named("lambda", "function", p["FunctionName"], r, ":")),
    ("sns", "Publish"): lambda p, r: _one(p.get("TopicArn") or p["TargetArn"]),
    ("sns", "ListTagsForResource"): lambda p, r: _one(p["ResourceArn"]),
    ("stepfunctions", "StartExecution"): lambda p, r: _one(p["stateMachineArn"]),
    ("stepfunctions", "DescribeExecution"): lambda p, r: _one(p["executionArn"]),
    ("stepfunctions", "StopExecution"): lambda p, r: _one(p["executionArn"]),
    ("stepfunctions", "GetExecutionHistory"): lambda p, r: _one(p["executionArn"]),
    ("stepfunctions", "ListExecutions"): lambda p, r: _one(p["stateMachineArn"]),
    ("stepfunctions", "DescribeStateMachine"): lambda p, r: _one(p["stateMachineArn"]),
    ("stepfunctions", "CreateStateMachine"): lambda p, r: _one(
        arn("states", r, f"stateMachine:{p['name']}"), **_request_tags(p.get("tags", []), "key", "value")
    ),
    ("stepfunctions", "UpdateStateMachine"): lambda p, r: _one(p["stateMachineArn"]),
    ("stepfunctions", "DeleteStateMachine"): lambda p, r: _one(p["stateMachineArn"]),
    ("stepfunctions", "ListTagsForResource"): lambda p, r: _one(p["resourceArn"]),
    ("stepfunctions", "TagResource"): lambda p, r: _one(
        p["resourceArn"], **_request_tags(p.get("tags", []), "key", "value")
    ),
    **{
        ("stepfunctions", op): lambda p, r: _one("*")
        for op in ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat")
    },
    ("events", "PutEvents"): lambda p, r: [
        (named("events", "event-bus", e.get("EventBusName") or "default", r), {"events:source": e.get("Source", "")})
        for e in p["Entries"]
    ],
    **{("events", op): lambda p, r: _rule(p, p["Name"], r) for op in ("PutRule", "DeleteRule", "DescribeRule")},
    **{
        ("events", op): lambda p, r: _rule(p, p["Rule"], r)
        for op in ("PutTargets", "RemoveTargets", "ListTargetsByRule")
    },
    ("events", "ListRules"): lambda p, r: _one(arn("events", r, "rule/*")),
    ("events", "ListTagsForResource"): lambda p, r: _one(p["ResourceARN"]),
    ("events", "DescribeEventBus"): lambda p, r: _one(named("events", "event-bus", p.get("Name") or "default", r)),
    ("s3", "GetObject"): lambda p, r: _one(f"arn:aws:s3:::{p['Bucket']}/{p['Key']}", **{"s3:ResourceAccount": ACCOUNT}),
    ("s3", "HeadObject"): lambda p, r: _one(
        f"arn:aws:s3:::{p['Bucket']}/{p['Key']}", **{"s3:ResourceAccount": ACCOUNT}
    ),
    ("s3", "GetBucketTagging"): lambda p, r: _one(f"arn:aws:s3:::{p['Bucket']}", **{"s3:ResourceAccount": ACCOUNT}),
    ("s3", "GetBucketNotificationConfiguration"): lambda p, r: _one(
        f"arn:aws:s3:::{p['Bucket']}", **{"s3:ResourceAccount": ACCOUNT}
    ),
    ("s3", "ListObjectsV2"): lambda p, r: _one(f"arn:aws:s3:::{p['Bucket']}", **{"s3:ResourceAccount": ACCOUNT}),
    ("secretsmanager", "GetSecretValue"): lambda p, r: _one(named("secretsmanager", "secret", p["SecretId"], r, ":")),
    ("secretsmanager", "DescribeSecret"): lambda p, r: _one(named("secretsmanager", "secret", p["SecretId"], r, ":")),
    ("ssm", "GetParameter"): lambda p, r: _one(named("ssm", "parameter", p["Name"].lstrip("/"), r)),
    ("ssm", "ListTagsForResource"): lambda p, r: _one(named("ssm", "parameter", p["ResourceId"].lstrip("/"), r)),
    ("sts", "AssumeRole"): lambda p, r: _one(
        p["RoleArn"], **({"sts:tags": json.dumps([[t["Key"], t["Value"]] for t in p["Tags"]])} if p.get("Tags") else {})
    ),
    ("sts", "GetCallerIdentity"): lambda p, r: _one("*"),
    ("cloudwatch", "PutMetricData"): lambda p, r: _one("*", **{"cloudwatch:namespace": p["Namespace"]}),
    ("logs", "GetLogEvents"): _log_group,
    ("logs", "FilterLogEvents"): _log_group,
    ("logs", "StartQuery"): lambda p, r: [
        (g if g.startswith("arn:") else arn("logs", r, f"log-group:{g}"), {})
        for g in p.get("logGroupNames") or p.get("logGroupIdentifiers") or []
    ],
    ("logs", "GetQueryResults"): lambda p, r: _one("*"),
    ("logs", "ListTagsForResource"): lambda p, r: _one(p["resourceArn"]),
    ("ecs", "RunTask"): lambda p, r: [
        (
            named("ecs", "task-definition", p["taskDefinition"], r),
            {"ecs:cluster": named("ecs", "cluster", p.get("cluster", "default"), r)},
        )
    ],
    ("ecs", "ListTasks"): lambda p, r: _one(
        "*", **{"ecs:cluster": named("ecs", "cluster", p.get("cluster", "default"), r)}
    ),
    ("ecs", "DescribeTasks"): _ecs_task,
    ("ecs", "StopTask"): _ecs_task,
    ("ecs", "DescribeClusters"): lambda p, r: [(named("ecs", "cluster", c, r), {}) for c in p.get("clusters", [])],
    ("ecs", "DescribeTaskDefinition"): lambda p, r: _one("*"),
    ("ecs", "DescribeCapacityProviders"): lambda p, r: _one("*"),
    ("ecs", "ListTagsForResource"): lambda p, r: _one(p["resourceArn"]),
    ("ec2", "DescribeSubnets"): lambda p, r: _one("*"),
    ("ec2", "DescribeSecurityGroups"): lambda p, r: _one("*"),
    ("batch", "SubmitJob"): lambda p, r: [
        (named("batch", "job-queue", p["jobQueue"], r), {}),
        (named("batch", "job-definition", p["jobDefinition"], r), {}),
    ],
    ("batch", "TerminateJob"): lambda p, r: _one(named("batch", "job", p["jobId"], r)),
    ("batch", "DescribeJobs"): lambda p, r: _one("*"),
    ("batch", "ListJobs"): lambda p, r: _one("*"),
    ("batch", "DescribeJobQueues"): lambda p, r: _one("*"),
    ("batch", "DescribeJobDefinitions"): lambda p, r: _one("*"),
    ("eks", "DescribeCluster"): lambda p, r: _one(named("eks", "cluster", p["name"], r)),
    ("iam", "ListRoleTags"): lambda p, r: _one(f"arn:aws:iam::{ACCOUNT}:role/{p['RoleName']}"),
}


def _batch_tables(items: dict[str, Any], region: str) -> list[tuple[str, dict[str, str]]]:
    return [(named("dynamodb", "table", name, region), {}) for name in items]


def _transact(p: dict[str, Any], region: str) -> list[IamRequest]:
    actions = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
    found = []
    for item in p["TransactItems"]:
        for kind, body in item.items():
            if kind in actions:
                found.append(
                    IamRequest(f"dynamodb:{actions[kind]}", named("dynamodb", "table", body["TableName"], region))
                )
    return found


def iam_requests(service: str, operation: str, params: dict[str, Any], *, region: str) -> list[IamRequest]:
    prefix = PREFIX.get(service, service)
    action = ACTIONS.get((service, operation), f"{prefix}:{operation}")
    if (service, operation) == ("dynamodb", "TransactWriteItems"):
        return _transact(params, region)
    if (service, operation) in (("dynamodb", "BatchWriteItem"), ("dynamodb", "BatchGetItem")):
        return [IamRequest(action, resource) for resource, _ in _batch_tables(params["RequestItems"], region)]
    builder = BUILDERS.get((service, operation))
    if builder is None:
        keys = ",".join(sorted(params))
        return [IamRequest(action, "*", (("sdk:params", keys),), unmapped=True)]
    try:
        built = builder(params, region)
    except (KeyError, IndexError, TypeError) as missing:
        return [
            IamRequest(action, "*", (("sdk:params", json.dumps(sorted(params))), ("sdk:error", repr(missing))), True)
        ]
    asked = [IamRequest(action, resource, tuple(sorted(context.items()))) for resource, context in built]
    return asked + _tagging(service, operation, params, region) + _passed_roles(service, operation, params)


def _tagging(service: str, operation: str, params: dict[str, Any], region: str) -> list[IamRequest]:
    """Starting work with tags is also a TagResource on the new work, authorized with the request's tags."""
    if (service, operation) == ("ecs", "RunTask") and params.get("tags"):
        cluster = named("ecs", "cluster", params.get("cluster", "default"), region).rsplit("/", 1)[-1]
        context = _request_tags(params["tags"], "key", "value") | {"ecs:CreateAction": "RunTask"}
        return [
            IamRequest("ecs:TagResource", arn("ecs", region, f"task/{cluster}/new"), tuple(sorted(context.items())))
        ]
    if (service, operation) == ("batch", "SubmitJob") and params.get("tags"):
        tags = [{"Key": k, "Value": v} for k, v in params["tags"].items()]
        context = _request_tags(tags)
        return [IamRequest("batch:TagResource", arn("batch", region, "job/new"), tuple(sorted(context.items())))]
    return []


ECS_TASKS = "ecs-tasks.amazonaws.com"


def passed_role(role_arn: str, service: str) -> IamRequest:
    return IamRequest("iam:PassRole", role_arn, (("iam:PassedToService", service),))


def _passed_roles(service: str, operation: str, params: dict[str, Any]) -> list[IamRequest]:
    """A call that hands a role to a service is also an iam:PassRole of it (a task definition's own roles are added
    by the recorder, which saw the definition)."""
    if (service, operation) in (("stepfunctions", "CreateStateMachine"), ("stepfunctions", "UpdateStateMachine")):
        return [passed_role(params["roleArn"], "states.amazonaws.com")] if params.get("roleArn") else []
    if (service, operation) == ("ecs", "RunTask"):
        overrides = params.get("overrides") or {}
        roles = [overrides.get(key) for key in ("taskRoleArn", "executionRoleArn")]
        return [passed_role(role, ECS_TASKS) for role in roles if role]
    return []
