"""The console's functions: a widget that only reads, an actions function reached only through a team's alias, and
the audit function that names who pressed a button. Built in the ``Functions`` construct's scope (their logical
ids are those they had when ``Functions`` built them itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudtrail as cloudtrail
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from infra.components.common import resource_name
from infra.components.queues import Queues
from infra.components.storage import Storage
from infra.components.waivers import DLQ_CLOUDTRAIL, DLQ_SYNCHRONOUS
from infra.config import StageConfig
from jobsched.console.actions import CONSOLE_ALIAS_PREFIX
from jobsched.console.widget import ONCALL_ALIAS, PLACEHOLDER_ALIAS
from jobsched.core.changes import resource_change_pattern
from jobsched.core.names import OWNER_TAG, PRIORITIES, Env

if TYPE_CHECKING:
    from infra.components.functions import Functions

# Dashboards refreshing and people pressing buttons cannot take the concurrency runs need (like the API's).
CONSOLE_CONCURRENCY = 10
CONSOLE_ACTIONS_CONCURRENCY = 5


@dataclass(frozen=True)
class FunctionWiring:
    """What every function of the stage is built with: the stage, its environment, the tables and the queues."""

    config: StageConfig
    environment: dict[str, str]
    storage: Storage
    queues: Queues


@dataclass(frozen=True)
class Console:
    widget: lambda_.Function
    actions: lambda_.Function
    audit: lambda_.Function
    action_aliases: dict[str, lambda_.Alias]  # team -> its alias of the actions function
    widget_aliases: dict[str, lambda_.Alias]
    user_policy: iam.ManagedPolicy
    oncall_policy: iam.ManagedPolicy


def add_console(functions: Functions, wiring: FunctionWiring) -> Console:
    """The console: a widget function that only reads, and an actions function reached only through a
    team's alias (``team-NAME``, one per team in CDK ``console_teams``). Lambda is not told who invoked
    it, so the alias is the authority: the function acts only for its alias's team, and IAM decides who
    may invoke which alias (the ``console-user`` policy below: the caller's own jobsched-team tag)."""
    config, storage, queues = wiring.config, wiring.storage, wiring.queues
    actions = functions.function(
        "ConsoleActions",
        "functions.console_actions.handler.handler",
        config,
        wiring.environment,
        Duration.seconds(15),
        256,
        invoked=DLQ_SYNCHRONOUS,
        reserved=CONSOLE_ACTIONS_CONCURRENCY,
    )
    storage.grant_jobs(actions)
    storage.grant_runs(actions)
    queues.escalations.grant_send_messages(actions)  # an approval's decision resolves its page
    for priority in PRIORITIES:
        for queue in queues.shards[priority]:
            queue.grant_send_messages(actions)
    version = actions.current_version
    action_aliases = {
        team: lambda_.Alias(
            functions, f"ConsoleTeam-{team}", alias_name=f"{CONSOLE_ALIAS_PREFIX}{team}", version=version
        )
        for team in config.console_teams
    }
    widget = functions.function(
        "Console",
        "functions.console.handler.handler",
        config,
        wiring.environment
        | {
            Env.CONSOLE_ACTIONS: actions.function_arn,
            Env.CONSOLE_TEAMS: ",".join(config.console_teams),
        },
        Duration.seconds(30),
        512,
        invoked=DLQ_SYNCHRONOUS,
        reserved=CONSOLE_CONCURRENCY,
    )
    storage.grant_jobs(widget, write=False)
    storage.grant_runs(widget, write=False)
    # The widget shows what the alias it is invoked through allows (jobsched.console.widget): a team's
    # own jobs, or every team for the on-call; the placeholder alias only asks for a team to be typed.
    widget_version = widget.current_version
    widget_aliases = {
        name: lambda_.Alias(functions, f"ConsoleWidget-{name}", alias_name=name, version=widget_version)
        for name in (
            *(f"{CONSOLE_ALIAS_PREFIX}{team}" for team in config.console_teams),
            PLACEHOLDER_ALIAS,
            ONCALL_ALIAS,
        )
    }
    audit = _console_audit(functions, wiring, actions)
    tag = f"${{aws:PrincipalTag/{OWNER_TAG}}}"
    user_policy = _invoke_policy(
        functions,
        config,
        ("ConsoleUser", "console-user"),
        "jobsched console: see and act for the team in the caller's jobsched-team tag only",
        [
            f"{widget.function_arn}:{CONSOLE_ALIAS_PREFIX}{tag}",
            f"{widget.function_arn}:{PLACEHOLDER_ALIAS}",
            f"{actions.function_arn}:{CONSOLE_ALIAS_PREFIX}{tag}",
        ],
    )
    oncall_policy = _invoke_policy(
        functions,
        config,
        ("ConsoleOncall", "console-oncall"),
        "jobsched console: see every team's jobs and the open incidents across teams (read only)",
        [f"{widget.function_arn}:{ONCALL_ALIAS}"],
    )
    return Console(widget, actions, audit, action_aliases, widget_aliases, user_policy, oncall_policy)


def _invoke_policy(
    functions: Functions, config: StageConfig, names: tuple[str, str], description: str, aliases: list[str]
) -> iam.ManagedPolicy:
    """A managed policy for people: invoking these aliases of the console's functions, nothing more. ``names``:
    its logical id and its name in the stage."""
    logical_id, name = names
    return iam.ManagedPolicy(
        functions,
        logical_id,
        managed_policy_name=resource_name(config, name),
        description=description,
        statements=[iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=aliases)],
    )


