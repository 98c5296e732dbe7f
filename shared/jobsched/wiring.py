"""Builds the services from settings, once per process (Lambda cold start), never at import time."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.container_logs import ContainerLogs
from jobsched.adapters.aws.container_work import ContainerWork
from jobsched.adapters.aws.data_checks import S3DataChecks
from jobsched.adapters.aws.dead_letters import DeadLetterQueues
from jobsched.adapters.aws.ecs_tasks import RunCallbacks
from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.logs import InsightsLogs
from jobsched.adapters.aws.notify import Notifier
from jobsched.adapters.aws.ownership import AwsTagReader, TeamSessions
from jobsched.adapters.aws.queues import EscalationQueue, PageQueue, WorkQueues
from jobsched.adapters.aws.retention import ExpiredItems
from jobsched.adapters.aws.rotation import Step, rotate
from jobsched.adapters.aws.rules import TriggerRules
from jobsched.adapters.aws.run_events import RunEvents
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.adapters.aws.targets import LambdaInvoker, TargetExecutor
from jobsched.adapters.aws.workflows import Workflows
from jobsched.api.access import ApiServices
from jobsched.api.identity import Membership, MembershipCache, iam_role_tags
from jobsched.api.tokens import TOKEN_GRACE, CallbackTokens
from jobsched.console.actions import ActionStores
from jobsched.console.widget import Platform, WidgetControls
from jobsched.core.names import Env, reserved_prefixes
from jobsched.core.prices import US_EAST_1, price_table
from jobsched.core.run_records import RunContext
from jobsched.core.settings import Settings
from jobsched.core.tz import UTC
from jobsched.dag.deployer import DagDeployer
from jobsched.paging.delivery import PageSender
from jobsched.paging.drills import drill
from jobsched.paging.escalation_events import Alerts
from jobsched.paging.incidents import Escalator
from jobsched.paging.rules import Links
from jobsched.pipeline.baselines import HealthWatch
from jobsched.pipeline.containers import ContainerResults
from jobsched.pipeline.dead_letters import DeadLetters
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.freshness import FreshnessKeeper
from jobsched.pipeline.intake import EventIntake
from jobsched.pipeline.lifecycle import AnnouncedRuns, Change, StateChange, announced
from jobsched.pipeline.slo_ledger import JobTerms, SloLedger
from jobsched.pipeline.usage import DagRunUsage
from jobsched.pipeline.worker import Worker, heartbeat_checker
from jobsched.planning.budgets import BudgetWatch
from jobsched.ports import RunLogsPort
from jobsched.registry.policy import OrgPolicy
from jobsched.tenancy.egress import AddressPolicy, GuardedHttp
from jobsched.tenancy.ownership import OwnershipGuard
from jobsched.warm import forget_all, warm
from jobsched.watch.heartbeat import HeartbeatChecker
from jobsched.watch.observability import wait_ended
from jobsched.watch.retention import Sweeper
from jobsched.watch.signals import emit


def utc_now() -> datetime:
    return datetime.now(UTC)


@warm
def team_sessions(role_arn: str | None) -> TeamSessions:
    """One per process and role: sessions are cached per team inside it."""
    return TeamSessions(role_arn)


def metered_runs(settings: Settings) -> AnnouncedRuns:
    """The runs table, its state changes announced (``pipeline.lifecycle``): the SLI metrics of every run that
    ends or retries (whoever ends it), its "Run Finished" event on the deployment's bus, its team's SLO
    ledger (``pipeline.slo_ledger``), and its job's health: baseline and freshness (``pipeline.baselines``)."""
    published = RunEvents(settings.event_bus)

    def run_finished_event(change: StateChange) -> None:
        if change.change is Change.FINISHED and change.run is not None and not published.publish(change.run):
            emit("RunEventsUnpublished", 1)

    jobs = JobsStore(settings.jobs_table, team_defaults=settings.team_limits)
    terms = JobTerms(jobs)
    ledger = SloLedger(jobs, settings.slo_tiers, terms)
    store = RunsStore(settings.runs_table)
    alerts = Alerts(EscalationQueue(settings.escalation_queue_url), jobs, utc_now)
    health = HealthWatch(jobs, store, alerts.publish, utc_now, terms)
    return announced(store, run_finished_event, ledger, health, DagRunUsage(jobs, utc_now))


