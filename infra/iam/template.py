"""The policies a deployed template holds, with every CloudFormation function resolved to what it names in that
deployment: each role's identity policies and trust policy, and the resource policies of queues, topics, secrets,
keys, buses, buckets and functions.

Resolved against the physical ids of the deployment the calls were recorded in (the local runtime's stack in moto),
so the ARNs in the policies are the ARNs the calls named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from infra.iam.requests import queue_arn

PARTITION = "aws"

# AWS managed policies the template attaches, as AWS publishes them (the ones the stack uses, nothing more).
AWS_MANAGED = {
    "service-role/AWSLambdaBasicExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": "*",
            }
        ],
    },
    "service-role/AmazonAPIGatewayPushToCloudWatchLogs": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:DescribeLogGroups",
                    "logs:DescribeLogStreams",
                    "logs:PutLogEvents",
                    "logs:GetLogEvents",
                    "logs:FilterLogEvents",
                ],
                "Resource": "*",
            }
        ],
    },
}


class Resolver:
    def __init__(self, template: dict[str, Any], physical: dict[str, str], *, account: str, region: str) -> None:
        self.resources: dict[str, Any] = template["Resources"]
        self.parameters: dict[str, Any] = template.get("Parameters", {})
        self.physical, self.account, self.region = physical, account, region

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            [(key, argument)] = value.items()
            if key == "Ref":
                return self.ref(argument)
            if key == "Fn::GetAtt":
                logical, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return self.attribute(logical, attribute)
            if key == "Fn::Join":
                return str(self(argument[0])).join(str(self(part)) for part in self(argument[1]))
            if key == "Fn::Sub":
                return self.sub(argument)
            if key == "Fn::Select":
                return self(argument[1])[int(self(argument[0]))]
            if key == "Fn::Split":
                return str(self(argument[1])).split(self(argument[0]))
        return {k: self(v) for k, v in value.items()}

    def sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else (argument[0], argument[1])

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(self(variables[name]))
            if "." in name:
                logical, attribute = name.split(".", 1)
                return str(self.attribute(logical, attribute))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}!]+)\}", replace, text)

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "jobsched",
            "AWS::NoValue": None,
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name].get("Default", "")
        kind = self.resources.get(name, {}).get("Type", "")
        if kind == "AWS::SecretsManager::Secret":
            return self.secret_arn(name)
        return self.physical.get(name, f"unresolved:{name}")

    def secret_arn(self, logical: str) -> str:
        """A secret's ARN ends in six characters AWS picks: any six, here (policies name it by reference)."""
        secret_name = self.resources[logical]["Properties"]["Name"]
        return f"arn:{PARTITION}:secretsmanager:{self.region}:{self.account}:secret:{secret_name}-??????"

    def attribute(self, logical: str, attribute: str) -> Any:
        kind = self.resources.get(logical, {}).get("Type", "")
        physical = self.physical.get(logical, "")
        region, account = self.region, self.account
        if kind == "AWS::SQS::Queue":
            arn = queue_arn(physical, region)
            return {"Arn": arn, "QueueName": arn.rsplit(":", 1)[-1], "QueueUrl": physical}[attribute]
        arns = {
            "AWS::IAM::Role": f"arn:{PARTITION}:iam::{account}:role/{physical}",
            "AWS::DynamoDB::Table": f"arn:{PARTITION}:dynamodb:{region}:{account}:table/{physical}",
            "AWS::DynamoDB::GlobalTable": f"arn:{PARTITION}:dynamodb:{region}:{account}:table/{physical}",
            "AWS::Lambda::Function": f"arn:{PARTITION}:lambda:{region}:{account}:function:{physical}",
            "AWS::KMS::Key": f"arn:{PARTITION}:kms:{region}:{account}:key/{physical}",
            "AWS::StepFunctions::StateMachine": physical,
            "AWS::SNS::Topic": physical,
            "AWS::Events::EventBus": f"arn:{PARTITION}:events:{region}:{account}:event-bus/{physical}",
            "AWS::Events::Rule": f"arn:{PARTITION}:events:{region}:{account}:rule/{physical}",
            "AWS::Logs::LogGroup": f"arn:{PARTITION}:logs:{region}:{account}:log-group:{physical}:*",
            "AWS::S3::Bucket": f"arn:{PARTITION}:s3:::{physical}",
            "AWS::SecretsManager::Secret": self.secret_arn(logical) if kind == "AWS::SecretsManager::Secret" else "",
        }
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        if kind == "AWS::SNS::Topic" and attribute == "TopicName":
            return physical.rsplit(":", 1)[-1]
        if kind == "AWS::StepFunctions::StateMachine" and attribute == "Name":
            return physical.rsplit(":", 1)[-1]
        if kind == "AWS::Events::EventBus" and attribute == "Name":
            return physical
        return f"unresolved:{logical}.{attribute}"


