"""One definition of every name: tables, keys, indexes, queues, environment variables.

CDK (infra/), the tests and the local runtime all read this module; nothing else spells these names.
Table definitions are kept in a neutral shape that both boto3's ``create_table`` and CDK consume.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from datetime import date
from typing import Any, ClassVar, Literal

PROJECT = "jobsched"
PRIORITIES: tuple[Literal["high", "normal", "low"], ...] = ("high", "normal", "low")

# Ownership tags (ABAC). A team's resources carry OWNER_TAG=<team>; targets the platform offers to every
# team (never secrets, parameters or topics) carry SHARED_TAG=true. DAG state machines carry JOB_TAG.
OWNER_TAG = "jobsched-team"
SHARED_TAG = "jobsched-shared"
JOB_TAG = "jobsched-job"
LOCAL_STAGE = "local"  # the stage `make run` deploys into moto; its outbound HTTP may reach loopback

# Sparse indexes are sharded so that no single partition takes every due job or lease. The due shards are
# set per deployment (CDK context ``due_shards``, every function gets JOBSCHED_DUE_SHARDS) and may only
# grow: a job stays on the shard it was written to until its next write, and dispatchers read every shard
# below the current count, so growing moves nothing and loses nothing; shrinking would strand jobs.
DUE_SHARDS = 8
MAX_DUE_SHARDS = 1024
MAX_DISPATCHERS = 64  # parallel dispatcher invocations per tick (CDK context ``dispatchers``)
MAX_WORK_QUEUES = 16  # work queues per priority class, each with its own event source (CDK ``work_queues``)
LEASE_SHARDS = 4
# Items past this (epoch seconds) are deleted by the sweeper (watch.retention), or by DynamoDB's TTL where a stage
# turns it on (StageConfig.table_ttl): the hot tables keep no TTL otherwise (#51: multi-Region strong consistency).
EXPIRES_AT = "expires_at"
SWEEP = "SWEEP"  # the Jobs table's partition of the sweeper's state, an item a table (watch.retention)
# Moving to new tables (adapters.aws.moves): an old table's item carries MOVE_MARK once its key belongs to the new
# table (MOVE_COPYING while its copy may be unfinished, MOVE_COPIED after); a key deleted from the new table while
# the move runs leaves MOVE_TOMBSTONE there, so the old item is never copied back. The move's phase and cursors are
# the new Jobs table's item pk=TABLE_MOVE, sk=TABLE_MOVE.
MOVE_MARK = "move_mark"
MOVE_TOMBSTONE = "move_tombstone"
MOVE_COPYING, MOVE_COPIED = 1, 2
TABLE_MOVE = "TABLE_MOVE"


def due_shard_count(environ: dict[str, str] | None = None) -> int:
    """The deployment's number of due shards (``DUE_SHARDS`` unless configured)."""
    value = (os.environ if environ is None else environ).get(Env.DUE_SHARDS)
    return int(value) if value else DUE_SHARDS


