"""The jobsched stack: one per account and region, a construct per concern.

Names, keys, indexes, queues and environment variables come from ``jobsched.core.names``: the handlers,
the tests and the local runtime read the same module, so nothing here can drift from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import (
    Acknowledgment,
    ArnFormat,
    CfnOutput,
    Duration,
    RemovalPolicy,
    Stack,
    Tags,
    Token,
    Validations,
)
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as event_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from jobsched.api.identity import MEMBERSHIP_PARAMETER_ENV
from jobsched.api.tokens import SECRET_NAME_ENV as CALLBACK_SECRET_NAME_ENV
from jobsched.core.names import (
    DUE_SHARDS,
    JOB_TAG,
    JOBS_TABLE,
    LOCAL_STAGE,
    MAX_DISPATCHERS,
    MAX_DUE_SHARDS,
    MAX_WORK_QUEUES,
    OWNER_TAG,
    PRIORITIES,
    PROJECT,
    RUNS_TABLE,
    SHARED_TAG,
    WORK_QUEUES,
    Env,
    TableDefinition,
    physical_name,
    reserved_prefixes,
    state_machine_prefix,
)
from jobsched.tenancy.quotas import TeamLimits
from jobsched.watch.signals import CATALOG, NAMESPACE

WORKER_TIMEOUT = Duration.minutes(15)
ESCALATION_TIMEOUT = Duration.seconds(60)
PAGES_TIMEOUT = Duration.seconds(30)  # a batch of pages, delivered concurrently, each within its webhook timeout
LOG_RETENTION = logs.RetentionDays.ONE_MONTH
SLO_SUCCESS = 0.995  # error budget 0.5%: burn-rate alarms page when it is spent 14.4x (1 h) or 6x (6 h) too fast


# Logs Insights over the worker's "run message" lines (functions/worker/handler.py logs job, team, run_id,
# outcome and detail on each): tests check those fields are really there.
TOP_FAILING_JOBS = (
    "fields job, team, outcome",
    'filter message = "run message" and outcome = "failed"',
    "stats count(*) as failures by job, team",
    "sort failures desc",
    "limit 10",
)
LATEST_FAILURES = (
    "fields @timestamp, job, run_id, attempt, detail",
    'filter message = "run message" and outcome = "failed"',
    "sort @timestamp desc",
    "limit 20",
)


@dataclass(frozen=True)
class TableCapacity:
    """Provisioned DynamoDB capacity for a big deployment (CDK context ``dynamodb_capacity``), per table and
    per index, scaled between ``min`` and ``max`` units to keep ``target_utilization`` percent busy. On demand
    (no context) costs about twice as much per run at steady load and needs no sizing; provisioned needs the
    peak minute's write units (``jobsched capacity`` is the sizing tool #15 asks for)."""

    read_min: int = 5
    read_max: int = 4000
    write_min: int = 5
    write_max: int = 4000
    target_utilization: int = 70

    @classmethod
    def from_context(cls, value: Any) -> TableCapacity | None:
        """-c dynamodb_capacity='{"write": {"min": 50, "max": 20000}, "target_utilization": 70}'; refused at
        synth when malformed."""
        if value is None:
            return None
        raw = json.loads(value) if isinstance(value, str) else dict(value)
        unknown = set(raw) - {"read", "write", "target_utilization"}
        if unknown:
            raise ValueError(
                f"dynamodb_capacity: unknown keys {sorted(unknown)} (allowed: read, write, target_utilization)"
            )
        read, write = dict(raw.get("read") or {}), dict(raw.get("write") or {})
        capacity = cls(
            read_min=int(read.get("min", cls.read_min)),
            read_max=int(read.get("max", cls.read_max)),
            write_min=int(write.get("min", cls.write_min)),
            write_max=int(write.get("max", cls.write_max)),
            target_utilization=int(raw.get("target_utilization", cls.target_utilization)),
        )
        if not (1 <= capacity.read_min <= capacity.read_max and 1 <= capacity.write_min <= capacity.write_max):
            raise ValueError("dynamodb_capacity: need 1 <= min <= max for read and write")
        if not 20 <= capacity.target_utilization <= 90:
            raise ValueError("dynamodb_capacity: target_utilization is a percentage between 20 and 90")
        return capacity