@dataclass
class Role:
    logical: str
    arn: str
    identity: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (policy name, document)
    trust: dict[str, Any] = field(default_factory=dict)


@dataclass
class Policies:
    roles: dict[str, Role]  # by role ARN
    resource: dict[str, list[dict[str, Any]]]  # resource ARN -> resource policy statements
    encrypted_by: dict[str, str]  # queue or topic ARN -> its KMS key ARN
    tags: dict[str, dict[str, str]]  # resource ARN -> its tags, as the template gives them

    def role(self, arn: str) -> Role | None:
        return self.roles.get(arn)


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    found = document.get("Statement", [])
    return found if isinstance(found, list) else [found]


def _named(document: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The document with a Sid on every statement (the evaluation names the statement that decided)."""
    statements = []
    for index, statement in enumerate(_statements(document)):
        statements.append({"Sid": statement.get("Sid") or f"{prefix}{index}", **statement})
    return {"Version": "2012-10-17", "Statement": statements}


class _Collector:
    """Reads the template's resources into ``Policies``, one kind of resource a method."""

    def __init__(self, template: dict[str, Any], physical: dict[str, str], *, account: str, region: str) -> None:
        self.resolve = Resolver(template, physical, account=account, region=region)
        self.resources: dict[str, Any] = template["Resources"]
        self.account, self.region = account, region
        self.found = Policies({}, {}, {}, {})
        self.by_logical: dict[str, Role] = {}

    def collect(self) -> Policies:
        for logical, resource in self.resources.items():
            if resource["Type"] == "AWS::IAM::Role":
                self.role(logical, resource["Properties"])
        readers = {
            "AWS::IAM::Policy": self.identity_policy,
            "AWS::IAM::ManagedPolicy": self.identity_policy,
            "AWS::SQS::QueuePolicy": self.queue_policy,
            "AWS::SNS::TopicPolicy": self.topic_policy,
            "AWS::SecretsManager::ResourcePolicy": self.secret_policy,
            "AWS::KMS::Key": self.key_policy,
            "AWS::Events::EventBusPolicy": self.bus_policy,
            "AWS::S3::BucketPolicy": self.bucket_policy,
            "AWS::SQS::Queue": self.encrypted,
            "AWS::SNS::Topic": self.encrypted,
        }
        for logical, resource in self.resources.items():
            reader = readers.get(resource["Type"])
            if reader is not None:
                reader(logical, resource.get("Properties", {}))
        return self.found

    def _add(self, arn: str, document: dict[str, Any]) -> None:
        self.found.resource.setdefault(arn, []).extend(_statements(document))

    def role(self, logical: str, raw: dict[str, Any]) -> None:
        props = self.resolve(raw)
        role = Role(
            logical, self.resolve.attribute(logical, "Arn"), trust=_named(props["AssumeRolePolicyDocument"], "T")
        )
        for arn in props.get("ManagedPolicyArns", []):
            name = str(arn).split(":policy/", 1)[-1]
            role.identity.append((f"aws-managed/{name}", _named(AWS_MANAGED.get(name, {"Statement": []}), "M")))
        for inline in props.get("Policies", []):
            role.identity.append((f"{logical}/{inline['PolicyName']}", _named(inline["PolicyDocument"], "I")))
        self.found.roles[role.arn], self.by_logical[logical] = role, role

    def identity_policy(self, logical: str, raw: dict[str, Any]) -> None:
        props = self.resolve(raw)
        name = props.get("PolicyName") or props.get("ManagedPolicyName") or logical
        for reference in raw.get("Roles", []):
            role = self.by_logical.get(reference.get("Ref", "")) if isinstance(reference, dict) else None
            if role is not None:
                role.identity.append((name, _named(props["PolicyDocument"], f"{logical}.")))

    def queue_policy(self, logical: str, raw: dict[str, Any]) -> None:
        props = self.resolve(raw)
        for url in props["Queues"]:
            self._add(queue_arn(url, self.region), props["PolicyDocument"])

    def topic_policy(self, logical: str, raw: dict[str, Any]) -> None:
        props = self.resolve(raw)
        for topic in props["Topics"]:
            self._add(topic, props["PolicyDocument"])

    def secret_policy(self, logical: str, raw: dict[str, Any]) -> None:
        props = self.resolve(raw)
        self._add(props["SecretId"], props["ResourcePolicy"])

    def key_policy(self, logical: str, raw: dict[str, Any]) -> None:
        self._add(self.resolve.attribute(logical, "Arn"), self.resolve(raw["KeyPolicy"]))

    def bus_policy(self, logical: str, raw: dict[str, Any]) -> None:
        props = self.resolve(raw)
        bus = f"arn:{PARTITION}:events:{self.region}:{self.account}:event-bus/{props.get('EventBusName', 'default')}"
        self._add(bus, {"Statement": props.get("Statement") or props["Policy"]["Statement"]})

    def bucket_policy(self, logical: str, raw: dict[str, Any]) -> None:
        props = self.resolve(raw)
        self._add(f"arn:{PARTITION}:s3:::{props['Bucket']}", props["PolicyDocument"])

    def encrypted(self, logical: str, raw: dict[str, Any]) -> None:
        arn = self.resolve.attribute(logical, "Arn")
        key = raw.get("KmsMasterKeyId")
        if isinstance(key, dict) and "Fn::GetAtt" in key:
            self.found.encrypted_by[arn] = self.resolve(key)
        if "Tags" in raw:
            found = self.resolve(raw["Tags"])
            self.found.tags[arn] = {t["Key"]: t["Value"] for t in found} if isinstance(found, list) else dict(found)


def policies(template: dict[str, Any], physical: dict[str, str], *, account: str, region: str) -> Policies:
    return _Collector(template, physical, account=account, region=region).collect()


def document(statements: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    return _named({"Statement": statements}, prefix)


# What CloudFormation's Ref gives for a named resource of each type: the name property (queues: their URL; topics
# and state machines: their ARN, built from the name).
NAME_PROPERTY = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::DynamoDB::GlobalTable": "TableName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::Events::EventBus": "Name",
    "AWS::Events::Rule": "Name",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SSM::Parameter": "Name",
}


def physical_from_names(template: dict[str, Any], *, account: str, region: str) -> dict[str, str]:
    """Physical ids of a synthesized template not deployed anywhere: its resources' own names where it gives them,
    the logical id where CloudFormation would generate one (nothing names those but references, which resolve to
    the same made-up id)."""
    found: dict[str, str] = {}
    for logical, resource in template["Resources"].items():
        kind = resource["Type"]
        name = resource.get("Properties", {}).get(NAME_PROPERTY.get(kind, ""), logical)
        if not isinstance(name, str):
            name = logical
        if kind == "AWS::SQS::Queue":
            name = f"https://sqs.{region}.amazonaws.com/{account}/{name}"
        elif kind == "AWS::SNS::Topic":
            name = f"arn:{PARTITION}:sns:{region}:{account}:{name}"
        elif kind == "AWS::StepFunctions::StateMachine":
            name = f"arn:{PARTITION}:states:{region}:{account}:stateMachine:{name}"
        found[logical] = name
    return found
