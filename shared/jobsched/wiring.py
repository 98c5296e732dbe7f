"""Builds the services from settings, once per process (Lambda cold start), never at import time."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from functools import cache

from jobsched.aws.jobs_store import JobsStore
from jobsched.aws.notify import Notifier
from jobsched.aws.queues import EscalationQueue, WorkQueues
from jobsched.aws.runs_store import RunsStore
from jobsched.aws.targets import TargetExecutor
from jobsched.aws.workflows import Workflows
from jobsched.dispatch import Dispatcher
from jobsched.escalation import Links
from jobsched.escalator import Escalator
from jobsched.heartbeat import HeartbeatChecker
from jobsched.jobs import DagDeployer
from jobsched.names import Settings
from jobsched.tz import UTC
from jobsched.worker import Worker


def utc_now() -> datetime:
    return datetime.now(UTC)


def build_dispatcher(settings: Settings) -> Dispatcher:
    return Dispatcher(
        jobs=JobsStore(settings.jobs_table),
        runs=RunsStore(settings.runs_table),
        queues=WorkQueues(settings.queue_urls),
        escalations=EscalationQueue(settings.escalation_queue_url),
    )


def build_escalator(settings: Settings, *, clock: Callable[[], datetime] = utc_now) -> Escalator:
    return Escalator(
        jobs=JobsStore(settings.jobs_table),
        notifier=Notifier(),
        clock=clock,
        default_topic=settings.escalation_topic_arn,
        links=Links(
            region=os.environ.get("AWS_REGION", "us-east-1"),
            api_url=settings.api_url,
            log_groups=settings.log_groups,
        ),
    )


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
    return Worker(
        jobs=JobsStore(settings.jobs_table),
        runs=RunsStore(settings.runs_table),
        queues=WorkQueues(settings.queue_urls),
        escalations=EscalationQueue(settings.escalation_queue_url),
        targets=targets or TargetExecutor(),
        clock=clock,
        workflows=build_workflows(settings),
    )


_targets: TargetExecutor | None = None


def use_targets(executor: TargetExecutor) -> None:
    """Run Lambda targets another way (the local runtime runs the stack's functions in-process)."""
    global _targets
    _targets = executor
    default_worker.cache_clear()
    default_heartbeat.cache_clear()


@cache
def default_dispatcher() -> Dispatcher:
    return build_dispatcher(Settings.from_env())


@cache
def default_heartbeat() -> HeartbeatChecker:
    settings = Settings.from_env()
    return HeartbeatChecker(RunsStore(settings.runs_table), default_worker())


@cache
def default_worker() -> Worker:
    return build_worker(Settings.from_env(), targets=_targets)


@cache
def default_escalator() -> Escalator:
    return build_escalator(Settings.from_env())