@dataclass(frozen=True)
class BurstConfig:
    """What a deployment sized for bursts sets (README "Sizing for a burst"; ``jobsched capacity`` suggests
    the values for a directory of job files):

    - ``dispatchers``: parallel dispatcher invocations per tick, each reading ``due_shards / dispatchers``
      shards of the due index;
    - ``due_shards``: the due index's shard count; may only grow (see ``names.due_shard_count``);
    - ``warm_throughput``: DynamoDB warm throughput for both tables (reads and writes per second the tables
      serve at once, instead of on demand's doubling from the previous peak);
    - ``worker_concurrency``: the event sources' maximum concurrency per priority class (2-1000 each);
    - ``work_queues``: work queues per priority class (1-16), each with its own event source: a burst scales
      that many event sources side by side (``worker_concurrency`` then applies to each);
    - ``dispatcher_memory`` / ``worker_memory``: MB (128-10240). Lambda gives CPU in proportion, one full
      vCPU at 1,769 MB; the defaults (512 / 256) suit a small deployment, a burst wants the full vCPU.
    """

    dispatchers: int = 1
    due_shards: int = DUE_SHARDS
    warm_reads: int | None = None
    warm_writes: int | None = None
    worker_concurrency: tuple[tuple[str, int], ...] = ()
    dispatcher_memory: int = 512
    worker_memory: int = 256
    work_queues: int = 1

    @classmethod
    def from_context(cls, node: Any) -> BurstConfig:
        """-c dispatchers=8 -c due_shards=64 -c warm_throughput='{"reads": 12000, "writes": 40000}'
        -c worker_concurrency='{"normal": 500}'; refused at synth when out of range."""
        dispatchers = int(node.try_get_context("dispatchers") or 1)
        due_shards = int(node.try_get_context("due_shards") or DUE_SHARDS)
        if not 1 <= dispatchers <= MAX_DISPATCHERS:
            raise ValueError(f"dispatchers: 1 to {MAX_DISPATCHERS}")
        if not DUE_SHARDS <= due_shards <= MAX_DUE_SHARDS or due_shards < dispatchers:
            raise ValueError(f"due_shards: {DUE_SHARDS} to {MAX_DUE_SHARDS}, and at least dispatchers")
        warm = _json_context(node.try_get_context("warm_throughput"))
        if set(warm) - {"reads", "writes"}:
            raise ValueError("warm_throughput: keys reads and writes (units per second)")
        concurrency = {str(k): int(v) for k, v in _json_context(node.try_get_context("worker_concurrency")).items()}
        if set(concurrency) - set(PRIORITIES) or any(not 2 <= v <= 1000 for v in concurrency.values()):
            raise ValueError(f"worker_concurrency: per class of {list(PRIORITIES)}, 2 to 1000 each")
        memory = {
            name: int(node.try_get_context(name) or default)
            for name, default in (("dispatcher_memory", cls.dispatcher_memory), ("worker_memory", cls.worker_memory))
        }
        for name, value in memory.items():
            if not 128 <= value <= 10240:
                raise ValueError(f"{name}: 128 to 10240 MB")
        work_queues = int(node.try_get_context("work_queues") or 1)
        if not 1 <= work_queues <= MAX_WORK_QUEUES:
            raise ValueError(f"work_queues: 1 to {MAX_WORK_QUEUES} per priority class")
        return cls(
            **memory,
            work_queues=work_queues,
            dispatchers=dispatchers,
            due_shards=due_shards,
            warm_reads=int(warm["reads"]) if "reads" in warm else None,
            warm_writes=int(warm["writes"]) if "writes" in warm else None,
            worker_concurrency=tuple(sorted(concurrency.items())),
        )

    def max_concurrency(self, priority: str) -> int:
        return dict(self.worker_concurrency).get(priority, WORK_QUEUES[priority].max_concurrency)


@dataclass(frozen=True)
class StageConfig:
    stage: str
    prod: bool
    examples: bool
    asset_dir: str | None  # built by scripts/build_asset.py; None: stub code (tests, offline synth)
    membership: dict[str, Any] = field(default_factory=dict)
    api_rate_limit: int = 100
    api_burst_limit: int = 200
    lateness_p99_threshold_seconds: float = 5.0
    egress_allow: tuple[str, ...] = ()  # hosts or CIDRs outbound HTTP may reach despite the deny-list
    api_reserved_concurrency: int = 20  # a burst of API calls cannot take the concurrency runs need
    waf: bool = False  # a web ACL on the API (rate per source IP, body size); on by default in prod
    waf_rate_per_5_minutes: int = 3000
    team_limits: TeamLimits = field(default_factory=TeamLimits)  # every team's defaults (jobsched.tenancy.quotas)
    capacity: TableCapacity | None = None  # None: on demand; else provisioned with auto scaling
    # What an idle non-prod stage need not pay for (scripts/idle_cost.py): on by default in prod and locally.
    dashboards: bool = True  # three dashboards, $3 each a month
    zero_metrics: bool = True  # publish zero counts each tick (13 custom metrics, $0.30 each a month idle)
    tracing: bool = True  # X-Ray on every function and the API
    burst: BurstConfig = field(default_factory=BurstConfig)

    @classmethod
    def from_context(cls, scope: Construct) -> StageConfig:
        node = scope.node
        stage = str(node.try_get_context("stage") or "dev")
        prod = stage == "prod"
        examples = node.try_get_context("examples")
        return cls(
            stage=stage,
            prod=prod,
            examples=(not prod) if examples is None else str(examples).lower() == "true",
            asset_dir=node.try_get_context("asset_dir"),
            membership=_membership_context(node.try_get_context("membership")),
            egress_allow=_list_context(node.try_get_context("egress_allow")),
            api_reserved_concurrency=int(node.try_get_context("api_reserved_concurrency") or 20),
            waf=prod if node.try_get_context("waf") is None else str(node.try_get_context("waf")).lower() == "true",
            team_limits=_team_limits_context(node.try_get_context("team_limits")),
            capacity=TableCapacity.from_context(node.try_get_context("dynamodb_capacity")),
            dashboards=_flag(node, "dashboards", default=prod or stage == LOCAL_STAGE),
            zero_metrics=_flag(node, "zero_metrics", default=prod or stage == LOCAL_STAGE),
            tracing=_flag(node, "tracing", default=prod or stage == LOCAL_STAGE),
            burst=BurstConfig.from_context(node),
        )


class JobschedStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        Tags.of(self).add("project", PROJECT)
        Tags.of(self).add("stage", config.stage)
        self.key = kms.Key(self, "Key", enable_key_rotation=True, description="jobsched tables, queues, topics")
        self.storage = Storage(self, "Storage", config=config, key=self.key)
        self.queues = Queues(self, "Queues", config=config, key=self.key)
        self.functions = Functions(
            self, "Functions", config=config, storage=self.storage, queues=self.queues, key=self.key
        )
        self.dispatch = Dispatch(self, "Dispatch", config=config, functions=self.functions)
        self.workflows = Workflows(self, "Workflows", config=config, queues=self.queues, functions=self.functions)
        self.api = Api(self, "Api", config=config, functions=self.functions)
        self.functions.escalation.add_environment(Env.API_URL, self.api.rest_api.url)  # links in pages
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
            Examples(self, "Examples", config=config, code=self.functions.code)
        _acknowledge(self)