def build_rules(settings: Settings) -> TriggerRules | None:
    """Trigger rules, when the deployment has an intake queue (None: jobs with triggers are refused)."""
    if not settings.intake_queue_arn:
        return None
    return TriggerRules(
        stage=settings.stage,
        intake_queue_arn=settings.intake_queue_arn,
        runs_bus=settings.event_bus,
        system_queue_arn=settings.system_intake_queue_arn,
    )


def build_intake(settings: Settings) -> EventIntake:
    runs = metered_runs(settings)
    jobs = JobsStore(settings.jobs_table, team_defaults=settings.team_limits)
    return EventIntake(
        jobs,
        runs,
        WorkQueues(settings.queue_urls, shards=settings.queue_shards),
        guard=build_guard(settings),
        containers=ContainerResults(
            runs, lambda: ending_worker().ends, jobs, lambda: ending_worker().containers, usage=jobs
        ),
    )


def build_guard(settings: Settings) -> OwnershipGuard:
    return OwnershipGuard(
        AwsTagReader(team_sessions(settings.target_role_arn)),
        reserved_prefixes(settings.stage),
        grants=membership().team_grants,
    )


@warm
def membership() -> MembershipCache:
    """Who acts for which team, and what the platform grants each team (reloaded at most once a minute)."""
    return MembershipCache(Membership.from_env, role_tags=iam_role_tags)


def egress_policy(settings: Settings) -> AddressPolicy:
    return AddressPolicy.for_stage(settings.stage, settings.egress_allow)


def build_targets(
    settings: Settings, *, lambda_invoker: LambdaInvoker | None = None, starts_attempts: bool = True
) -> TargetExecutor:
    """``starts_attempts=False``: a function that only ends, times out or answers work (``ending_worker``) signs no
    tokens, so it needs no signing secret."""
    return TargetExecutor(
        guard=build_guard(settings),
        sessions=team_sessions(settings.target_role_arn),
        lambda_invoker=lambda_invoker,
        http=GuardedHttp(egress_policy(settings)),
        callbacks=run_callbacks() if starts_attempts else None,
        kubernetes_state_machine=os.environ.get(Env.KUBERNETES_STATE_MACHINE),
    )


def run_callbacks(clock: Callable[[], datetime] = utc_now) -> RunCallbacks | None:
    """Containers report progress and checkpoints to the API with a token for their attempt; without the API's
    URL or the signing secret (a worker deployed without them) they run without, and cannot checkpoint."""
    api_url = os.environ.get(Env.API_URL)
    if not api_url or not (os.environ.get(Env.CALLBACK_SECRET) or os.environ.get(Env.CALLBACK_SECRET_NAME)):
        return None
    tokens = CallbackTokens.from_env()

    def issue(context: RunContext, valid_for: timedelta) -> str:
        expires_at = clock() + valid_for + TOKEN_GRACE
        # A container's token is readable by whoever may describe its task: it may report progress, never end it.
        return tokens.issue(
            context.job, context.run_id, context.attempt, context.task, expires_at=expires_at, purpose="progress"
        )

    return RunCallbacks(api_url.rstrip("/"), issue)


def build_dispatcher(settings: Settings) -> Dispatcher:
    queues = WorkQueues(settings.queue_urls, shards=settings.queue_shards)
    return Dispatcher(
        jobs=JobsStore(settings.jobs_table, team_defaults=settings.team_limits),
        runs=metered_runs(settings),
        queues=queues,
        escalations=EscalationQueue(settings.escalation_queue_url),
        backlogs=queues,  # the audit of a class with no backlog waits 4 minutes, not 15
    )


def build_escalator(settings: Settings, *, clock: Callable[[], datetime] = utc_now) -> Escalator:
    return Escalator(
        jobs=JobsStore(settings.jobs_table, team_defaults=settings.team_limits),
        pages=page_queue(settings),
        clock=clock,
        default_topic=settings.escalation_topic_arn,
        links=Links(
            region=settings.deployed_region(),
            api_url=settings.api_url,
            console_url=settings.console_url,
            log_groups=settings.log_groups,
        ),
    )