class Env:
    """Environment variable names the handlers read (values come from the deployed configuration)."""

    JOBS_TABLE = "JOBSCHED_JOBS_TABLE"
    ZERO_METRICS = "JOBSCHED_ZERO_METRICS"  # "off": a count of 0 is not published (an idle stage pays nothing)
    RUNS_TABLE = "JOBSCHED_RUNS_TABLE"
    # The tables a stage is moving from (set while a release carries both layouts): adapters.aws.moves
    MOVE_PHASE_SECONDS = "JOBSCHED_MOVE_PHASE_SECONDS"  # how long a process trusts its read of the move's phase
    PREVIOUS_JOBS_TABLE = "JOBSCHED_PREVIOUS_JOBS_TABLE"
    PREVIOUS_RUNS_TABLE = "JOBSCHED_PREVIOUS_RUNS_TABLE"
    QUEUE_HIGH = "JOBSCHED_QUEUE_URL_HIGH"
    QUEUE_NORMAL = "JOBSCHED_QUEUE_URL_NORMAL"
    QUEUE_LOW = "JOBSCHED_QUEUE_URL_LOW"
    ESCALATION_QUEUE = "JOBSCHED_ESCALATION_QUEUE_URL"
    STAGE = "JOBSCHED_STAGE"
    ESCALATION_TOPIC = "JOBSCHED_ESCALATION_TOPIC_ARN"  # pages of jobs without their own escalation channel
    API_URL = "JOBSCHED_API_URL"  # links in pages
    CONSOLE_URL = "JOBSCHED_CONSOLE_URL"  # a console with a page per run (the local one): pages link it
    LOG_GROUPS = "JOBSCHED_LOG_GROUPS"  # comma-separated: the Logs Insights link in pages searches these
    WORKFLOW_ROLE = "JOBSCHED_WORKFLOW_ROLE_ARN"  # the role DAG state machines run with
    STATE_MACHINE_PREFIX = "JOBSCHED_STATE_MACHINE_PREFIX"  # arn:aws:states:REGION:ACCOUNT:stateMachine:jobsched-STAGE-
    TARGET_ROLE = "JOBSCHED_TARGET_ROLE_ARN"  # assumed per team (session tag OWNER_TAG) to reach team resources
    EGRESS_ALLOW = (
        "JOBSCHED_EGRESS_ALLOW"  # comma-separated hosts or CIDRs outbound HTTP may reach despite the deny-list
    )
    TEAM_LIMITS = "JOBSCHED_TEAM_LIMITS"  # JSON: the platform's default limits for every team (jobsched.tenancy.quotas)
    # JSON: the dead-letter queues people work (jobsched dlq), by name: work-high|normal|low, escalations.
    DEAD_LETTER_QUEUES = "JOBSCHED_DEAD_LETTER_QUEUES"
    ORG_POLICY = "JOBSCHED_ORG_POLICY"  # JSON: the organisation's policy for jobs (jobsched.registry.policy)
    SLO_TIERS = "JOBSCHED_SLO_TIERS"  # JSON: each SLO tier's objectives and the budget window (jobsched.core.slo)
    PAGES_QUEUE = "JOBSCHED_PAGES_QUEUE_URL"  # escalation pages waiting for delivery
    DUE_SHARDS = "JOBSCHED_DUE_SHARDS"  # how many shards the due index is spread over (names.due_shard_count)
    # JSON {"normal": [url, ...], ...}: every work queue of each class, when a deployment has more than one
    # per class (CDK ``work_queues``); the QUEUE_* variables name the first.
    WORK_QUEUE_SHARDS = "JOBSCHED_WORK_QUEUE_SHARDS"
    KUBERNETES_STATE_MACHINE = "JOBSCHED_KUBERNETES_STATE_MACHINE_ARN"  # runs kubernetes targets' Jobs
    CALLBACK_SECRET = "JOBSCHED_CALLBACK_SECRET"  # the callback-signing secret itself (local runtime, tests)
    CALLBACK_SECRET_NAME = "JOBSCHED_CALLBACK_SECRET_NAME"  # or its Secrets Manager name (AWS)
    MEMBERSHIP = "JOBSCHED_MEMBERSHIP"  # team membership as JSON (local runtime, tests)
    MEMBERSHIP_PARAMETER = "JOBSCHED_MEMBERSHIP_PARAMETER"  # or the SSM parameter holding it (AWS)
    AWS_ENDPOINT = "JOBSCHED_AWS_ENDPOINT"  # one endpoint for every AWS service (moto in the local runtime)
    API = "JOBSCHED_API"  # the CLI's API URL
    INTAKE_QUEUE_ARN = "JOBSCHED_INTAKE_QUEUE_ARN"  # where trigger rules deliver matched events (the API's rules)
    SYSTEM_INTAKE_QUEUE_ARN = "JOBSCHED_SYSTEM_INTAKE_QUEUE_ARN"  # where after triggers' rules deliver Run Finished
    EVENT_BUS = "JOBSCHED_EVENT_BUS"  # where "Run Finished" events are put (default: the account's default bus)
    CONSOLE_ACTIONS = "JOBSCHED_CONSOLE_ACTIONS_ARN"  # the console's actions function (its aliases: team-NAME)
    CONSOLE_TEAMS = "JOBSCHED_CONSOLE_TEAMS"  # comma-separated: the teams whose alias exists (CDK console_teams)
    QUEUES_BY_PRIORITY: ClassVar[dict[str, str]] = {"high": QUEUE_HIGH, "normal": QUEUE_NORMAL, "low": QUEUE_LOW}


