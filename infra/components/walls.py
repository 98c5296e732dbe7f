"""Walls IAM holds around the scheduler's own inputs, whatever a team's roles may do in the account: the intake
queues take messages only from the stage's rules (EventBridge) and jobsched's functions, and the runs bus takes
"Run Finished" only from jobsched's functions. A team role with `sqs:*` or `events:*` on `*` cannot forge an intake
envelope or a run's end (a resource policy's Deny wins over any identity policy's Allow)."""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs

from infra.components.functions import Functions


def own_roles(functions: Functions) -> list[str]:
    """The role ARNs of every function of the deployment."""
    return [function.role.role_arn for function in functions.all() if function.role is not None]


def _deny_all_but(sid: str, action: str, resource: str, **unless: dict[str, object]) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=sid,
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=[action],
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
