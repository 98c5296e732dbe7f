"""Walls IAM holds around the scheduler's own inputs, whatever a team's roles may do in the account: the intake
queues take messages only from the stage's rules (EventBridge) and jobsched's functions, and the runs bus takes
"Run Finished" only from jobsched's functions, and the stack key decrypts directly for nobody else. A team role with
`sqs:*`, `events:*` or `kms:*` on `*` cannot forge an intake envelope or a run's end, nor decrypt what the stack holds
(a resource policy's Deny wins over any identity policy's Allow)."""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs

from infra.components.functions import Functions


def own_roles(functions: Functions) -> list[str]:
    """The role ARNs of every function of the deployment."""
    return [function.role.role_arn for function in functions.all() if function.role is not None]


def _deny_all_but(sid: str, action: str | list[str], resource: str, **unless: dict[str, object]) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=sid,
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=[action] if isinstance(action, str) else action,
        resources=[resource],
        conditions=unless,
    )


def guard_intake(queues: tuple[sqs.IQueue, ...], functions: Functions) -> None:
    roles = own_roles(functions)
    for queue in queues:
        # A service principal (EventBridge delivering a rule's match) has no principal ARN: its service name.
        queue.add_to_resource_policy(
            _deny_all_but(
                "OnlyRulesAndJobschedSend",
                "sqs:SendMessage",
                queue.queue_arn,
                ArnNotLike={"aws:PrincipalArn": roles},
                StringNotEqualsIfExists={"aws:PrincipalServiceName": "events.amazonaws.com"},
            )
        )


def guard_runs_bus(bus: events.EventBus, functions: Functions) -> None:
    bus.add_to_resource_policy(
        _deny_all_but(
            "OnlyJobschedPutsRunEvents",
            "events:PutEvents",
            bus.event_bus_arn,
            ArnNotLike={"aws:PrincipalArn": own_roles(functions)},
        )
    )


# What a direct call of the key does: read or make what it protects.
KEY_CRYPTO = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"]


def guard_key(key: kms.IKey, functions: Functions) -> None:
    """The stack key's policy defers to IAM (CloudFormation and the platform must manage it), so a team role with
    `kms:*` could decrypt a queue's or a table's ciphertext by calling KMS itself. Only jobsched's roles may: every
    other use goes through a service (SQS, DynamoDB, Lambda, Logs, Step Functions, EventBridge), which asks the
    service's own permission of the caller first."""
    key.add_to_resource_policy(
        _deny_all_but(
            "OnlyJobschedUsesTheKeyDirectly",
            KEY_CRYPTO,
            "*",
            ArnNotLike={"aws:PrincipalArn": own_roles(functions)},
            Bool={"aws:ViaAWSService": "false", "aws:PrincipalIsAWSService": "false"},
        )
    )