def _membership_context(value: Any) -> dict[str, Any]:
    """-c membership='{"admins": [...], ...}' at first deploy; afterwards admins edit the parameter."""
    if value is None:
        return {"admins": [], "teams": {}, "team_patterns": []}
    return json.loads(value) if isinstance(value, str) else dict(value)


def _flag(node: Any, name: str, *, default: bool) -> bool:
    """-c dashboards=true|false; absent: the stage's default."""
    value = node.try_get_context(name)
    return default if value is None else str(value).lower() == "true"


def _team_limits_context(value: Any) -> TeamLimits:
    """-c team_limits='{"max_running": 50}' (or an object in cdk.json): refused at synth when malformed."""
    if value is None:
        return TeamLimits()
    return TeamLimits().with_overrides(json.loads(value) if isinstance(value, str) else dict(value))


def _json_context(value: Any) -> dict[str, Any]:
    """A JSON object given on the command line (a string) or in cdk.json (an object); absent: empty."""
    if value is None:
        return {}
    return dict(json.loads(value) if isinstance(value, str) else value)


def _list_context(value: Any) -> tuple[str, ...]:
    """-c egress_allow='10.1.0.0/16,partner.internal' (or a JSON list in cdk.json)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(item).strip() for item in items if str(item).strip())


def signal(name: str, statistic: str, period: Duration, **dimensions: str) -> cloudwatch.Metric:
    """A metric from the catalog (jobsched.watch.signals), queried with exactly the dimensions it is published with."""
    definition = CATALOG[name]
    if set(dimensions) != set(definition.dimensions):
        raise ValueError(f"{name} is published with dimensions {definition.dimensions}, not {tuple(dimensions)}")
    return cloudwatch.Metric(
        namespace=NAMESPACE, metric_name=name, dimensions_map=dimensions or None, statistic=statistic, period=period
    )


def search_schema(name: str) -> str:
    """The SEARCH schema of a catalog metric, e.g. {jobsched,outcome} MetricName="Pages"."""
    return "{" + ",".join((NAMESPACE, *CATALOG[name].dimensions)) + '} MetricName="' + name + '"'


def _name(config: StageConfig, logical: str) -> str:
    return physical_name(config.stage, logical)


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.jobs = self._table(JOBS_TABLE, config, key)
        self.runs = self._table(RUNS_TABLE, config, key)

    def _table(self, definition: TableDefinition, config: StageConfig, key: kms.IKey) -> dynamodb.Table:
        def attribute(spec: tuple[str, str]) -> dynamodb.Attribute:
            kind = dynamodb.AttributeType.STRING if spec[1] == "S" else dynamodb.AttributeType.NUMBER
            return dynamodb.Attribute(name=spec[0], type=kind)

        capacity = config.capacity
        table = dynamodb.Table(
            self,
            definition.logical_name,
            table_name=_name(config, definition.logical_name),
            partition_key=attribute(definition.partition_key),
            sort_key=attribute(definition.sort_key),
            billing_mode=dynamodb.BillingMode.PROVISIONED if capacity else dynamodb.BillingMode.PAY_PER_REQUEST,
            read_capacity=capacity.read_min if capacity else None,
            write_capacity=capacity.write_min if capacity else None,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=config.prod,
            removal_policy=RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY,
            time_to_live_attribute=definition.ttl_attribute,
        )
        for index in definition.indexes:
            projection = {
                "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
                "INCLUDE": dynamodb.ProjectionType.INCLUDE,
                "ALL": dynamodb.ProjectionType.ALL,
            }[index.projection]
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=attribute(index.partition_key),
                sort_key=attribute(index.sort_key),
                projection_type=projection,
                non_key_attributes=list(index.non_key_attributes) or None,
                read_capacity=capacity.read_min if capacity else None,
                write_capacity=capacity.write_min if capacity else None,
            )
        burst = config.burst
        if burst.warm_reads or burst.warm_writes:
            cfn_table = table.node.default_child
            assert isinstance(cfn_table, dynamodb.CfnTable)
            cfn_table.warm_throughput = dynamodb.CfnTable.WarmThroughputProperty(
                read_units_per_second=burst.warm_reads, write_units_per_second=burst.warm_writes
            )
        if capacity:
            target = capacity.target_utilization
            table.auto_scale_read_capacity(
                min_capacity=capacity.read_min, max_capacity=capacity.read_max
            ).scale_on_utilization(target_utilization_percent=target)
            table.auto_scale_write_capacity(
                min_capacity=capacity.write_min, max_capacity=capacity.write_max
            ).scale_on_utilization(target_utilization_percent=target)
            for index in definition.indexes:
                table.auto_scale_global_secondary_index_read_capacity(
                    index.name, min_capacity=capacity.read_min, max_capacity=capacity.read_max
                ).scale_on_utilization(target_utilization_percent=target)
                table.auto_scale_global_secondary_index_write_capacity(
                    index.name, min_capacity=capacity.write_min, max_capacity=capacity.write_max
                ).scale_on_utilization(target_utilization_percent=target)
        return table


class Queues(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.config, self.key = config, key
        self.work: dict[str, sqs.Queue] = {}
        self.shards: dict[str, list[sqs.Queue]] = {}  # every work queue of a class, the first being ``work``
        self.dead: dict[str, sqs.Queue] = {}
        for priority in PRIORITIES:
            definition = WORK_QUEUES[priority]
            dead = self._queue(f"{definition.logical_name}Dlq", f"{definition.logical_name}-dlq")
            self.dead[priority] = dead
            # The first keeps the name it always had; more (``work_queues``) share the class's dead-letter queue.
            self.shards[priority] = [
                self._queue(
                    f"{definition.logical_name}{suffix}",
                    f"{definition.logical_name}{suffix}",
                    # Longer than six worker timeouts, as Lambda's event source mapping asks.
                    visibility_timeout=Duration.seconds(WORKER_TIMEOUT.to_seconds() * 6),
                    dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=definition.max_receive_count, queue=dead),
                )
                for suffix in ["", *(str(number) for number in range(2, config.burst.work_queues + 1))]
            ]
            self.work[priority] = self.shards[priority][0]
        self.escalation_dead = self._queue("EscalationsDlq", "Escalations-dlq")
        self.escalations = self._queue(
            "Escalations",
            "Escalations",
            visibility_timeout=Duration.seconds(ESCALATION_TIMEOUT.to_seconds() * 6),  # six handler timeouts
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=5, queue=self.escalation_dead),
        )
        # Pages, one message per page and destination. A failed delivery comes back with backoff and,
        # after a few tries, goes to the deployment's topic; only that failing too reaches the DLQ.
        self.pages_dead = self._queue("PagesDlq", "Pages-dlq")
        self.pages = self._queue(
            "Pages",
            "Pages",
            visibility_timeout=Duration.seconds(PAGES_TIMEOUT.to_seconds() * 6),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=10, queue=self.pages_dead),
        )

    def _queue(self, construct_id: str, logical_name: str, **options: Any) -> sqs.Queue:
        """Every queue: our KMS key, TLS only, 14 days to look at what is in it."""
        return sqs.Queue(
            self,
            construct_id,
            queue_name=_name(self.config, logical_name),
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=self.key,
            retention_period=Duration.days(14),
            enforce_ssl=True,
            **options,
        )


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
        self.code = _code(config)
        environment = {
            Env.JOBS_TABLE: storage.jobs.table_name,
            Env.RUNS_TABLE: storage.runs.table_name,
            Env.ESCALATION_QUEUE: queues.escalations.queue_url,
            Env.STAGE: config.stage,
            Env.TEAM_LIMITS: json.dumps(config.team_limits.as_dict(), sort_keys=True),
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
        self.dispatcher = self._function(
            "Dispatcher",
            "functions.dispatcher.handler.handler",
            config,
            environment,
            Duration.seconds(60),
            config.burst.dispatcher_memory,
        )
        # One invocation per part of the tick (two, so a slow tick never blocks the next), and a storm of
        # ticks cannot multiply reads.
        self.dispatcher_reserved = 2 * config.burst.dispatchers
        cfn_dispatcher = self.dispatcher.node.default_child
        assert isinstance(cfn_dispatcher, lambda_.CfnFunction)
        cfn_dispatcher.reserved_concurrent_executions = self.dispatcher_reserved
        self.worker = self._function(
            "Worker",
            "functions.worker.handler.handler",
            config,
            environment,
            WORKER_TIMEOUT,
            config.burst.worker_memory,
        )
        self.heartbeat = self._function(
            "Heartbeat", "functions.heartbeat.handler.handler", config, environment, Duration.seconds(60), 256
        )
        self.api = self._function(
            "Api",
            "functions.api.handler.handler",
            config,
            environment | {MEMBERSHIP_PARAMETER_ENV: f"/{PROJECT}/{config.stage}/membership"},
            Duration.seconds(29),
            512,
        )
        cfn_api = self.api.node.default_child
        assert isinstance(cfn_api, lambda_.CfnFunction)
        cfn_api.reserved_concurrent_executions = config.api_reserved_concurrency
        # Pages: incidents on the jobs table, SNS topics and webhooks out. One batch at a time per shard of
        # events is plenty; incident writes for one job serialize on their version anyway.
        self.escalation = self._function(
            "Escalation", "functions.escalation.handler.handler", config, environment, ESCALATION_TIMEOUT, 256
        )
        self.escalation.add_event_source(
            sources.SqsEventSource(
                queues.escalations, batch_size=10, report_batch_item_failures=True, max_concurrency=2
            )
        )
        storage.jobs.grant_read_write_data(self.escalation)
        self.escalation.add_environment(Env.PAGES_QUEUE, queues.pages.queue_url)
        queues.pages.grant_send_messages(self.escalation)
        # Delivery on its own queue and function: a dead webhook never slows incident handling.
        self.pages = self._function("Pages", "functions.pages.handler.handler", config, environment, PAGES_TIMEOUT, 256)
        self.pages.add_environment(Env.PAGES_QUEUE, queues.pages.queue_url)
        self.pages.add_event_source(
            sources.SqsEventSource(queues.pages, batch_size=10, report_batch_item_failures=True, max_concurrency=2)
        )
        log_groups = ",".join(
            f"/aws/lambda/{_name(config, name)}" for name in ("Worker", "Dispatcher", "Heartbeat", "Api")
        )
        for function in (self.dispatcher, self.worker, self.api, self.heartbeat):
            storage.jobs.grant_read_write_data(function)
            storage.runs.grant_read_write_data(function)
            queues.escalations.grant_send_messages(function)
        self.escalation.add_environment(Env.LOG_GROUPS, log_groups)
        for priority in PRIORITIES:
            for queue in queues.shards[priority]:
                for function in (self.dispatcher, self.worker, self.api, self.heartbeat):
                    queue.grant_send_messages(function)
                self.worker.add_event_source(
                    sources.SqsEventSource(
                        queue,
                        batch_size=10,
                        report_batch_item_failures=True,
                        max_concurrency=config.burst.max_concurrency(priority),
                    )
                )
        # Team resources (targets, secrets, escalation topics) only through the team's session of this role.
        self.target_role = TargetRole(
            self, "Targets", config=config, callers=(self.worker, self.api, self.pages, self.heartbeat)
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
        )
        self.callback_secret.grant_read(self.api)
        # Rotated monthly; the previous version keeps verifying tokens issued before (jobsched.api.tokens).
        self.rotation = self._function(
            "Rotation", "functions.rotation.handler.handler", config, {}, Duration.seconds(30), 128
        )
        self.callback_secret.add_rotation_schedule(
            "Rotation", rotation_lambda=self.rotation, automatically_after=Duration.days(30)
        )
        self.api.add_environment(CALLBACK_SECRET_NAME_ENV, self.callback_secret.secret_name)

    def _function(
        self, name: str, handler: str, config: StageConfig, environment: dict[str, str], timeout: Duration, memory: int
    ) -> lambda_.Function:
        log_group = logs.LogGroup(
            self,
            f"{name}Logs",
            log_group_name=f"/aws/lambda/{_name(config, name)}",
            retention=LOG_RETENTION,
            removal_policy=RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY,
        )
        return lambda_.Function(
            self,
            name,
            function_name=_name(config, name),
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
        )


def _colon() -> Any:
    from aws_cdk import ArnFormat

    return ArnFormat.COLON_RESOURCE_NAME


def _code(config: StageConfig) -> lambda_.Code:
    """The asset holding functions/, shared/ and the pinned dependencies (scripts/build_asset.py);
    without one (tests, offline synth) a stub, so synthesis needs no bundling."""
    if config.asset_dir:
        path = Path(config.asset_dir)
        if not (path / "jobsched").is_dir() or not (path / "functions").is_dir():
            raise ValueError(f"{path} is not a built asset: run scripts/build_asset.py")
        return lambda_.Code.from_asset(str(path))
    return lambda_.Code.from_inline("def handler(event, context):\n    raise RuntimeError('stub: build the asset')\n")


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
            role_name=_name(config, "targets"),
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
                service=service, resource=resource, resource_name=name, arn_format=_colon() if colon else None
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
        for actions, resource in (
            (["secretsmanager:GetSecretValue"], arn("secretsmanager", "secret", "*", colon=True)),
            (["ssm:GetParameter"], arn("ssm", "parameter", "*")),
            (["sns:Publish"], arn("sns", "*")),
        ):
            self.role.add_to_policy(iam.PolicyStatement(actions=actions, resources=[resource], conditions=own_team))
        # Reading tags is how ownership is decided before anything is called; a run's own execution is read
        # back to tell a redelivered start from someone else's.
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
            role_name=_name(config, "workflows"),
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="jobsched DAG state machines: send task messages to the work queues",
        )
        for queue in queues.work.values():
            queue.grant_send_messages(self.role)
        machines = stack.format_arn(
            service="states", resource="stateMachine", resource_name=f"{self.prefix}*", arn_format=_colon()
        )
        executions = stack.format_arn(
            service="states", resource="execution", resource_name=f"{self.prefix}*", arn_format=_colon()
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
            service="states", resource="stateMachine", resource_name=self.prefix, arn_format=_colon()
        )
        for function in (functions.api, functions.dispatcher, functions.worker, functions.heartbeat):
            function.add_environment(Env.WORKFLOW_ROLE, self.role.role_arn)
            function.add_environment(Env.STATE_MACHINE_PREFIX, machine_prefix)


class Dispatch(Construct):
    """The dispatcher tick and the heartbeat tick, every minute."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, functions: Functions) -> None:
        super().__init__(scope, construct_id)
        # One target per part of the tick, five targets a rule (EventBridge's limit): DispatcherTick, then
        # DispatcherTick2, ... for more than five parallel dispatchers.
        parts = config.burst.dispatchers
        self.ticks: list[events.Rule] = []
        for part in range(parts):
            if part % 5 == 0:
                suffix = "" if part == 0 else str(part // 5 + 1)
                self.ticks.append(
                    events.Rule(
                        self,
                        f"DispatcherTick{suffix}",
                        rule_name=_name(config, f"DispatcherTick{suffix}"),
                        schedule=events.Schedule.rate(Duration.minutes(1)),
                    )
                )
            tick_event = events.RuleTargetInput.from_object({"part": part, "parts": parts})
            self.ticks[-1].add_target(
                event_targets.LambdaFunction(functions.dispatcher, retry_attempts=2, event=tick_event)
            )
        self.tick = self.ticks[0]
        self.heartbeat_tick = events.Rule(
            self,
            "HeartbeatTick",
            rule_name=_name(config, "HeartbeatTick"),
            schedule=events.Schedule.rate(Duration.minutes(1)),
        )
        self.heartbeat_tick.add_target(event_targets.LambdaFunction(functions.heartbeat, retry_attempts=2))


class Api(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, functions: Functions) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=LOG_RETENTION,
            removal_policy=RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY,
        )
        self.rest_api = apigw.RestApi(
            self,
            "Rest",
            rest_api_name=_name(config, "api"),
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name=config.stage,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                tracing_enabled=config.tracing,
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
            ),
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            policy=_team_wall(config),
        )
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_body=False, validate_request_parameters=True
        )
        integration = apigw.LambdaIntegration(functions.api)
        self.rest_api.root.add_method("ANY", integration, request_validator=validator)
        self.rest_api.root.add_proxy(
            default_integration=integration,
            any_method=True,
            default_method_options=apigw.MethodOptions(
                authorization_type=apigw.AuthorizationType.IAM, request_validator=validator
            ),
        )
        self.rest_api.add_usage_plan(
            "Plan",
            name=_name(config, "api-plan"),
            throttle=apigw.ThrottleSettings(rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit),
            api_stages=[apigw.UsagePlanPerApiStage(api=self.rest_api, stage=self.rest_api.deployment_stage)],
        )
        if config.waf:
            self.web_acl = _web_acl(self, config)
            wafv2.CfnWebACLAssociation(
                self,
                "WebAclAssociation",
                resource_arn=self.rest_api.deployment_stage.stage_arn,
                web_acl_arn=self.web_acl.attr_arn,
            )
        CfnOutput(self, "ApiUrl", value=self.rest_api.url)


