"""The role runs reach teams' resources through: only resources tagged with the run's team (ABAC)."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.components.common import colon_arn_format, resource_name
from infra.config import StageConfig
from jobsched.core.names import OWNER_TAG, SHARED_TAG, Env, reserved_prefixes


class TargetRole(Construct):
    """The only way to a team's resources: assumed per run with the session tag jobsched-team=<team>.

    Each action is allowed only where the resource's jobsched-team tag equals the session's (or, for
    targets, the resource is tagged jobsched-shared=true); secrets, parameters and topics are never shared.
    jobsched's own resources are denied outright. Only jobsched's functions may assume it, and only with
    a team session tag.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, callers: tuple[lambda_.Function, ...]
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        caller_roles = [function.role for function in callers if function.role is not None]
        self.role = iam.Role(
            self,
            "Role",
            role_name=resource_name(config, "targets"),
            assumed_by=iam.CompositePrincipal(*(iam.ArnPrincipal(role.role_arn) for role in caller_roles)),
            description="jobsched runs: a team's targets, secrets and topics, as that team (session tag)",
            max_session_duration=Duration.hours(1),
        )
        trust = self.role.assume_role_policy
        assert trust is not None
        trust.add_statements(
            iam.PolicyStatement(
                actions=["sts:TagSession"],
                principals=[iam.ArnPrincipal(role.role_arn) for role in caller_roles],
                conditions={"StringLike": {f"aws:RequestTag/{OWNER_TAG}": "?*"}},
            )
        )
        for function in callers:
            function.add_to_role_policy(
                iam.PolicyStatement(actions=["sts:AssumeRole", "sts:TagSession"], resources=[self.role.role_arn])
            )
            function.add_environment(Env.TARGET_ROLE, self.role.role_arn)

        def arn(service: str, resource: str, name: str | None = None, colon: bool = False) -> str:
            return stack.format_arn(
                service=service, resource=resource, resource_name=name, arn_format=colon_arn_format() if colon else None
            )

        own_team = {"StringEquals": {f"aws:ResourceTag/{OWNER_TAG}": f"${{aws:PrincipalTag/{OWNER_TAG}}}"}}
        shared = {"StringEquals": {f"aws:ResourceTag/{SHARED_TAG}": "true"}}
        targets = [
            (["lambda:InvokeFunction"], arn("lambda", "function", "*", colon=True)),
            (["sqs:SendMessage"], arn("sqs", "*")),
            (["states:StartExecution"], arn("states", "stateMachine", "*", colon=True)),
            (["events:PutEvents"], arn("events", "event-bus", "*")),
        ]
        for actions, resource in targets:
            for condition in (own_team, shared):
                self.role.add_to_policy(
                    iam.PolicyStatement(actions=actions, resources=[resource], conditions=condition)
                )
        # Container targets: a task of the team's task definition (its tags), started tagged; its task and
        # execution roles may be passed to ECS only if tagged for the team. A cluster may be the team's or shared:
        # the adapter checks its tags before RunTask. Reading and stopping tasks stays within ECS clusters.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecs:RunTask"], resources=[arn("ecs", "task-definition", "*")], conditions=own_team
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecs:TagResource"],
                resources=[arn("ecs", "task", "*")],
                # Only at RunTask, and only with the session's team: a task never carries another team's tag.
                conditions={
                    "StringEquals": {
                        "ecs:CreateAction": "RunTask",
                        f"aws:RequestTag/{OWNER_TAG}": f"${{aws:PrincipalTag/{OWNER_TAG}}}",
                    }
                },
            )
        )
        # Listing names tasks only (IAM authorizes it on the cluster's ARN, never its tags); describing and stopping
        # reach only the team's own tasks (RunTask tags each with the team).
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecs:ListTasks"],
                resources=[arn("ecs", "container-instance", "*")],
                conditions={"ArnLike": {"ecs:cluster": arn("ecs", "cluster", "*")}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecs:DescribeTasks", "ecs:StopTask"],
                resources=[arn("ecs", "task", "*")],
                conditions={
                    "ArnLike": {"ecs:cluster": arn("ecs", "cluster", "*")},
                    **own_team,
                },
            )
        )
        # Kubernetes targets: the cluster's endpoint and authority, read as the team, of a cluster tagged for it or
        # shared (the worker starts the deployment's machine with them).
        for condition in (own_team, shared):
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["eks:DescribeCluster"], resources=[arn("eks", "cluster", "*")], conditions=condition
                )
            )
        # Batch: SubmitJob only to a queue and of a definition tagged for the session's team (the adapter checks
        # both before every submit); the job carries the team's tag, so only its jobs can be terminated. Roles
        # are passed when a team registers its job definition, not at SubmitJob: no PassRole here.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["batch:SubmitJob"],
                resources=[arn("batch", "job-queue", "*"), arn("batch", "job-definition", "*")],
                conditions=own_team,
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["batch:TagResource"],
                resources=[arn("batch", "job", "*")],
                conditions={"StringEquals": {f"aws:RequestTag/{OWNER_TAG}": f"${{aws:PrincipalTag/{OWNER_TAG}}}"}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["batch:TerminateJob"], resources=[arn("batch", "job", "*")], conditions=own_team
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[stack.format_arn(service="iam", region="", resource="role", resource_name="*")],
                conditions={
                    "StringEquals": {
                        f"aws:ResourceTag/{OWNER_TAG}": f"${{aws:PrincipalTag/{OWNER_TAG}}}",
                        "iam:PassedToService": "ecs-tasks.amazonaws.com",
                    }
                },
            )
        )
        for actions, resource in (
            (["secretsmanager:GetSecretValue"], arn("secretsmanager", "secret", "*", colon=True)),
            (["ssm:GetParameter"], arn("ssm", "parameter", "*")),
            (["sns:Publish"], arn("sns", "*")),
            # `jobsched logs` of a container run: its awslogs stream, in a log group tagged for the team.
            (["logs:GetLogEvents"], arn("logs", "log-group", "*", colon=True)),
        ):
            self.role.add_to_policy(iam.PolicyStatement(actions=actions, resources=[resource], conditions=own_team))
        # wait_for's objects (HeadObject) and a distributed map's (GetObject) in any bucket, always after the
        # bucket's tags were read and found to be the run's team's (S3 offers no condition on a bucket's tags for
        # object reads).
        # s3:ResourceAccount keeps them in the deployment's account.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=["arn:aws:s3:::*/*"],
                conditions={"StringEquals": {"s3:ResourceAccount": stack.account}},
            )
        )
        # Reading tags is how ownership is decided before anything is called (a trigger's or a wait's bucket
        # too); a run's own execution is read back to tell a redelivered start from someone else's.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "lambda:ListTags",
                    "sqs:ListQueueTags",
                    "states:ListTagsForResource",
                    "events:ListTagsForResource",
                    "sns:ListTagsForResource",
                    "secretsmanager:DescribeSecret",
                    "ssm:ListTagsForResource",
                    "s3:GetBucketTagging",
                    "s3:GetBucketNotification",  # an s3 trigger's or wait's bucket sends its events (a PUT warns)
                    "ecs:DescribeClusters",
                    "ecs:DescribeTaskDefinition",
                    "ecs:ListTagsForResource",
                    "ecs:DescribeCapacityProviders",
                    "ec2:DescribeSubnets",  # an ECS task's subnets and security groups are owned like its cluster
                    "ec2:DescribeSecurityGroups",
                    "logs:ListTagsForResource",
                    "batch:DescribeJobQueues",
                    "batch:DescribeJobDefinitions",
                    "batch:ListJobs",
                    "batch:DescribeJobs",
                    "states:DescribeExecution",
                ],
                resources=["*"],
            )
        )
        own = reserved_prefixes(config.stage)
        self.role.add_to_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=["*"],
                resources=[
                    arn("lambda", "function", f"{own[0]}*", colon=True),
                    arn("sqs", f"{own[0]}*"),
                    arn("states", "stateMachine", f"{own[0]}*", colon=True),
                    arn("states", "execution", f"{own[0]}*", colon=True),
                    arn("events", "event-bus", f"{own[0]}*"),
                    arn("sns", f"{own[0]}*"),
                    arn("secretsmanager", "secret", f"{own[1]}*", colon=True),
                    arn("ssm", "parameter", f"{own[2].lstrip('/')}*"),
                ],
            )
        )
