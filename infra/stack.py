"""The jobsched stack: one per account and region, a construct per concern.

Names, keys, indexes, queues and environment variables come from ``jobsched.core.names``: the handlers,
the tests and the local runtime read the same module, so nothing here can drift from them.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, ArnFormat, Stack, Tags, Token, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.components.api import Api
from infra.components.dispatch import Dispatch
from infra.components.examples import Examples
from infra.components.functions import Functions
from infra.components.kubernetes import KubernetesJobs
from infra.components.observability import Observability
from infra.components.queues import Queues
from infra.components.storage import Storage
from infra.components.walls import guard_intake, guard_key, guard_runs_bus
from infra.components.workflows import Workflows
from infra.config import StageConfig
from jobsched.core.names import OWNER_TAG, PROJECT, SHARED_TAG, Env, reserved_prefixes


class JobschedStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        Tags.of(self).add("project", PROJECT)
        Tags.of(self).add("stage", config.stage)
        self.key = kms.Key(
            self, "Key", enable_key_rotation=True, description="jobsched tables, queues, topics, logs, environments"
        )
        # CloudWatch Logs encrypts the stack's log groups with it (only log groups of this account and region).
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": self.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )
        self.storage = Storage(self, "Storage", config=config, key=self.key)
        self.queues = Queues(self, "Queues", config=config, key=self.key)
        self.functions = Functions(
            self, "Functions", config=config, storage=self.storage, queues=self.queues, key=self.key
        )
        self.dispatch = Dispatch(self, "Dispatch", config=config, functions=self.functions)
        self.workflows = Workflows(self, "Workflows", config=config, queues=self.queues, functions=self.functions)
        self.api = Api(self, "Api", config=config, functions=self.functions)
        self.kubernetes = KubernetesJobs(
            self, "Kubernetes", config=config, functions=self.functions, queues=self.queues, key=self.key
        )
        guard_intake((self.queues.intake, self.queues.system_intake), self.functions)
        guard_runs_bus(self.functions.runs_bus, self.functions)
        guard_key(self.key, self.functions)
        self.functions.escalation.add_environment(Env.API_URL, self.api.rest_api.url)  # links in pages
        # Containers report progress and checkpoints to the API with a token for their attempt, which the worker
        # signs with the callback secret when it starts their task.
        self.functions.worker.add_environment(Env.API_URL, self.api.rest_api.url)
        self.observability = Observability(
            self,
            "Observability",
            config=config,
            key=self.key,
            queues=self.queues,
            functions=self.functions,
            api=self.api,
        )
        if config.examples:
            Examples(self, "Examples", config=config, code=self.functions.code, key=self.key)
        _acknowledge(self)


def _acknowledge(stack: JobschedStack) -> None:
    """cdk-nag findings this design accepts, each with its reason. Granular findings are named one by one,
    so a new wildcard anywhere fails synthesis until someone explains it here."""
    rules: dict[str, str] = {
        "AwsSolutions-APIG2": "Bodies are validated against the OpenAPI models in the handler (field-level errors); "
        "gateway request-parameter validation is on",
        "AwsSolutions-APIG3": "WAF is on in prod (rate per source IP, body size; -c waf=true elsewhere); the API is "
        "IAM-authorized, throttled per stage, and counted per caller and per team in the handler",
        "AwsSolutions-COG4": "The API uses IAM (SigV4) authorization, not Cognito",
        "AwsSolutions-SQS3": "These queues are themselves dead-letter queues",
        "AwsSolutions-L1": "Python 3.13 is pinned: the asset's dependencies are built for it",
        "AwsSolutions-S1": "The console trail's bucket holds CloudTrail's own log files (who pressed a console "
        "button); it is private, SSL-only and written only by CloudTrail, and the trail records every write",
    }
    managed = "arn:<AWS::Partition>:iam::aws:policy/service-role"
    granular: dict[str, str] = {
        f"AwsSolutions-IAM4[Policy::{managed}/AWSLambdaBasicExecutionRole]": "AWS-managed, grants only log writes",
        f"AwsSolutions-IAM4[Policy::{managed}/AmazonAPIGatewayPushToCloudWatchLogs]": "AWS-managed, API Gateway logs",
        "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "CDK's KMS grant for our own key only",
        "AwsSolutions-IAM5[Action::kms:ReEncrypt*]": "CDK's KMS grant for our own key only",
        "AwsSolutions-IAM5[Resource::*]": "X-Ray PutTraceSegments/PutTelemetryRecords accept no narrower resource; "
        "the target role reads tags (ListTags, DescribeSecret...) to decide ownership before any call; "
        "secretsmanager:GetRandomPassword (rotation) has no resource; logs:GetQueryResults and StopQuery (the API's"
        " run logs) take a query id",
    }
    for table in stack.storage.resources:
        logical = stack.get_logical_id(table)
        granular[f"AwsSolutions-IAM5[Resource::<{logical}.Arn>/index/*]"] = "the indexes of our own table"
    region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
    account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
    scoped = "arn:<AWS::Partition>:{service}:" + f"{region}:{account}:" + "{resource}"
    for service, resource in (
        ("lambda", "function:*"),
        ("sqs", "*"),
        ("states", "stateMachine:*"),
        ("events", "event-bus/*"),
        ("secretsmanager", "secret:*"),
        ("ssm", "parameter/*"),
        ("logs", "log-group:*"),  # a container run's awslogs stream, for `jobsched logs`
        ("eks", "cluster/*"),  # a kubernetes target's cluster: its endpoint and authority
    ):
        arn = scoped.format(service=service, resource=resource)
        granular[f"AwsSolutions-IAM5[Resource::{arn}]"] = (
            f"the target role only: teams name their resources at run time; allowed only where {OWNER_TAG} equals "
            f"the session's team tag (or {SHARED_TAG}=true for targets); jobsched's own resources are denied"
        )
    for resource, why in (
        ("task-definition/*", "RunTask only of a task definition tagged for the session's team"),
        ("task/*", "tasks are named by ECS at start: tagging at RunTask, reading and stopping the team's own"),
        ("container-instance/*", "ListTasks within a cluster, as ECS requires (it names tasks only)"),
    ):
        granular[f"AwsSolutions-IAM5[Resource::{scoped.format(service='ecs', resource=resource)}]"] = (
            f"the target role only: container targets; {why}; the adapter checks the cluster's and the task "
            f"definition's {OWNER_TAG} tag before every RunTask"
        )
    for resource, why in (
        ("job-queue/*", "SubmitJob only to a job queue tagged for the session's team"),
        ("job-definition/*", "SubmitJob only of a job definition tagged for the session's team"),
        ("job/*", "jobs are named by Batch at submit: tagging them at SubmitJob, terminating only the team's"),
    ):
        granular[f"AwsSolutions-IAM5[Resource::{scoped.format(service='batch', resource=resource)}]"] = (
            f"the target role only: batch targets; {why}; the adapter checks the queue's and the definition's "
            f"{OWNER_TAG} tag before every SubmitJob"
        )
    granular["AwsSolutions-IAM5[Resource::arn:aws:s3:::*/*]"] = (
        "the target role: HeadObject of a wait_for object and GetObject of a distributed map's object; the DAG "
        "machines' role: the ItemReader's GetObject of that object (this account only). Each read happens only "
        f"after the bucket's tags were read and found to be the run's team's ({OWNER_TAG}); S3 has no condition on "
        "bucket tags for object reads"
    )
    granular[f"AwsSolutions-IAM5[Resource::{scoped.format(service='sns', resource='*')}]"] = (
        f"the target role only: teams' escalation topics, allowed only where {OWNER_TAG} equals the session's team"
    )
    own = reserved_prefixes(stack.config.stage)
    for service, resource in (
        ("lambda", f"function:{own[0]}*"),
        ("sqs", f"{own[0]}*"),
        ("states", f"stateMachine:{own[0]}*"),
        ("states", f"execution:{own[0]}*"),
        ("events", f"event-bus/{own[0]}*"),
        ("sns", f"{own[0]}*"),
        ("secretsmanager", f"secret:{own[1]}*"),
        ("ssm", f"parameter/{own[2].lstrip('/')}*"),
    ):
        granular[f"AwsSolutions-IAM5[Resource::{scoped.format(service=service, resource=resource)}]"] = (
            "a Deny: the target role may never touch jobsched's own resources"
        )
    for rule in (f"rule/{own[0]}*", f"rule/*/{own[0]}*"):
        granular[f"AwsSolutions-IAM5[Resource::{scoped.format(service='events', resource=rule)}]"] = (
            "the API keeps one EventBridge rule per job trigger, named under the stage's prefix (on the default bus "
            "or a team's bus): only those rules"
        )
    granular[f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::{account}:role/*]"] = (
        "the API reads the tags of the caller's role to find its team (iam:ListRoleTags only)"
    )
    granular["AwsSolutions-IAM5[Action::*]"] = "a Deny of every action on jobsched's own resources (target role)"
    kubernetes = scoped.format(service="states", resource=f"execution:{stack.kubernetes.name}:*")
    granular[f"AwsSolutions-IAM5[Resource::{kubernetes}]"] = (
        "the executions of the deployment's own kubernetes state machine (one per attempt, named at start)"
    )
    rules["AwsSolutions-SF1"] = (
        "The kubernetes state machine's execution history (kept 90 days) holds each run's events and the run record "
        "its outcome; logging ALL events to CloudWatch would add ingestion to every run"
    )
    if not stack.config.tracing:
        rules["AwsSolutions-SF2"] = "X-Ray is off in this non-prod stage to keep its idle cost down (-c tracing=true)"
    prefix = stack.workflows.prefix
    for kind in ("stateMachine", "execution"):
        arn = scoped.format(service="states", resource=f"{kind}:{prefix}*")
        granular[f"AwsSolutions-IAM5[Resource::{arn}]"] = "only jobsched's own state machines (the stage prefix)"
    for rule, reason in (rules | granular).items():
        Validations.of(stack).acknowledge(Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))
