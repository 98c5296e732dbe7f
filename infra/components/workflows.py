"""Step Functions for DAG jobs: the role state machines run as, and what the deployer may create."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.common import colon_arn_format, resource_name
from infra.components.functions import Functions
from infra.components.queues import Queues
from infra.config import StageConfig
from jobsched.core.names import JOB_TAG, OWNER_TAG, Env, state_machine_prefix


class Workflows(Construct):
    """The role DAG state machines run with, and the right to manage them, start them and report their tasks.

    State machines live under ``jobsched-{stage}-*``. The API may create, update, tag and delete only
    those, and may pass only this role. Task states send to the work queues (waitForTaskToken), and
    the worker reports task results back.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, queues: Queues, functions: Functions
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.prefix = state_machine_prefix(config.stage)
        self.role = iam.Role(
            self,
            "StateMachineRole",
            role_name=resource_name(config, "workflows"),
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="jobsched DAG state machines: send task messages, run distributed maps' child executions",
        )
        for queue in queues.work.values():
            queue.grant_send_messages(self.role)
        machines = stack.format_arn(
            service="states", resource="stateMachine", resource_name=f"{self.prefix}*", arn_format=colon_arn_format()
        )
        executions = stack.format_arn(
            service="states", resource="execution", resource_name=f"{self.prefix}*", arn_format=colon_arn_format()
        )
        # Distributed maps: a machine starts, watches and stops its own child executions, and its ItemReader reads
        # the object the worker read first, as the team, on a bucket found to be the team's (the worker's answer
        # names it; S3 has no condition on a bucket's tags for object reads). Objects of this account only.
        self.role.add_to_policy(iam.PolicyStatement(actions=["states:StartExecution"], resources=[machines]))
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["states:DescribeExecution", "states:StopExecution"], resources=[executions])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=["arn:aws:s3:::*/*"],
                conditions={"StringEquals": {"s3:ResourceAccount": stack.account}},
            )
        )
        # Created only with a team and job tag; changed, read and removed only where that job tag is set.
        job_tagged = {"StringLike": {f"aws:ResourceTag/{JOB_TAG}": "?*/?*"}}
        functions.api.add_to_role_policy(
            iam.PolicyStatement(
                actions=["states:CreateStateMachine", "states:TagResource"],
                resources=[machines],
                conditions={"StringLike": {f"aws:RequestTag/{JOB_TAG}": "?*/?*", f"aws:RequestTag/{OWNER_TAG}": "?*"}},
            )
        )
        functions.api.add_to_role_policy(
            iam.PolicyStatement(
                actions=["states:UpdateStateMachine", "states:DeleteStateMachine", "states:DescribeStateMachine"],
                resources=[machines],
                conditions=job_tagged,
            )
        )
        functions.api.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "states.amazonaws.com"}},
            )
        )
        # The worker starts executions and reports tasks; the API (cancel, callback results) and the heartbeat
        # checker (parked tasks, runs past their budget) report and stop them too.
        # DAG starts have their own grant: only jobsched's DAG machines, each tagged with its job.
        functions.worker.add_to_role_policy(
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[machines], conditions=job_tagged)
        )
        # The console's actions function answers approval tasks (a person's decision) on their tokens, nothing more.
        functions.console_actions.add_to_role_policy(
            iam.PolicyStatement(actions=["states:SendTaskSuccess", "states:SendTaskFailure"], resources=[machines])
        )
        for function in (functions.worker, functions.api, functions.heartbeat):
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"],
                    resources=[machines],
                )
            )
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["states:StopExecution", "states:DescribeExecution"], resources=[executions]
                )
            )
        machine_prefix = stack.format_arn(
            service="states", resource="stateMachine", resource_name=self.prefix, arn_format=colon_arn_format()
        )
        for function in (
            functions.api,
            functions.dispatcher,
            functions.worker,
            functions.heartbeat,
            functions.console_actions,
        ):
            function.add_environment(Env.WORKFLOW_ROLE, self.role.role_arn)
            function.add_environment(Env.STATE_MACHINE_PREFIX, machine_prefix)
