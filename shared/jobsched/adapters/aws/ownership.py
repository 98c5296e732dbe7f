"""Team sessions and tag reads: how runs reach team resources with their team's permissions only.

In AWS the functions hold no permission on team resources. They assume the target role with the session
tag ``jobsched-team=<team of the run>``; its policies allow each action only where the resource's
``jobsched-team`` tag equals that session tag (or, for targets, the resource is shared). Sessions are
cached per team and renewed five minutes before they expire. Without a target role (the local runtime,
moto) the function's own credentials are used, and ``OwnershipGuard`` alone enforces the rule.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import ClientError

from jobsched.adapters.aws.clients import client, client_config
from jobsched.core.containers import short_name
from jobsched.core.names import OWNER_TAG, Env
from jobsched.tenancy.ownership import ResourceKind, ResourceRef

SESSION_SECONDS = 3600
RENEW_BEFORE_SECONDS = 300
CONTAINER_KINDS = (
    ResourceKind.CLUSTER,
    ResourceKind.TASK_DEFINITION,
    ResourceKind.JOB_QUEUE,
    ResourceKind.JOB_DEFINITION,
    ResourceKind.LOG_GROUP,
    ResourceKind.EKS_CLUSTER,
    ResourceKind.SUBNET,
    ResourceKind.SECURITY_GROUP,
    ResourceKind.CAPACITY_PROVIDER,
)
MISSING = frozenset(
    {
        "ResourceNotFoundException",
        "ResourceNotFound",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "StateMachineDoesNotExist",
        "ClusterNotFoundException",
        "ClientException",  # ECS: no such task definition
        "InvalidArn",
        "NotFound",
        "NotFoundException",
        "InvalidResourceId",
        "ParameterNotFound",
        "AccessDenied",
        "AccessDeniedException",
        "AuthorizationError",
        "AuthorizationErrorException",
        "InvalidParameter",
        "InvalidParameterException",
        "ValidationException",
        "NoSuchBucket",
        "InvalidSubnetID.NotFound",
        "InvalidGroup.NotFound",
        "InvalidSubnetID.Malformed",
        "InvalidGroupId.Malformed",
    }
)


@dataclass
class _Session:
    session: boto3.session.Session
    expires_at: float
    clients: dict[tuple[str, int | None], Any] = field(default_factory=dict)


class TeamSessions:
    """boto3 clients that act as one team: the target role, assumed with the team's session tag."""

    def __init__(
        self,
        role_arn: str | None,
        *,
        sts: Any | None = None,
        wall_clock: Callable[[], float] = time.time,
        duration_seconds: int = SESSION_SECONDS,
    ) -> None:
        self.role_arn = role_arn
        self._sts = sts
        self.wall_clock = wall_clock
        self.duration_seconds = duration_seconds
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def client(self, team: str, service: str, read_timeout: int | None = None) -> Any:
        if self.role_arn is None:
            return client(service, read_timeout)
        with self._lock:
            current = self._sessions.get(team)
            if current is None or current.expires_at - RENEW_BEFORE_SECONDS <= self.wall_clock():
                current = self._assume(team)
                self._sessions[team] = current
            key = (service, read_timeout)
            if key not in current.clients:
                current.clients[key] = current.session.client(
                    service, endpoint_url=os.environ.get(Env.AWS_ENDPOINT) or None, config=client_config(read_timeout)
                )
            return current.clients[key]

    def _assume(self, team: str) -> _Session:
        sts = self._sts or client("sts")
        response = sts.assume_role(
            RoleArn=self.role_arn,
            RoleSessionName=f"jobsched-{team}"[:64],
            DurationSeconds=self.duration_seconds,
            Tags=[{"Key": OWNER_TAG, "Value": team}],
        )
        credentials = response["Credentials"]
        session = boto3.session.Session(
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
            region_name=sts.meta.region_name,
        )
        return _Session(session, credentials["Expiration"].timestamp())


