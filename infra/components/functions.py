"""The Lambda functions (dispatcher, a worker per class, heartbeat, escalation, pages, API, rotation) and
what each may touch."""

from __future__ import annotations

import json

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.components.common import (
    ESCALATION_TIMEOUT,
    INTAKE_TIMEOUT,
    LOG_RETENTION,
    PAGES_TIMEOUT,
    WORKER_TIMEOUT,
    lambda_code,
    resource_name,
    work_end_rule,
)
from infra.components.console_functions import FunctionWiring, add_console
from infra.components.queues import Queues
from infra.components.storage import Storage
from infra.components.target_role import TargetRole
from infra.components.waivers import (
    DLQ_QUEUE_SOURCE,
    DLQ_ROTATION,
    DLQ_SYNCHRONOUS,
    DLQ_TICK,
    NO_VPC,
    UNRESERVED_WORKER,
    waive,
)
from infra.config import StageConfig
from jobsched.core.events import container_rule_patterns
from jobsched.core.names import (
    INTAKE_CONCURRENCY,
    PRIORITIES,
    PROJECT,
    SYSTEM_INTAKE_CONCURRENCY,
    WORKER_BATCH,
    Env,
)
from jobsched.watch.signals import NAMESPACE

ESCALATION_CONCURRENCY = 2  # the escalation and pages event sources' maximum, and the functions' reserve

# The functions whose lines belong to a run (dispatcher: the instants sent; the rest: the run's keys).
RUN_LOG_FUNCTIONS = ("Dispatcher", "Worker", "Escalation", "Pages", "Api", "ConsoleActions")