CALLBACK_TOKEN_HEADER = "X-Jobsched-Token"  # callbacks carry their token here, never in a URL (access logs keep URLs)


class RunEnv:
    """What a container run's environment tells it (the task's overrides): who it is, where to resume, and
    where to report. ``JOBSCHED_API_URL`` is the deployment's API, as the functions' ``Env.API_URL`` names it."""

    JOB = "JOBSCHED_JOB"
    RUN_ID = "JOBSCHED_RUN_ID"
    ATTEMPT = "JOBSCHED_ATTEMPT"
    LOGICAL_INSTANT = "JOBSCHED_LOGICAL_INSTANT"
    CORRELATION_ID = "JOBSCHED_CORRELATION_ID"
    TRACEPARENT = "TRACEPARENT"  # W3C Trace Context, as OpenTelemetry's environment carrier reads it
    TRACESTATE = "TRACESTATE"
    TASK = "JOBSCHED_TASK"
    CHECKPOINT = "JOBSCHED_CHECKPOINT"  # the last checkpoint an earlier attempt of the run reported (JSON)
    API_URL = Env.API_URL
    CALLBACK_TOKEN = "JOBSCHED_CALLBACK_TOKEN"  # the attempt's token for POST /callbacks/heartbeat and /complete


TARGET_PREFIX = "TARGET#"


