"""Kubernetes targets: the deployment's one state machine that runs a team's batch/v1 Job on EKS
(``eks:runJob.sync``), the role it runs as, the worker's right to start, read and stop its executions, and the
rule that brings each execution's end to the intake."""

from __future__ import annotations

import json

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.components.common import colon_arn_format, resource_name, work_end_rule
from infra.components.functions import Functions
from infra.components.queues import Queues
from infra.config import StageConfig
from jobsched.core.events import kubernetes_rule_pattern
from jobsched.core.kubernetes import state_machine_definition
from jobsched.core.names import PROJECT, Env


class KubernetesJobs(Construct):
    """The role holds no AWS permission but its data key's: it reaches a cluster only through that cluster's access
    entries, which the platform grants per cluster (Kubernetes RBAC to create, read and delete Jobs, create and
    delete Secrets, and read pod logs in the teams' namespaces). Which namespace a team may name is the scheduler's
    check (the team's own name, or the membership's grant)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        functions: Functions,
        queues: Queues,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        name = resource_name(config, "kubernetes-jobs")
        self.role = iam.Role(
            self,
            "Role",
            role_name=name,
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="jobsched kubernetes targets: runs teams' Jobs on EKS through the clusters' access entries",
        )
        self.machine = sfn.CfnStateMachine(
            self,
            "StateMachine",
            state_machine_name=name,
            role_arn=self.role.role_arn,
            definition_string=json.dumps(state_machine_definition()),
            tracing_configuration=sfn.CfnStateMachine.TracingConfigurationProperty(enabled=config.tracing),
            # Its executions' input carries the attempt's callback token (for the pod's Secret): encrypted with the
            # stack's key, readable back only by whom the key lets decrypt for this machine.
            encryption_configuration=sfn.CfnStateMachine.EncryptionConfigurationProperty(
                type="CUSTOMER_MANAGED_KMS_KEY", kms_key_id=key.key_arn, kms_data_key_reuse_period_seconds=300
            ),
        )
        self.name = name
        arn = stack.format_arn(
            service="states", resource="stateMachine", resource_name=name, arn_format=colon_arn_format()
        )
        for_this_machine = {"StringEquals": {"kms:EncryptionContext:aws:states:stateMachineArn": arn}}
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn], conditions=for_this_machine
            )
        )
        # Starting an execution encrypts its input; describing one decrypts it.
        functions.worker.add_to_role_policy(
            iam.PolicyStatement(actions=["kms:GenerateDataKey"], resources=[key.key_arn], conditions=for_this_machine)
        )
        executions = stack.format_arn(
            service="states", resource="execution", resource_name=f"{name}:*", arn_format=colon_arn_format()
        )
        functions.worker.add_to_role_policy(iam.PolicyStatement(actions=["states:StartExecution"], resources=[arn]))
        for function in (functions.worker, functions.heartbeat, functions.api):  # read and stop: time-out, cancel
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"], resources=[executions]
                )
            )
            function.add_to_role_policy(
                iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn], conditions=for_this_machine)
            )
            function.add_environment(Env.KUBERNETES_STATE_MACHINE, arn)
        work_end_rule(
            self,
            "StateChanges",
            name=f"{PROJECT}-{config.stage}-kubernetes-state-changes",
            description="jobsched: the end of each kubernetes target's execution -> the intake",
            pattern=kubernetes_rule_pattern(arn),
            intake_arn=queues.system_intake.queue_arn,
        )