def _web_acl(scope: Construct, config: StageConfig) -> wafv2.CfnWebACL:
    """Rate per source IP and a body size cap in front of the API: a flood is refused before it costs a
    Lambda invocation (the handler's own limits count per caller and per team behind it)."""

    def rule(name: str, priority: int, statement: dict[str, Any]) -> wafv2.CfnWebACL.RuleProperty:
        return wafv2.CfnWebACL.RuleProperty(
            name=name,
            priority=priority,
            action=wafv2.CfnWebACL.RuleActionProperty(block={}),
            statement=statement,
            visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
            ),
        )

    return wafv2.CfnWebACL(
        scope,
        "WebAcl",
        name=_name(config, "api-acl"),
        scope="REGIONAL",
        default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
        visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
            cloud_watch_metrics_enabled=True, metric_name=_name(config, "api-acl"), sampled_requests_enabled=True
        ),
        rules=[
            rule(
                "RatePerSourceIp",
                0,
                {"rateBasedStatement": {"limit": config.waf_rate_per_5_minutes, "aggregateKeyType": "IP"}},
            ),
            rule(
                "BodyOver256KB",
                1,
                {
                    "sizeConstraintStatement": {
                        "fieldToMatch": {"body": {"oversizeHandling": "MATCH"}},
                        "comparisonOperator": "GT",
                        "size": 256 * 1024,
                        "textTransformations": [{"priority": 0, "type": "NONE"}],
                    }
                },
            ),
        ],
    )