class JobsKeys:
    """Jobs table: one partition per job holding a spec item, a small hot state item and audit items."""

    PK = "pk"  # "{team}/{name}"
    SK = "sk"
    SPEC = "SPEC"  # the job spec, version, lifecycle state (changes rarely)
    STATE = "STATE"  # the next visit, the cursor, running slots (changes every dispatch and run)
    AUDIT_PREFIX = "AUDIT#"
    # A console action's request: pk "CONSOLE#{lambda request id}", sk CONSOLE_REQUEST -> the job it acted on,
    # so CloudTrail's record of the invocation can name the person on the audit entry (expires in 2 days).
    CONSOLE_PREFIX = "CONSOLE#"
    CONSOLE_REQUEST = "REQUEST"
    IDEMPOTENCY_PREFIX = "IDEMPOTENCY#"
    BACKFILL_PREFIX = "BACKFILL#"
    TEAM_PREFIX = "TEAM#"  # per-team quota items: pk "TEAM#{team}", sk "QUOTA"
    QUOTA = "QUOTA"
    RATE_PREFIX = "RATE#"  # per-team API request windows: pk "TEAM#{team}", sk "RATE#{minute}"
    EVENT_RUNS_PREFIX = "EVENTS#"  # runs a job's events started in one minute: pk job, sk "EVENTS#{minute}"
    # A batched trigger's current batch: pk job, sk "BATCH#{trigger}" (number, run, state, count: one item per
    # trigger, so adding an event is conditional on the batch it read being still the open one).
    BATCH_PREFIX = "BATCH#"
    BATCH_EVENT_PREFIX = "BATCHEVENT#"  # an event in a batch: sk "BATCHEVENT#{trigger}#{number:010d}#{time}#{key}"
    BATCHED_PREFIX = "BATCHED#"  # an event already batched (once only): sk "BATCHED#{trigger}#{key}"
    # Upstream runs an all-of after trigger has seen for one logical instant: sk "AFTER#{trigger}#{instant}",
    # one attribute "up:{team/name}" per upstream (its run id), added atomically.
    AFTER_PREFIX = "AFTER#"
    DOWNSTREAM_PREFIX = "DOWNSTREAM#"  # a job that runs after this one: pk upstream, sk "DOWNSTREAM#{team/name}"
    UPSTREAM_ATTRIBUTE = "up:"
    KEPT_EVENT_PREFIX = "KEPTEVENT#"  # an event too large for its run's payload: sk "KEPTEVENT#{run_id}"
    # A run (or DAG task) waiting for data: sk "WAITER#{run_id}" or "WAITER#{run_id}#{task}", holding the message
    # the intake sends when an event may meet its wait (expires when the wait would have timed out).
    WAITER_PREFIX = "WAITER#"
    # A downstream run rerun for one upstream attempt (rerun --downstream): sk "CARRIED#{run_id}#{team/name/run#n}".
    CARRIED_PREFIX = "CARRIED#"

    @staticmethod
    def batch(trigger: str) -> str:
        return f"{JobsKeys.BATCH_PREFIX}{trigger}"

    @staticmethod
    def batch_events(trigger: str, number: int) -> str:
        """The sort-key prefix of one batch's events (each: this + "{time}#{key}", so they come in time order)."""
        return f"{JobsKeys.BATCH_EVENT_PREFIX}{trigger}#{number:010d}#"

    @staticmethod
    def batched(trigger: str, key: str) -> str:
        return f"{JobsKeys.BATCHED_PREFIX}{trigger}#{key}"

    PRINCIPAL_PREFIX = "PRINCIPAL#"  # per-caller API request windows: pk "PRINCIPAL#{arn digest}", sk "RATE#{minute}"
    INCIDENT_PREFIX = "INCIDENT#"  # open incidents: pk subject (job, TARGET#..., SYSTEM), sk "INCIDENT#{class}"
    BREAKER = "BREAKER"  # per-target circuit breakers: pk "TARGET#{target}", sk "BREAKER"
    # A team's open breakers, so they can be listed without a scan: pk "TEAM#{team}", sk "BREAKERS", one
    # attribute per open breaker (its key -> open until). Written when one opens or closes, which is rare.
    TEAM_BREAKERS = "BREAKERS"
    # An emergency stop: pk "STOP#{id}", sk STOP: its selector, the jobs it paused, its resume (pipeline.stops).
    STOP_PREFIX = "STOP#"
    STOP = "STOP"
    # Company calendars and maintenance windows: pk COMPANY, sk "ENTRY#{kind}#company/{name}", the document as
    # JSON; their changes are AUDIT# items of the same partition (GET /admin/company/history).
    COMPANY = "COMPANY"
    COMPANY_ENTRY_PREFIX = "ENTRY#"
    TEAM_DRILLS = "DRILLS"  # a team's paging drills: pk "TEAM#{team}", one attribute per destination address
    # A team's SLO ledger: pk "TEAM#{team}", sk "SLO#{tier}#{YYYY-MM-DD}", one item a tier a day (jobsched.core.slo).
    SLO_PREFIX = "SLO#"
    # A job's usage on a UTC day: pk "TEAM#{team}", sk "USAGE#{YYYY-MM-DD}#{team/name}", numeric counters added to
    # (core.usage), its tier and target type set; a month is one key range of the team's partition.
    USAGE_PREFIX = "USAGE#"
    # Teams' budgets: pk BUDGET, sk the team, the document as JSON (read all at once); what one did in a month:
    # pk "TEAM#{team}", sk "BUDGET#{YYYY-MM}", JSON and a version (conditional writes).
    BUDGET = "BUDGET"
    BUDGET_MONTH_PREFIX = "BUDGET#"
    SLO_JOB_PREFIX = "bad#"  # one counter attribute a job with bad runs that day
    # The teams with counted events on a UTC day (the executive view's rows, never a scan): pk SLO_TEAMS, sk the
    # day and a shard of the team's name (``slo_teams_day``), a string set of team names. A worker process adds a
    # team once a day, after reading that it is not there yet (a read costs a fifth of a write and none of the
    # write throughput a burst is bound by; every worker instance of a night's burst adds its teams). Sharded so
    # that an item stays one write unit however many teams there are. Items of one a day (sk the day alone, before
    # #51's shards) are read too.
    SLO_TEAMS = "SLO#TEAMS"
    SLO_TEAM_SHARDS = 16

    @staticmethod
    def slo_day(tier: str, day: date) -> str:
        return f"SLO#{tier}#{day.isoformat()}"

    @staticmethod
    def slo_teams_day(day: date, team: str) -> str:
        """A team's item of the day's teams (``SLO_TEAMS``): the day and a shard stable across processes."""
        return f"{day.isoformat()}#{zlib.crc32(team.encode()) % JobsKeys.SLO_TEAM_SHARDS:02d}"

    @staticmethod
    def slo_teams_range(first: date, last: date) -> tuple[str, str]:
        """The sort keys of the days' team items from ``first`` to ``last``, sharded or of one a day."""
        return first.isoformat(), f"{last.isoformat()}#~"

    # A job's health: pk job, sk "HEALTH": its freshness (``core.freshness``) and its learned baseline
    # (``core.baseline``). On the freshness index only while a judgement is due (``FRESH_SHARD``, ``FRESH_CHECK_AT``).
    HEALTH = "HEALTH"
    FRESHNESS_INDEX = "freshness_checks"
    FRESH_SHARD = "fresh_shard"
    FRESH_CHECK_AT = "fresh_check_at"
    # A team's freshness board: pk "TEAM#{team}", one attribute per job with a policy (its state, since, why), so
    # the team's page reads one item. Written when a job's state changes, which is rare.
    TEAM_FRESHNESS = "FRESHNESS"

    HELD = "held"  # on a breaker: the runs (and DAG tasks) it held back, a bounded string set
    INCIDENTS = "incidents"  # on a job's STATE item: the classes of its open incidents
    TTL = EXPIRES_AT  # request windows and idempotency keys expire
    DUE_INDEX = "due"
    DUE_SHARD = "due_shard"  # present only while the job is ACTIVE and has a next instant
    # The due index's sort key: when the dispatcher next visits the job (``DispatchState.next_visit_at``). That is
    # the job's next fire time, or earlier: a sparse job is visited ahead of its fire to send it within SQS's
    # 15-minute delay, and a job with unaudited instants when the lost-message audit is due. Stored under its
    # first name, because the index's key attribute cannot be renamed without replacing the index.
    NEXT_VISIT_AT = "next_fire_at"
    # The timing wheel (#51): a sparse job visited at the same minute of each hour or few (an hourly job) waits on a
    # key that does not move: "{due shard}#{minute of the hour}", keys only, instead of the due index, whose key moved
    # at every visit (two index writes a run). Exclusive with DUE_SHARD. The dispatcher scans each minute's slot once
    # (``WHEEL_MARKS``: how far each shard's slots were scanned).
    WHEEL_INDEX = "wheel"
    WHEEL_SLOT = "wheel_slot"
    WHEEL_MARKS = "WHEEL"  # pk DISPATCH, sk WHEEL: shard -> the minute its wheel slots were scanned through
    DISPATCH = "DISPATCH"
    TEAM_INDEX = "by_team"
    # Open incidents across teams (the on-call console): sparse, only while an incident is open.
    OPEN_INCIDENTS_INDEX = "open_incidents"
    OPEN_INCIDENT = "open_incident"  # "OPEN" on an open incident's item; absent once resolved
    INCIDENT_OPENED_AT = "incident_opened_at"
    TEAM = "team"
    NAME = "name"


