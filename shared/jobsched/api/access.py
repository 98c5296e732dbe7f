"""Who may call what: the services a request runs against, the caller, its team membership and rates.

A team's jobs and runs are visible only to its members and platform admins: others get 403, the same
answer for existing and missing jobs (team names are not secret inside one organisation, job names are
hidden by answering the same either way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.queues import WorkQueues
from jobsched.api.errors import ApiError, Throttled
from jobsched.api.identity import Forbidden, Membership, MembershipCache, Principal, caller_arn
from jobsched.api.tokens import CallbackTokens
from jobsched.core.prices import US_EAST_1, PriceTable
from jobsched.core.records import StoredJob
from jobsched.core.runs import job_key
from jobsched.core.slo import SloTiers
from jobsched.pipeline.dead_letters import DeadLetters
from jobsched.pipeline.worker import Worker
from jobsched.ports import (
    ContainerLogsPort,
    DagDeploymentPort,
    NotifierPort,
    RunLogsPort,
    TaskRunsPort,
    TriggerRulesPort,
)
from jobsched.registry.policy import OrgPolicy
from jobsched.schedule.company import CompanySettings
from jobsched.tenancy.egress import AddressPolicy
from jobsched.tenancy.ownership import OwnershipGuard
from jobsched.watch.explain import ExplainRuns
from jobsched.watch.run_search import RunQueries

MAX_PAGE = 100
TEAM_RUNS_READ = 100  # per job in the team view: a page of 100 jobs reads at most 10,000 runs


class ApiRuns(TaskRunsPort, ExplainRuns, RunQueries, Protocol):
    """The run store as the API uses it: the ports, the run search and the history pages."""


@dataclass
class ApiServices:
    jobs: JobsStore
    runs: ApiRuns
    queues: WorkQueues
    worker: Worker
    tokens: CallbackTokens
    membership: Membership | MembershipCache
    clock: Callable[[], datetime]
    dags: DagDeploymentPort | None = None  # None: this deployment refuses DAG jobs
    rules: TriggerRulesPort | None = None  # None: this deployment refuses jobs with event or s3 triggers
    guard: OwnershipGuard | None = None  # refuses jobs naming another team's (or jobsched's) resources
    egress: AddressPolicy | None = None  # refuses URLs whose literal address this stage may not reach
    logs: RunLogsPort | None = None  # a run's log lines (Logs Insights in AWS, captured lines locally)
    container_logs: ContainerLogsPort | None = None  # a container run's own log stream (awslogs)
    slo_tiers: SloTiers = field(default_factory=SloTiers)  # the platform's objectives per tier
    notifier: NotifierPort | None = None  # paging drills send their test pages through it (None: refused)
    default_topic: str | None = None  # the deployment's escalation topic (a job without its own channel)
    policy: OrgPolicy = field(default_factory=OrgPolicy)  # the organisation's rules for jobs, enforced at PUT
    dead_letters: DeadLetters | None = None  # jobsched dlq (None: this deployment's API cannot reach them)
    prices: PriceTable = US_EAST_1  # the deployment's region's list prices: the teams' chargeback

    def company(self) -> CompanySettings:
        """The company calendars and maintenance windows, read now (one query)."""
        return CompanySettings.read(self.jobs)


@dataclass
class Access:
    """The checks every route starts with, against the request being handled."""

    services: Callable[[], ApiServices]
    raw_event: Callable[[], dict[str, Any]]

    def principal(self) -> Principal:
        """The caller, counted toward its own rate on every authenticated route (team routes count per
        team too), so /validate and the like cannot be used to burn the API's capacity."""
        s = self.services()
        caller = s.membership.principal(caller_arn(self.raw_event()))
        now = s.clock()
        limit = s.jobs.team_defaults.requests_per_minute  # a principal may act for several teams
        if not s.jobs.count_principal_request(caller.arn, now=now, limit=limit):
            raise Throttled(60 - now.second)
        return caller

    def member(self, team: str) -> Principal:
        caller = self.principal()
        caller.require(team)
        s = self.services()
        now = s.clock()
        if not s.jobs.count_request(team, now=now, limit=s.jobs.team_limits(team).requests_per_minute):
            raise Throttled(60 - now.second)
        return caller

    def admin(self) -> Principal:
        """Platform admins only (team members get 403, the same answer whatever the route's team)."""
        caller = self.principal()
        if not caller.admin:
            raise Forbidden(f"{caller.arn} is not a platform admin")
        return caller

    def existing(self, team: str, name: str) -> StoredJob:
        stored = self.services().jobs.get(job_key(team, name))
        if stored is None:
            raise ApiError(404, "job_not_found", f"no job {team}/{name}", "name")
        return stored