def _console_audit(functions: Functions, wiring: FunctionWiring, actions: lambda_.Function) -> lambda_.Function:
    """Who pressed a console button: CloudTrail records each invocation of the actions function (a Lambda
    data event) with the caller; EventBridge hands the record to a function that names that caller on
    the job's audit entry. The stage's own trail logs only these data events (``console_trail``; off
    when an existing trail already logs them)."""
    config = wiring.config
    audit = functions.function(
        "ConsoleAudit",
        "functions.console_audit.handler.handler",
        config,
        wiring.environment,
        Duration.seconds(15),
        128,
        invoked=DLQ_CLOUDTRAIL,
        reserved=2,
    )
    wiring.storage.grant_jobs(audit)
    events.Rule(
        functions,
        "ConsoleInvocations",
        rule_name=resource_name(config, "ConsoleInvocations"),
        description="jobsched: CloudTrail's record of each console action, to name who pressed the button",
        event_pattern=events.EventPattern(
            source=["aws.lambda"],
            detail_type=["AWS API Call via CloudTrail"],
            detail={
                "eventSource": ["lambda.amazonaws.com"],
                "eventName": ["Invoke"],
                # CloudTrail names the function as the caller did: by ARN or by name, with the alias.
                "requestParameters": {
                    "functionName": [
                        {"prefix": actions.function_arn},
                        {"prefix": actions.function_name},
                    ]
                },
            },
        ),
        targets=[targets.LambdaFunction(audit, retry_attempts=8)],
    )
    # A team's change history shows changes to the secrets its jobs name and to the targets' role, from the
    # account's trail (write management events; IAM's arrive in us-east-1 only, as for every global service).
    events.Rule(
        functions,
        "ResourceChanges",
        rule_name=resource_name(config, "ResourceChanges"),
        description="jobsched: CloudTrail's record of a change to a secret or an IAM role, for change histories",
        event_pattern=events.EventPattern(**resource_change_pattern()),
        targets=[targets.LambdaFunction(audit, retry_attempts=8)],
    )
    if config.console_trail and config.console_teams:
        trail = cloudtrail.Trail(
            functions,
            "ConsoleTrail",
            trail_name=resource_name(config, "console-actions"),
            management_events=cloudtrail.ReadWriteType.NONE,
            is_multi_region_trail=False,
            include_global_service_events=False,
            send_to_cloud_watch_logs=False,
        )
        trail.add_lambda_event_selector([actions], include_management_events=False)
    return audit