def _team_wall(config: StageConfig) -> iam.PolicyDocument:
    """The second wall behind the handler's membership check: a caller carrying a jobsched-team tag (role
    or session tag) may invoke only its own team's routes and the team-less ones. Callers without the
    tag, and platform admins, are left to the handler."""
    tag = f"${{aws:PrincipalTag/{OWNER_TAG}}}"
    conditions: dict[str, Any] = {"Null": {f"aws:PrincipalTag/{OWNER_TAG}": "false"}}
    admins = list(config.membership.get("admins", []))
    if admins:
        conditions["ArnNotLike"] = {"aws:PrincipalArn": admins}
    return iam.PolicyDocument(
        statements=[
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["execute-api:Invoke"],
                not_resources=[
                    f"execute-api:/*/*/teams/{tag}",
                    f"execute-api:/*/*/teams/{tag}/*",
                    "execute-api:/*/GET/health",
                    "execute-api:/*/GET/openapi.json",
                    "execute-api:/*/POST/validate",
                    "execute-api:/*/POST/callbacks/*",
                ],
                conditions=conditions,
            )
        ]
    )


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        key: kms.Key,
        queues: Queues,
        functions: Functions,
        api: Api,
    ) -> None:
        super().__init__(scope, construct_id)
        self.ops_topic = sns.Topic(
            self, "OpsAlarms", topic_name=_name(config, "ops-alarms"), master_key=key, enforce_ssl=True
        )
        # Alarms reach nobody unless CloudWatch may use the topic's key (and publish to the topic):
        # only for alarms of this account.
        account = Stack.of(self).account
        from_our_alarms = {
            "StringEquals": {"aws:SourceAccount": account},
            "ArnLike": {
                "aws:SourceArn": Stack.of(self).format_arn(
                    service="cloudwatch", resource="alarm", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                )
            },
        }
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublishToEncryptedTopics",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions=from_our_alarms,
            )
        )
        self.ops_topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.ops_topic.topic_arn],
                conditions=from_our_alarms,
            )
        )
        self.escalation_topic = sns.Topic(
            self, "Escalations", topic_name=_name(config, "escalations"), master_key=key, enforce_ssl=True
        )
        # Jobs without their own escalation channel page here.
        self.escalation_topic.grant_publish(functions.pages)
        for function in (functions.escalation, functions.pages):
            function.add_environment(Env.ESCALATION_TOPIC, self.escalation_topic.topic_arn)
        action = cw_actions.SnsAction(self.ops_topic)
        five = Duration.minutes(5)

        def runs(outcome: str, period: Duration = five) -> cloudwatch.Metric:
            return signal("RunsFinished", "Sum", period, outcome=outcome)

        def lateness(stat: str, priority: str = "normal") -> cloudwatch.Metric:
            return signal("FireLatenessSeconds", stat, five, priority=priority)

        def failure_ratio(period: Duration) -> cloudwatch.MathExpression:
            # M1 over every run that ended, wherever it ended: timed out counts as failed. FILL: a period
            # with failures and no time-outs has no `slow` datapoint, and without it no ratio at all.
            ok, bad = "FILL(ok, 0)", "(FILL(bad, 0) + FILL(slow, 0))"
            return cloudwatch.MathExpression(
                expression=f"IF({ok} + {bad} > 0, {bad} / ({ok} + {bad}), 0)",
                using_metrics={
                    "ok": runs("succeeded", period),
                    "bad": runs("failed", period),
                    "slow": runs("timed_out", period),
                },
                period=period,
            )

        alarms: list[cloudwatch.Alarm] = []

        def alarm(
            name: str, metric: cloudwatch.IMetric, threshold: float, periods: int = 1, description: str = ""
        ) -> None:
            created = cloudwatch.Alarm(
                self,
                name,
                alarm_name=_name(config, name),
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                alarm_description=description or name,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            created.add_alarm_action(action)
            alarms.append(created)

        for priority in PRIORITIES:
            alarm(
                f"Dlq{priority.title()}NotEmpty",
                queues.dead[priority].metric_approximate_number_of_messages_visible(period=five),
                0,
                description=f"messages reached the {priority} dead-letter queue",
            )
            for number, queue in enumerate(queues.shards[priority], start=1):
                alarm(
                    f"OldestMessage{priority.title()}{number if number > 1 else ''}",
                    queue.metric_approximate_age_of_oldest_message(period=five),
                    900 + 300,
                    description="a run message waited longer than the longest delay plus 5 minutes",
                )
        alarm(
            "EscalationDlqNotEmpty",
            queues.escalation_dead.metric_approximate_number_of_messages_visible(period=five),
            0,
            description="escalation events could not be handled: pages may not have gone out",
        )
        alarm("EscalationErrors", functions.escalation.metric_errors(period=five), 0)
        alarm(
            "PagesDlqNotEmpty",
            queues.pages_dead.metric_approximate_number_of_messages_visible(period=five),
            0,
            description="pages could not be delivered, not even to the deployment's escalation topic",
        )
        alarm("PagesErrors", functions.pages.metric_errors(period=five), 0)
        alarm("DispatcherErrors", functions.dispatcher.metric_errors(period=five), 0)
        alarm(
            "JobsQuarantined",
            signal("QuarantinedJobs", "Sum", five),
            0,
            description="the dispatcher quarantined a job whose schedule costs more than its budget",
        )
        alarm(
            "LostRunMessages",
            signal("LostRunMessages", "Sum", five),
            0,
            description="instants the dispatcher sent had no run record 15 minutes later: run messages lost",
        )
        alarm("HeartbeatErrors", functions.heartbeat.metric_errors(period=five), 0)
        alarm(
            "DuplicateExecutions",
            signal("RunsByOutcome", "Sum", five, outcome="duplicate_execution"),
            0,
            description="an attempt ran twice (M5): the exactly-once claim failed somewhere; must stay 0",
        )
        for name, queue, limit in (
            ("EscalationsOldest", queues.escalations, 900),
            # Pages back off up to 15 minutes, then go to the deployment's topic: older means stuck.
            ("PagesOldest", queues.pages, 1800),
        ):
            alarm(
                name,
                queue.metric_approximate_age_of_oldest_message(period=five),
                limit,
                description=f"a message waited more than {limit // 60} minutes on {name.removesuffix('Oldest')}",
            )
        for name, ticking in (("Dispatcher", functions.dispatcher), ("Heartbeat", functions.heartbeat)):
            # Both run every minute: no invocations at all is the loudest failure, so missing data breaches.
            missed_ticks = cloudwatch.Alarm(
                self,
                f"{name}MissedTicks",
                alarm_name=_name(config, f"{name}MissedTicks"),
                metric=ticking.metric_invocations(period=five),
                threshold=3,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
                alarm_description=f"fewer than 3 {name.lower()} ticks in 5 minutes",
            )
            missed_ticks.add_alarm_action(action)
            alarms.append(missed_ticks)
        alarm(
            "Api5xx",
            api.rest_api.metric_server_error(period=five, statistic="Sum"),
            5,
            description="the API answered 5xx more than 5 times in 5 minutes (bad input gets 4xx)",
        )
        for priority in PRIORITIES:
            alarm(
                f"FireLatenessP99{priority.title()}",
                lateness("p99", priority),
                config.lateness_p99_threshold_seconds,
                periods=3,
                description=f"p99 fire lateness of {priority} runs above the threshold for 15 minutes",
            )
        budget = 1 - SLO_SUCCESS
        alarm(
            "SloFastBurn",
            failure_ratio(Duration.hours(1)),
            14.4 * budget,
            description="error budget burning 14.4x (1 h)",
        )
        alarm("SloSlowBurn", failure_ratio(Duration.hours(6)), 6 * budget, description="error budget burning 6x (6 h)")
        for name, function in (
            ("Dispatcher", functions.dispatcher),
            ("Worker", functions.worker),
            ("Api", functions.api),
        ):
            alarm(f"{name}Throttles", function.metric_throttles(period=five), 0)
        self.alarms = alarms

        self.dashboards: tuple[cloudwatch.Dashboard, ...] = ()
        if not config.dashboards:
            return  # $3 each a month: a non-prod stage asks for them with -c dashboards=true
        executive = cloudwatch.Dashboard(self, "Executive", dashboard_name=_name(config, "executive"))
        executive.add_widgets(
            cloudwatch.GraphWidget(
                title="Runs per day by outcome",
                left=[runs(o, Duration.days(1)) for o in ("succeeded", "failed", "timed_out", "skipped", "missed")],
            ),
            cloudwatch.GraphWidget(title="Failure ratio vs SLO (1 h)", left=[failure_ratio(Duration.hours(1))]),
            cloudwatch.GraphWidget(
                title="Cost drivers: worker invocations and duration",
                left=[functions.worker.metric_invocations(), functions.worker.metric_duration()],
            ),
            cloudwatch.GraphWidget(
                title="Escalations per 100 runs (M8)",
                left=[
                    cloudwatch.MathExpression(
                        expression=f"100 * SUM(SEARCH('{search_schema('EscalationEvents')}', 'Sum', 3600))"
                        f" / SUM(SEARCH('{search_schema('RunsFinished')}', 'Sum', 3600))",
                        label="escalations per 100 runs",
                        period=Duration.hours(1),
                    )
                ],
            ),
        )
        oncall = cloudwatch.Dashboard(self, "OnCall", dashboard_name=_name(config, "oncall"))
        oncall.add_widgets(
            cloudwatch.GraphWidget(
                title="Failed, timed out and retried runs",
                left=[runs("failed"), runs("timed_out"), signal("RunsRetried", "Sum", five)],
            ),
            cloudwatch.GraphWidget(
                title="Run duration p50 / p95 / p99 (s)",
                left=[signal("RunDurationSeconds", stat, five) for stat in ("p50", "p95", "p99")],
            ),
            cloudwatch.GraphWidget(
                title="Fire lateness p99 by class (s)", left=[lateness("p99", priority) for priority in PRIORITIES]
            ),
            cloudwatch.GraphWidget(
                title="Backlog (M6): queued run messages, and runs waiting for a slot or quota",
                left=[q.metric_approximate_number_of_messages_visible() for p in PRIORITIES for q in queues.shards[p]],
                right=[signal("RunsByOutcome", "Sum", five, outcome="waiting")],
            ),
            cloudwatch.GraphWidget(
                title="Worker concurrency against its maximum (M7)",
                left=[functions.worker.metric("ConcurrentExecutions", statistic="Maximum")],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=sum(q.max_concurrency for q in WORK_QUEUES.values()), label="maximum (all classes)"
                    )
                ],
            ),
            cloudwatch.GraphWidget(
                title="Duplicates (M5): suppressed redeliveries, and attempts that ran twice (must be 0)",
                left=[
                    signal("RunsByOutcome", "Sum", five, outcome="duplicate"),
                    signal("RunsByOutcome", "Sum", five, outcome="duplicate_execution"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="DLQ depth",
                left=[queues.dead[p].metric_approximate_number_of_messages_visible() for p in PRIORITIES],
            ),
            cloudwatch.GraphWidget(
                title="Oldest message age (s)",
                left=[q.metric_approximate_age_of_oldest_message() for p in PRIORITIES for q in queues.shards[p]],
            ),
            cloudwatch.GraphWidget(
                title="Escalation events and pages (one page per incident)",
                left=[queues.escalations.metric_number_of_messages_sent()],
                right=[
                    cloudwatch.MathExpression(
                        expression=f"SUM(SEARCH('{search_schema('Pages')}', 'Sum', 300))", label="pages", period=five
                    ),
                    signal("OverdueJobs", "Maximum", five),
                    signal("DeadlineMisses", "Sum", five),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Instants missed (by policy or outage) and lost (no run record 15 minutes on)",
                left=[signal("MissedInstants", "Sum", five), signal("LostRunMessages", "Sum", five)],
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=alarms),
        )
        # Per job, from the worker's structured logs (job is a log field, never a metric dimension).
        worker_logs = [f"/aws/lambda/{_name(config, 'Worker')}"]
        oncall.add_widgets(
            cloudwatch.LogQueryWidget(
                title="Top failing jobs (last period)",
                log_group_names=worker_logs,
                query_lines=list(TOP_FAILING_JOBS),
                width=12,
            ),
            cloudwatch.LogQueryWidget(
                title="Latest failures",
                log_group_names=worker_logs,
                query_lines=list(LATEST_FAILURES),
                width=12,
            ),
        )
        debug = cloudwatch.Dashboard(self, "Debug", dashboard_name=_name(config, "debug"))
        for name, function in (
            ("Dispatcher", functions.dispatcher),
            ("Worker", functions.worker),
            ("Api", functions.api),
        ):
            debug.add_widgets(
                cloudwatch.GraphWidget(
                    title=f"{name}: errors, throttles", left=[function.metric_errors(), function.metric_throttles()]
                ),
                cloudwatch.GraphWidget(
                    title=f"{name}: duration p99, concurrency",
                    left=[function.metric_duration(statistic="p99")],
                    right=[function.metric("ConcurrentExecutions", statistic="Maximum")],
                ),
            )
        self.dashboards = (executive, oncall, debug)


class Examples(Construct):
    """Example targets with fixed names for the local runtime, docs and tests (off in prod)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, code: lambda_.Code) -> None:
        super().__init__(scope, construct_id)
        for name in ("echo", "flaky", "sleep"):
            function = lambda_.Function(
                self,
                name.title(),
                function_name=f"{PROJECT}-example-{name}",
                runtime=lambda_.Runtime.PYTHON_3_13,
                architecture=lambda_.Architecture.ARM_64,
                handler=f"functions.examples.{name}.handler",
                code=code,
                timeout=Duration.minutes(5),
                memory_size=128,
                tracing=lambda_.Tracing.ACTIVE if config.tracing else lambda_.Tracing.DISABLED,
                logging_format=lambda_.LoggingFormat.JSON,
                log_group=logs.LogGroup(
                    self, f"{name.title()}Logs", retention=LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY
                ),
            )
            Tags.of(function).add(SHARED_TAG, "true")  # every team may target the examples


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
    }
    managed = "arn:<AWS::Partition>:iam::aws:policy/service-role"
    granular: dict[str, str] = {
        f"AwsSolutions-IAM4[Policy::{managed}/AWSLambdaBasicExecutionRole]": "AWS-managed, grants only log writes",
        f"AwsSolutions-IAM4[Policy::{managed}/AmazonAPIGatewayPushToCloudWatchLogs]": "AWS-managed, API Gateway logs",
        "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "CDK's KMS grant for our own key only",
        "AwsSolutions-IAM5[Action::kms:ReEncrypt*]": "CDK's KMS grant for our own key only",
        "AwsSolutions-IAM5[Resource::*]": "X-Ray PutTraceSegments/PutTelemetryRecords accept no narrower resource; "
        "the target role reads tags (ListTags, DescribeSecret...) to decide ownership before any call; "
        "secretsmanager:GetRandomPassword (rotation) has no resource",
    }
    for table in (stack.storage.jobs, stack.storage.runs):
        logical = stack.get_logical_id(table.node.default_child)  # type: ignore[arg-type]
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
    ):
        arn = scoped.format(service=service, resource=resource)
        granular[f"AwsSolutions-IAM5[Resource::{arn}]"] = (
            f"the target role only: teams name their resources at run time; allowed only where {OWNER_TAG} equals "
            f"the session's team tag (or {SHARED_TAG}=true for targets); jobsched's own resources are denied"
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
    granular[f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::{account}:role/*]"] = (
        "the API reads the tags of the caller's role to find its team (iam:ListRoleTags only)"
    )
    granular["AwsSolutions-IAM5[Action::*]"] = "a Deny of every action on jobsched's own resources (target role)"
    prefix = stack.workflows.prefix
    for kind in ("stateMachine", "execution"):
        arn = scoped.format(service="states", resource=f"{kind}:{prefix}*")
        granular[f"AwsSolutions-IAM5[Resource::{arn}]"] = "only jobsched's own state machines (the stage prefix)"
    for rule, reason in (rules | granular).items():
        Validations.of(stack).acknowledge(Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))