class RunsKeys:
    """Runs table: one partition per job, one item per run, sorted by run id (which sorts by time)."""

    PK = "job"  # "{team}/{name}"
    SK = "run_id"
    TTL = EXPIRES_AT
    LEASE_INDEX = "leases"
    LEASE_SHARD = "lease_shard"  # present only while a run awaits an external result
    LEASE_EXPIRES_AT = "lease_expires_at"
    WAKE_INDEX = "wakeups"
    WAKE_SHARD = "wake_shard"  # present only while a retry waits longer than SQS can delay
    WAKE_AT = "wake_at"
    DEADLINE_INDEX = "deadlines"
    DEADLINE_SHARD = "deadline_shard"  # present only while a run with an SLA deadline has not finished
    DEADLINE_AT = "deadline_at"
    SLOT_WAIT_INDEX = "slot_waits"
    SLOT_WAIT_TEAM = "slot_wait_team"  # present only while a first attempt waits for its job's or team's slot
    SLOT_WAIT_SINCE = "slot_wait_since"


@dataclass(frozen=True)
class IndexDefinition:
    name: str
    partition_key: tuple[str, Literal["S", "N"]]
    sort_key: tuple[str, Literal["S", "N"]]
    projection: Literal["KEYS_ONLY", "INCLUDE", "ALL"] = "KEYS_ONLY"
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableDefinition:
    logical_name: str
    partition_key: tuple[str, Literal["S", "N"]]
    sort_key: tuple[str, Literal["S", "N"]]
    indexes: tuple[IndexDefinition, ...] = field(default_factory=tuple)

    def create_table_kwargs(self, table_name: str) -> dict[str, Any]:
        """Arguments for boto3 ``create_table`` (on-demand), as tests and the local runtime use."""
        attributes = {self.partition_key, self.sort_key}
        for index in self.indexes:
            attributes |= {index.partition_key, index.sort_key}
        return {
            "TableName": table_name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [
                {"AttributeName": self.partition_key[0], "KeyType": "HASH"},
                {"AttributeName": self.sort_key[0], "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in sorted(attributes)],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": index.name,
                    "KeySchema": [
                        {"AttributeName": index.partition_key[0], "KeyType": "HASH"},
                        {"AttributeName": index.sort_key[0], "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": index.projection}
                    | ({"NonKeyAttributes": list(index.non_key_attributes)} if index.non_key_attributes else {}),
                }
                for index in self.indexes
            ],
        }


JOBS_TABLE = TableDefinition(
    logical_name="Jobs",
    partition_key=(JobsKeys.PK, "S"),
    sort_key=(JobsKeys.SK, "S"),
    indexes=(
        # The dispatcher reads only due jobs: sparse (ACTIVE jobs with a next instant), sharded.
        IndexDefinition(
            JobsKeys.DUE_INDEX,
            (JobsKeys.DUE_SHARD, "N"),
            (JobsKeys.NEXT_VISIT_AT, "S"),
            projection="INCLUDE",
            non_key_attributes=("cursor", "spec_version"),
        ),
        # The timing wheel: sparse jobs by the minute of the hour they are visited at (keys only: never rewritten).
        IndexDefinition(JobsKeys.WHEEL_INDEX, (JobsKeys.WHEEL_SLOT, "S"), (JobsKeys.PK, "S"), projection="KEYS_ONLY"),
        # Listing a team's jobs (the spec items carry team and name).
        IndexDefinition(JobsKeys.TEAM_INDEX, (JobsKeys.TEAM, "S"), (JobsKeys.NAME, "S")),
        # Open incidents, oldest first (few: one partition is plenty), with the incident itself.
        IndexDefinition(
            JobsKeys.OPEN_INCIDENTS_INDEX,
            (JobsKeys.OPEN_INCIDENT, "S"),
            (JobsKeys.INCIDENT_OPENED_AT, "S"),
            projection="INCLUDE",
            non_key_attributes=("incident", "version"),
        ),
        # Jobs with a freshness policy whose next judgement is due (the heartbeat checker reads only these).
        IndexDefinition(JobsKeys.FRESHNESS_INDEX, (JobsKeys.FRESH_SHARD, "N"), (JobsKeys.FRESH_CHECK_AT, "S")),
    ),
)

RUNS_TABLE = TableDefinition(
    logical_name="Runs",
    partition_key=(RunsKeys.PK, "S"),
    sort_key=(RunsKeys.SK, "S"),
    indexes=(
        # Runs waiting for an external result (callbacks): the heartbeat checker reads only these.
        IndexDefinition(RunsKeys.LEASE_INDEX, (RunsKeys.LEASE_SHARD, "N"), (RunsKeys.LEASE_EXPIRES_AT, "S")),
        # Retries due later than SQS can delay a message (15 minutes): the dispatcher wakes them.
        IndexDefinition(RunsKeys.WAKE_INDEX, (RunsKeys.WAKE_SHARD, "N"), (RunsKeys.WAKE_AT, "S")),
        # Unfinished runs of jobs with an SLA deadline: the heartbeat checker pages when one passes.
        IndexDefinition(RunsKeys.DEADLINE_INDEX, (RunsKeys.DEADLINE_SHARD, "N"), (RunsKeys.DEADLINE_AT, "S")),
        # Runs of a team waiting for max_running, oldest first: a run that ends wakes the next one.
        IndexDefinition(RunsKeys.SLOT_WAIT_INDEX, (RunsKeys.SLOT_WAIT_TEAM, "S"), (RunsKeys.SLOT_WAIT_SINCE, "S")),
    ),
)


@dataclass(frozen=True)
class QueueDefinition:
    logical_name: str
    priority: Literal["high", "normal", "low"]
    max_receive_count: int = 5  # then the dead-letter queue: nothing disappears silently
    max_concurrency: int = 10  # Lambda event source MaximumConcurrency: the throttle per priority class


# A worker invocation runs its batch of ten concurrently but lasts as long as its slowest run, so a hung
# target holds one invocation. A team's max_running (default 20, jobsched.tenancy.quotas) then holds at most 40%
# of the normal and high classes' invocations however many of its runs hang; other teams keep the rest.
WORKER_BATCH = 10  # records per worker invocation (the work queues' event sources): they share one team-slot write
WORK_QUEUES = {
    "high": QueueDefinition("WorkHigh", "high", max_concurrency=50),
    "normal": QueueDefinition("WorkNormal", "normal", max_concurrency=50),
    "low": QueueDefinition("WorkLow", "low", max_concurrency=20),
}


# Events matched by trigger rules, before they are runs: their own queue and function, so a storm of events is
# sorted (started, deduplicated, dropped) without standing in front of any team's scheduled runs.
INTAKE_QUEUE = "Events"
INTAKE_MAX_RECEIVES = 5  # then the dead-letter queue: an event that cannot be handled is kept, not lost
INTAKE_CONCURRENCY = 5
# The scheduler's own events: container work ending, Run Finished for after triggers and waits on jobs. Their
# own queue (the same function, its own concurrency), so no team's storm of events stands in front of them.
SYSTEM_INTAKE_QUEUE = "SystemEvents"
SYSTEM_INTAKE_CONCURRENCY = 2


def physical_name(stage: str, logical_name: str) -> str:
    """The deployed name of a resource: jobsched-{stage}-{logical}."""
    return f"{PROJECT}-{stage}-{logical_name}"


# The tables' generation (#51: global tables, no TTL, no transactions): jobsched-<stage>-JobsV2 and -RunsV2. The
# tables before it (jobsched-<stage>-Jobs and -Runs) stay in a stage deployed before until its move is clean.
TABLE_GENERATION = "V2"


@dataclass(frozen=True)
class StageTables:
    jobs: str
    runs: str
    previous_jobs: str
    previous_runs: str

    @classmethod
    def of(cls, stage: str) -> StageTables:
        def named(table: TableDefinition, generation: str = "") -> str:
            return physical_name(stage, f"{table.logical_name}{generation}")

        return cls(
            named(JOBS_TABLE, TABLE_GENERATION),
            named(RUNS_TABLE, TABLE_GENERATION),
            named(JOBS_TABLE),
            named(RUNS_TABLE),
        )


def reserved_prefixes(stage: str) -> tuple[str, ...]:
    """Name prefixes of jobsched's own resources (queues, tables, functions, topics, state machines, its
    secret and parameters): never a team's target, whatever their tags say."""
    return (f"{PROJECT}-{stage}-", f"{PROJECT}/{stage}/", f"/{PROJECT}/{stage}/")


def state_machine_prefix(stage: str) -> str:
    """DAG jobs' state machines are named under this prefix (IAM grants are scoped to it)."""
    return physical_name(stage, "dag-")


def wheel_slot(shard: int, minute: int) -> str:
    """A slot of the timing wheel: a due shard's jobs visited at this minute of the hour (``JobsKeys.WHEEL_SLOT``)."""
    return f"{shard}#{minute:02d}"