class AwsTagReader:
    """Reads a resource's tags as the team (the target role may read tags of any resource)."""

    def __init__(self, sessions: TeamSessions) -> None:
        self.sessions = sessions
        self._accounts: dict[str, str] = {}

    def tags(self, team: str, resource: ResourceRef) -> dict[str, str] | None:
        try:
            return self._read(team, resource)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code", "") in MISSING:
                return None
            raise

    def bucket_sends_events(self, team: str, bucket: str) -> bool | None:
        """Whether the bucket sends its events to EventBridge (what s3 triggers and waits listen to); None when
        the team cannot see it."""
        try:
            found = self.sessions.client(team, "s3").get_bucket_notification_configuration(Bucket=bucket)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code", "") in MISSING:
                return None
            raise
        return "EventBridgeConfiguration" in found

    def _read(self, team: str, resource: ResourceRef) -> dict[str, str]:
        kind, name = resource.kind, resource.name
        if kind is ResourceKind.FUNCTION:
            lambdas = self.sessions.client(team, "lambda")
            arn = name if name.startswith("arn:") else self._arn(team, lambdas, "lambda", f"function:{name}")
            return dict(lambdas.list_tags(Resource=":".join(arn.split(":")[:7]))["Tags"])  # tags live on the function
        if kind is ResourceKind.QUEUE:
            return dict(self.sessions.client(team, "sqs").list_queue_tags(QueueUrl=name).get("Tags", {}))
        if kind is ResourceKind.STATE_MACHINE:
            found = self.sessions.client(team, "stepfunctions").list_tags_for_resource(resourceArn=name)["tags"]
            return {tag["key"]: tag["value"] for tag in found}
        if kind is ResourceKind.EVENT_BUS:
            events = self.sessions.client(team, "events")
            arn = name if name.startswith("arn:") else self._arn(team, events, "events", f"event-bus/{name}")
            return {tag["Key"]: tag["Value"] for tag in events.list_tags_for_resource(ResourceARN=arn)["Tags"]}
        if kind is ResourceKind.TOPIC:
            found = self.sessions.client(team, "sns").list_tags_for_resource(ResourceArn=name)["Tags"]
            return {tag["Key"]: tag["Value"] for tag in found}
        if kind is ResourceKind.BUCKET:
            return self._bucket_tags(team, name)
        if kind in CONTAINER_KINDS:
            return self._container_tags(team, resource)
        if kind is ResourceKind.SECRET:
            found = self.sessions.client(team, "secretsmanager").describe_secret(SecretId=name).get("Tags", [])
            return {tag["Key"]: tag["Value"] for tag in found}
        found = self.sessions.client(team, "ssm").list_tags_for_resource(ResourceType="Parameter", ResourceId=name)
        return {tag["Key"]: tag["Value"] for tag in found["TagList"]}

    def _bucket_tags(self, team: str, name: str) -> dict[str, str]:
        try:
            found = self.sessions.client(team, "s3").get_bucket_tagging(Bucket=name)["TagSet"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "NoSuchTagSet":
                return {}  # a bucket without tags is nobody's: refused as untagged
            raise
        return {tag["Key"]: tag["Value"] for tag in found}

    def _container_tags(self, team: str, resource: ResourceRef) -> dict[str, str]:
        """Container targets' resources: ECS clusters and task definitions, Batch queues and job definitions,
        and the log groups their containers write to."""
        if resource.kind is ResourceKind.LOG_GROUP:
            logs, name = self.sessions.client(team, "logs"), resource.name
            arn = name if name.startswith("arn:") else self._arn(team, logs, "logs", f"log-group:{name}")
            return dict(logs.list_tags_for_resource(resourceArn=arn).get("tags", {}))
        if resource.kind in (ResourceKind.JOB_QUEUE, ResourceKind.JOB_DEFINITION):
            return self._batch_tags(team, resource)
        if resource.kind is ResourceKind.EKS_CLUSTER:
            eks = self.sessions.client(team, "eks")
            return dict(eks.describe_cluster(name=short_name(resource.name))["cluster"].get("tags") or {})
        if resource.kind is ResourceKind.SUBNET:
            [subnet] = self.sessions.client(team, "ec2").describe_subnets(SubnetIds=[resource.name])["Subnets"]
            return {tag["Key"]: tag["Value"] for tag in subnet.get("Tags", [])}
        if resource.kind is ResourceKind.SECURITY_GROUP:
            ec2 = self.sessions.client(team, "ec2")
            [group] = ec2.describe_security_groups(GroupIds=[resource.name])["SecurityGroups"]
            return {tag["Key"]: tag["Value"] for tag in group.get("Tags", [])}
        return self._ecs_tags(team, resource)

    def _batch_tags(self, team: str, resource: ResourceRef) -> dict[str, str]:
        batch = self.sessions.client(team, "batch")
        if resource.kind is ResourceKind.JOB_QUEUE:
            found = batch.describe_job_queues(jobQueues=[resource.name])["jobQueues"]
        elif resource.name.startswith("arn:") or ":" in resource.name:  # name:revision or an ARN: that one
            found = batch.describe_job_definitions(jobDefinitions=[resource.name])["jobDefinitions"]
        else:  # a name alone: the revision a SubmitJob would run (the latest active one)
            found = batch.describe_job_definitions(jobDefinitionName=resource.name, status="ACTIVE")["jobDefinitions"]
            found = sorted(found, key=lambda definition: int(definition.get("revision", 0)))[-1:]
        if not found:
            missing = {"Error": {"Code": "ResourceNotFoundException", "Message": resource.name}}
            raise ClientError(missing, "DescribeJobQueues" if resource.kind is ResourceKind.JOB_QUEUE else "Describe")
        return dict(found[0].get("tags") or {})

    def _ecs_tags(self, team: str, resource: ResourceRef) -> dict[str, str]:
        ecs = self.sessions.client(team, "ecs")
        if resource.kind is ResourceKind.TASK_DEFINITION:
            found = ecs.describe_task_definition(taskDefinition=resource.name, include=["TAGS"])
            return {tag["key"]: tag["value"] for tag in found.get("tags", [])}
        if resource.kind is ResourceKind.CAPACITY_PROVIDER:
            providers = ecs.describe_capacity_providers(capacityProviders=[resource.name], include=["TAGS"])
            active = [p for p in providers.get("capacityProviders", []) if p.get("status") != "INACTIVE"]
            if not active:
                missing = {"Error": {"Code": "ClientException", "Message": resource.name}}
                raise ClientError(missing, "DescribeCapacityProviders")
            return {tag["key"]: tag["value"] for tag in active[0].get("tags", [])}
        clusters = ecs.describe_clusters(clusters=[resource.name], include=["TAGS"])["clusters"]
        if not clusters or clusters[0].get("status") == "INACTIVE":
            missing = {"Error": {"Code": "ClusterNotFoundException", "Message": resource.name}}
            raise ClientError(missing, "DescribeClusters")
        return {tag["key"]: tag["value"] for tag in clusters[0].get("tags", [])}

    def _arn(self, team: str, service_client: Any, service: str, resource: str) -> str:
        region = service_client.meta.region_name
        if team not in self._accounts:
            self._accounts[team] = self.sessions.client(team, "sts").get_caller_identity()["Account"]
        partition = service_client.meta.partition
        return f"arn:{partition}:{service}:{region}:{self._accounts[team]}:{resource}"