def page_queue(settings: Settings) -> PageQueue:
    if not settings.pages_queue_url:
        raise RuntimeError(f"environment variable {Env.PAGES_QUEUE} is not set")
    return PageQueue(settings.pages_queue_url)


def build_page_sender(settings: Settings) -> PageSender:
    notifier = Notifier(
        guard=build_guard(settings),
        sessions=team_sessions(settings.target_role_arn),
        http=GuardedHttp(egress_policy(settings)),
    )
    return PageSender(notifier, default_topic=settings.escalation_topic_arn)


def build_workflows(settings: Settings) -> Workflows | None:
    """Step Functions access for DAG jobs, when the deployment configures it."""
    if not settings.state_machine_prefix:
        return None
    return Workflows(role_arn=settings.workflow_role_arn, machine_prefix=settings.state_machine_prefix)


def build_dag_deployer(settings: Settings) -> DagDeployer | None:
    workflows = build_workflows(settings)
    return DagDeployer(workflows, dict(settings.queue_urls)) if workflows is not None else None


def build_worker(
    settings: Settings, *, targets: TargetExecutor | None = None, clock: Callable[[], datetime] = utc_now
) -> Worker:
    jobs = JobsStore(settings.jobs_table, team_defaults=settings.team_limits)
    targets = targets or build_targets(settings)
    runs = metered_runs(settings)
    worker = Worker(
        jobs=jobs,
        batches=jobs,
        runs=runs,
        queues=WorkQueues(settings.queue_urls, shards=settings.queue_shards),
        escalations=EscalationQueue(settings.escalation_queue_url),
        targets=targets,
        clock=clock,
        workflows=build_workflows(settings),
        checks=S3DataChecks(team_sessions(settings.target_role_arn), build_guard(settings)),
        waiters=jobs,
        wait_signal=wait_ended,
        # What the target adapters started, found, read and stopped by those same adapters.
        containers=ContainerWork(targets.ecs, targets.batch, targets.kubernetes),
        usage=jobs,  # each attempt's usage: the teams' chargeback (jobsched cost)
    )
    runs.lifecycle.subscribe(worker.proven_ends.heard)  # the runs it ends free their slots without a read
    return worker


_lambda_invoker: LambdaInvoker | None = None
_run_logs: RunLogsPort | None = None


def use_run_logs(logs: RunLogsPort) -> None:
    """Read run logs another way (the local runtime keeps the lines its in-process handlers wrote)."""
    global _run_logs
    _run_logs = logs


def use_lambda_invoker(invoker: LambdaInvoker) -> None:
    """Run Lambda targets another way (the local runtime runs the stack's functions in-process)."""
    global _lambda_invoker
    _lambda_invoker = invoker
    default_worker.cache_clear()
    default_heartbeat.cache_clear()


@warm
def default_dispatcher() -> Dispatcher:
    return build_dispatcher(Settings.from_env())


@warm
def default_heartbeat() -> HeartbeatChecker:
    settings = Settings.from_env()
    jobs = JobsStore(settings.jobs_table, team_defaults=settings.team_limits)
    alerts = Alerts(EscalationQueue(settings.escalation_queue_url), jobs, utc_now)
    watch = BudgetWatch(jobs, alerts.publish, price_table(settings.region or US_EAST_1.region))
    sweeper = Sweeper(ExpiredItems(settings.jobs_table, settings.runs_table))
    return heartbeat_checker(
        metered_runs(settings),
        ending_worker(),
        freshness=FreshnessKeeper(jobs, alerts.publish).check,
        budgets=lambda now: len(watch.check_all(now)) if watch.due(now) else 0,
        sweep=lambda now: sweeper.sweep(now).deleted,
    )


@warm
def ending_worker() -> Worker:
    """The worker's rules for the functions that end, time out or answer attempts and start none (heartbeat,
    intake, console): it signs no callback token, so it needs no signing secret."""
    return build_ending_worker(Settings.from_env())


def build_ending_worker(settings: Settings) -> Worker:
    return build_worker(settings, targets=build_targets(settings, starts_attempts=False))