class Functions(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        storage: Storage,
        queues: Queues,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = key
        self.log_groups: dict[str, logs.LogGroup] = {}
        self.code = lambda_code(config)
        environment = {
            **storage.environment(),
            Env.ESCALATION_QUEUE: queues.escalations.queue_url,
            Env.STAGE: config.stage,
            Env.TEAM_LIMITS: json.dumps(config.team_limits.as_dict(), sort_keys=True),
            Env.SLO_TIERS: json.dumps(config.slo_tiers.as_dict(), sort_keys=True),
            Env.ORG_POLICY: config.org_policy.model_dump_json(exclude_defaults=True),
            Env.ZERO_METRICS: "on" if config.zero_metrics else "off",
            Env.DUE_SHARDS: str(config.burst.due_shards),
            **(
                {Env.WORK_QUEUE_SHARDS: json.dumps({p: [q.queue_url for q in queues.shards[p]] for p in PRIORITIES})}
                if config.burst.work_queues > 1
                else {}
            ),
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            **({Env.EGRESS_ALLOW: ",".join(config.egress_allow)} if config.egress_allow else {}),
            **{Env.QUEUES_BY_PRIORITY[p]: queues.work[p].queue_url for p in PRIORITIES},
        }
        # One invocation per part of the tick (two, so a slow tick never blocks the next), and a storm of
        # ticks cannot multiply reads.
        self.dispatcher_reserved = 2 * config.burst.dispatchers
        self.dispatcher = self.function(
            "Dispatcher",
            "functions.dispatcher.handler.handler",
            config,
            environment,
            Duration.seconds(60),
            config.burst.dispatcher_memory,
            invoked=DLQ_TICK,
            reserved=self.dispatcher_reserved,
        )
        self.worker = self.function(
            "Worker",
            "functions.worker.handler.handler",
            config,
            environment,
            WORKER_TIMEOUT,
            config.burst.worker_memory,
            invoked=DLQ_QUEUE_SOURCE,
            reserved=None,
        )
        # The watchers keep a little concurrency of their own, so a burst of runs that takes the account's
        # whole pool cannot stop timeouts, escalations and pages (two: a tick and a slow one before it).
        self.heartbeat = self.function(
            "Heartbeat",
            "functions.heartbeat.handler.handler",
            config,
            environment,
            Duration.seconds(60),
            256,
            invoked=DLQ_TICK,
            reserved=2,
        )
        self.api = self.function(
            "Api",
            "functions.api.handler.handler",
            config,
            environment | {Env.MEMBERSHIP_PARAMETER: f"/{PROJECT}/{config.stage}/membership"},
            Duration.seconds(29),
            512,
            invoked=DLQ_SYNCHRONOUS,
            reserved=config.api_reserved_concurrency,  # a burst of API calls cannot starve the worker
        )
        wiring = FunctionWiring(config, environment, storage, queues)
        self._add_console(wiring)
        # Pages: incidents on the jobs table, SNS topics and webhooks out. One batch at a time per shard of
        # events is plenty; incident writes for one job serialize on their version anyway.
        self.escalation = self.function(
            "Escalation",
            "functions.escalation.handler.handler",
            config,
            environment,
            ESCALATION_TIMEOUT,
            256,
            invoked=DLQ_QUEUE_SOURCE,
            reserved=ESCALATION_CONCURRENCY,
        )
        self.escalation.add_event_source(
            sources.SqsEventSource(
                queues.escalations,
                batch_size=10,
                report_batch_item_failures=True,
                max_concurrency=ESCALATION_CONCURRENCY,
            )
        )
        storage.grant_jobs(self.escalation)
        self.escalation.add_environment(Env.PAGES_QUEUE, queues.pages.queue_url)
        queues.pages.grant_send_messages(self.escalation)
        # Delivery on its own queue and function: a dead webhook never slows incident handling.
        self.pages = self.function(
            "Pages",
            "functions.pages.handler.handler",
            config,
            environment,
            PAGES_TIMEOUT,
            256,
            invoked=DLQ_QUEUE_SOURCE,
            reserved=ESCALATION_CONCURRENCY,
        )
        self.pages.add_environment(Env.PAGES_QUEUE, queues.pages.queue_url)
        self.pages.add_event_source(
            sources.SqsEventSource(
                queues.pages, batch_size=10, report_batch_item_failures=True, max_concurrency=ESCALATION_CONCURRENCY
            )
        )
        log_groups = ",".join(
            f"/aws/lambda/{resource_name(config, name)}" for name in ("Worker", "Dispatcher", "Heartbeat", "Api")
        )
        for function in (self.dispatcher, self.worker, self.api, self.heartbeat):
            storage.grant_jobs(function)
            storage.grant_runs(function)
            queues.escalations.grant_send_messages(function)
        # jobsched dlq: the API reads the work and escalation dead-letter queues and redrives them (sends again
        # through the work and escalation queues, which it may send to already).
        dead_letters = {f"work-{p}": queues.dead[p] for p in PRIORITIES} | {"escalations": queues.escalation_dead}
        for dead in dead_letters.values():
            dead.grant_consume_messages(self.api)
        self.api.add_environment(
            Env.DEAD_LETTER_QUEUES, json.dumps({name: dead.queue_url for name, dead in dead_letters.items()})
        )
        self.escalation.add_environment(Env.LOG_GROUPS, log_groups)
        for priority in PRIORITIES:
            for queue in queues.shards[priority]:
                for function in (self.dispatcher, self.worker, self.api, self.heartbeat):
                    queue.grant_send_messages(function)
                # Its backlog (ApproximateNumberOfMessages) says how long the lost-message audit waits.
                queue.grant(self.dispatcher, "sqs:GetQueueAttributes")
                self.worker.add_event_source(
                    sources.SqsEventSource(
                        queue,
                        batch_size=WORKER_BATCH,
                        report_batch_item_failures=True,
                        max_concurrency=config.burst.max_concurrency(priority),
                    )
                )
        self._event_intake(wiring)
        # Team resources (targets, secrets, escalation topics) only through the team's session of this role.
        self.target_role = TargetRole(
            self,
            "Targets",
            config=config,
            # The console's actions: its drill button pages a team's topics and webhooks as that team.
            callers=(self.worker, self.api, self.pages, self.heartbeat, self.events, self.console_actions),
        )
        # Who may act for which team: admins edit this parameter (README, "Granting teams access").
        self.membership = ssm.StringParameter(
            self,
            "Membership",
            parameter_name=f"/{PROJECT}/{config.stage}/membership",
            string_value=json.dumps(config.membership),
            description="jobsched: principal ARN patterns -> teams, and platform admins",
        )
        self.membership.grant_read(self.api)
        # The platform's grants by name: the worker checks a kubernetes target's namespace and service account,
        # the intake an event's source on the shared bus, against them.
        for reader in (self.worker, self.events):
            self.membership.grant_read(reader)
            reader.add_environment(Env.MEMBERSHIP_PARAMETER, self.membership.parameter_name)
        # Teams from role tags (membership "team_tag"): reading a caller's role tags, nothing more.
        self.api.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:ListRoleTags"],
                resources=[Stack.of(self).format_arn(service="iam", region="", resource="role", resource_name="*")],
            )
        )
        self.callback_secret = secretsmanager.Secret(
            self,
            "CallbackSecret",
            secret_name=f"{PROJECT}/{config.stage}/callback-signing",
            generate_secret_string=secretsmanager.SecretStringGenerator(exclude_punctuation=True, password_length=48),
            encryption_key=key,
            # Losing it in prod would void every callback token in flight.
            removal_policy=RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY,
        )
        self.callback_secret.grant_read(self.api)
        self.callback_secret.grant_read(self.worker)  # it signs the tokens it hands to container tasks
        # Rotated monthly; the previous version keeps verifying tokens issued before (jobsched.api.tokens).
        self.rotation = self.function(
            "Rotation",
            "functions.rotation.handler.handler",
            config,
            {},
            Duration.seconds(30),
            128,
            invoked=DLQ_ROTATION,
            reserved=1,  # one secret, rotated monthly
        )
        self.callback_secret.add_rotation_schedule(
            "Rotation", rotation_lambda=self.rotation, automatically_after=Duration.days(30)
        )
        # CDK lets secretsmanager.amazonaws.com invoke the rotation for any account's secret: only ours.
        for child in self.rotation.node.children:
            if isinstance(child, lambda_.CfnPermission):
                child.source_account = Stack.of(self).account
        self.api.add_environment(Env.CALLBACK_SECRET_NAME, self.callback_secret.secret_name)
        self.worker.add_environment(Env.CALLBACK_SECRET_NAME, self.callback_secret.secret_name)
        self._grant_run_logs(config)

    def _add_console(self, wiring: FunctionWiring) -> None:
        console = add_console(self, wiring)
        self.console, self.console_actions, self.console_audit = console.widget, console.actions, console.audit
        self.console_aliases, self.console_widget_aliases = console.action_aliases, console.widget_aliases
        self.console_user, self.console_oncall = console.user_policy, console.oncall_policy

    def _event_intake(self, wiring: FunctionWiring) -> None:
        """Runs started by events: the API keeps one EventBridge rule per trigger (named under the stage's
        prefix), the rules send matched events to the intake queue, and the Events function makes them runs.
        Every function that can end a run puts "Run Finished" on the default bus."""
        config, environment, storage, queues = wiring.config, wiring.environment, wiring.storage, wiring.queues
        stack = Stack.of(self)
        self.events = self.function(
            "Events",
            "functions.events.handler.handler",
            config,
            environment,
            INTAKE_TIMEOUT,
            256,
            invoked=DLQ_QUEUE_SOURCE,
            reserved=INTAKE_CONCURRENCY + SYSTEM_INTAKE_CONCURRENCY,  # a storm on one never starves the other
        )
        for source, most in ((queues.intake, INTAKE_CONCURRENCY), (queues.system_intake, SYSTEM_INTAKE_CONCURRENCY)):
            self.events.add_event_source(
                sources.SqsEventSource(source, batch_size=10, report_batch_item_failures=True, max_concurrency=most)
            )
        storage.grant_jobs(self.events)
        storage.grant_runs(self.events)
        # A container's end reaches the run here, and a run that ends failed is escalated (found by make iam).
        queues.escalations.grant_send_messages(self.events)
        for priority in PRIORITIES:
            for queue in queues.shards[priority]:
                queue.grant_send_messages(self.events)
        rule_prefix = f"{PROJECT}-{config.stage}-"
        rules = [
            stack.format_arn(service="events", resource="rule", resource_name=f"{rule_prefix}*"),
            stack.format_arn(service="events", resource="rule", resource_name=f"*/{rule_prefix}*"),
        ]
        self.api.add_environment(Env.INTAKE_QUEUE_ARN, queues.intake.queue_arn)
        self.api.add_environment(Env.SYSTEM_INTAKE_QUEUE_ARN, queues.system_intake.queue_arn)
        self.api.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "events:PutRule",
                    "events:PutTargets",
                    "events:RemoveTargets",
                    "events:DeleteRule",
                    "events:DescribeRule",
                    "events:TagResource",
                    "events:ListRules",
                ],
                resources=rules,
            )
        )
        # Only rules under the stage's prefix may send to the intake queue (through the stack's key).
        from_rules = {"ArnLike": {"aws:SourceArn": rules}}
        for queue in (queues.intake, queues.system_intake):
            queue.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("events.amazonaws.com")],
                    actions=["sqs:SendMessage"],
                    resources=[queue.queue_arn],
                    conditions=from_rules,
                )
            )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=["*"],
                conditions=from_rules,
            )
        )
        # Container runs end by their work's state change: one rule a kind for the deployment (ECS tasks the
        # scheduler started carry a startedBy under the container prefix, Batch jobs a name under it), named
        # under the stage's prefix like the triggers' rules, so the queue's policy admits them.
        for name, pattern in container_rule_patterns().items():
            work_end_rule(
                self,
                "".join(part.title() for part in name.split("-")),  # ContainerStateChanges, BatchStateChanges
                name=f"{rule_prefix}{name}",
                description=f"jobsched: {pattern['detail-type'][0]} of work this deployment started -> the intake",
                pattern=pattern,
                intake_arn=queues.system_intake.queue_arn,
            )
        # The deployment's bus: "Run Finished" of every run, put only by jobsched's functions (a team cannot
        # forge one there), for teams' rules to build on.
        self.runs_bus = events.EventBus(self, "RunsBus", event_bus_name=resource_name(config, "runs"))
        for function in (self.dispatcher, self.worker, self.api, self.heartbeat, self.console_actions, self.events):
            self.runs_bus.grant_put_events_to(function)
            function.add_environment(Env.EVENT_BUS, self.runs_bus.event_bus_name)

    def _grant_run_logs(self, config: StageConfig) -> None:
        """`jobsched logs`: the API runs a Logs Insights query over the groups a run's lines are in."""
        groups = [self.log_groups[name] for name in RUN_LOG_FUNCTIONS]
        self.api.add_environment(
            Env.LOG_GROUPS, ",".join(f"/aws/lambda/{resource_name(config, name)}" for name in RUN_LOG_FUNCTIONS)
        )
        self.api.add_to_role_policy(
            iam.PolicyStatement(actions=["logs:StartQuery"], resources=[group.log_group_arn for group in groups])
        )
        # GetQueryResults and StopQuery take a query id, not a resource.
        self.api.add_to_role_policy(
            iam.PolicyStatement(actions=["logs:GetQueryResults", "logs:StopQuery"], resources=["*"])
        )

    def function(
        self,
        name: str,
        handler: str,
        config: StageConfig,
        environment: dict[str, str],
        timeout: Duration,
        memory: int,
        *,
        invoked: tuple[str, str],
        reserved: int | None,
    ) -> lambda_.Function:
        """A function with its own log group, both encrypted with the stack's key. ``invoked`` says why it has no
        dead-letter queue of its own (how it is invoked); ``reserved`` is its reserved concurrency (None: bounded
        by its event sources instead, see waivers.UNRESERVED_WORKER)."""
        log_group = logs.LogGroup(
            self,
            f"{name}Logs",
            log_group_name=f"/aws/lambda/{resource_name(config, name)}",
            retention=LOG_RETENTION,
            encryption_key=self.key,
            removal_policy=RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY,
        )
        function = lambda_.Function(
            self,
            name,
            function_name=resource_name(config, name),
            runtime=lambda_.Runtime.PYTHON_3_13,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=self.code,
            environment={**environment, "POWERTOOLS_SERVICE_NAME": f"jobsched-{name.lower()}"},
            timeout=timeout,
            memory_size=memory,
            tracing=lambda_.Tracing.ACTIVE if config.tracing else lambda_.Tracing.DISABLED,
            logging_format=lambda_.LoggingFormat.JSON,
            log_group=log_group,
            environment_encryption=self.key,
            reserved_concurrent_executions=reserved,
        )
        self.key.grant_decrypt(function)  # its environment variables
        waive(function, NO_VPC, invoked, *(() if reserved else (UNRESERVED_WORKER,)))
        self.log_groups[name] = log_group
        return function

    def all(self) -> list[lambda_.Function]:
        """Every function of the deployment (each has a log group of its own, by name)."""
        return [child for child in self.node.children if isinstance(child, lambda_.Function)]