@warm
def default_worker() -> Worker:
    settings = Settings.from_env()
    return build_worker(settings, targets=build_targets(settings, lambda_invoker=_lambda_invoker))


@warm
def default_intake() -> EventIntake:
    return build_intake(Settings.from_env())


@warm
def default_escalator() -> Escalator:
    return build_escalator(Settings.from_env())


@warm
def default_page_sender() -> PageSender:
    return build_page_sender(Settings.from_env())


def reset() -> None:
    """Forget every cached service and the Lambda invoker: the next call builds them from the environment
    as it is now (tests and the local runtime switch tables, queues and endpoints within one process)."""
    global _lambda_invoker, _run_logs
    _lambda_invoker = None
    _run_logs = None
    forget_all()


def build_api_services(settings: Settings) -> ApiServices:
    """Everything the team API runs against, built once per process (the API handler caches it)."""
    return ApiServices(
        jobs=JobsStore(settings.jobs_table, team_defaults=settings.team_limits),
        runs=metered_runs(settings),
        queues=WorkQueues(settings.queue_urls, shards=settings.queue_shards),
        worker=default_worker(),
        tokens=CallbackTokens.from_env(),
        membership=membership(),
        clock=utc_now,
        slo_tiers=settings.slo_tiers,
        policy=OrgPolicy.parse(settings.org_policy),
        prices=price_table(settings.region or US_EAST_1.region),
        dead_letters=DeadLetters(
            DeadLetterQueues(settings.dead_letter_queues),
            WorkQueues(settings.queue_urls, shards=settings.queue_shards),
            EscalationQueue(settings.escalation_queue_url),
        )
        if settings.dead_letter_queues
        else None,
        notifier=build_page_sender(settings).notifier,  # paging drills
        default_topic=settings.escalation_topic_arn,
        dags=build_dag_deployer(settings),
        rules=build_rules(settings),
        guard=build_guard(settings),
        egress=egress_policy(settings),
        logs=_run_logs or InsightsLogs(settings.log_groups),
        container_logs=ContainerLogs(team_sessions(settings.target_role_arn), build_guard(settings)),
    )


def rotate_callback_secret(secret_id: str, request_token: str, step: Step) -> None:
    """One step of rotating the callback-signing secret (Secrets Manager calls the rotation function)."""
    rotate(client("secretsmanager"), secret_id, request_token, step)


@warm
def console_stores() -> tuple[JobsStore, RunsStore]:
    """What the console widget reads (its role may only read)."""
    settings = Settings.from_env()
    return JobsStore(settings.jobs_table, team_defaults=settings.team_limits), RunsStore(settings.runs_table)


def console_platform() -> Platform:
    """What the SLO views need of the deployment: the tiers' objectives and the default escalation topic."""
    settings = Settings.from_env()
    roles = (settings.target_role_arn,) if settings.target_role_arn else ()
    prices = price_table(settings.region or US_EAST_1.region)
    return Platform(settings.slo_tiers, settings.escalation_topic_arn, roles, prices, settings.region)


@warm
def console_controls() -> WidgetControls | None:
    """The widget's buttons: None when this stage has no actions function."""
    actions = os.environ.get(Env.CONSOLE_ACTIONS)
    if not actions:
        return None
    teams = frozenset(t.strip() for t in os.environ.get(Env.CONSOLE_TEAMS, "").split(",") if t.strip())
    return WidgetControls(actions, teams)


@warm
def console_action_stores() -> ActionStores:
    """What the console's actions write: the API's tables and work queues, nothing else."""
    return action_stores(Settings.from_env())


@warm
def console_audit_store() -> JobsStore:
    """Where console actions' audit entries get the person CloudTrail saw."""
    return JobsStore(Settings.from_env().jobs_table)


def action_stores(settings: Settings) -> ActionStores:
    return ActionStores(
        jobs=JobsStore(settings.jobs_table, team_defaults=settings.team_limits),
        runs=metered_runs(settings),
        queues=WorkQueues(settings.queue_urls, shards=settings.queue_shards),
        dags=build_ending_worker(settings).dags,  # approvals answered from the console (its clients are made lazily)
        drill=partial(drill, build_page_sender(settings).notifier, default_topic=settings.escalation_topic_arn),
    )
