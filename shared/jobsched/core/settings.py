"""The deployment's settings, read once per process from the environment the stack gives each function (the
variable names are ``core.names.Env``'s: one definition)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from jobsched.core.limits import TeamLimits
from jobsched.core.names import PRIORITIES, Env
from jobsched.core.slo import SloTiers


@dataclass(frozen=True)
class Settings:
    """What a handler needs from its environment; fails fast naming the missing variable."""

    jobs_table: str
    runs_table: str
    queue_urls: dict[str, str]
    escalation_queue_url: str
    workflow_role_arn: str | None = None  # DAG jobs need both; single-task jobs neither
    state_machine_prefix: str | None = None
    escalation_topic_arn: str | None = None  # where jobs without their own escalation channel page
    api_url: str | None = None
    console_url: str | None = None
    log_groups: tuple[str, ...] = ()
    stage: str = "dev"
    target_role_arn: str | None = None  # None: team resources are reached with the function's own credentials
    egress_allow: tuple[str, ...] = ()
    team_limits: TeamLimits = field(default_factory=TeamLimits)
    slo_tiers: SloTiers = field(default_factory=SloTiers)
    dead_letter_queues: dict[str, str] = field(default_factory=dict)  # name -> URL (jobsched dlq)
    org_policy: str | None = None  # the organisation's policy as JSON (parsed where it is enforced: pydantic)
    pages_queue_url: str | None = None  # None: pages are delivered by the escalation handler itself
    intake_queue_arn: str | None = None  # None: this deployment refuses jobs with triggers
    system_intake_queue_arn: str | None = None  # None: Run Finished rules deliver to the intake queue too
    event_bus: str = "default"
    queue_shards: dict[str, tuple[str, ...]] = field(default_factory=dict)  # more than one queue per class
    region: str | None = None  # the deployment's (Lambda's AWS_REGION): links in pages name it

    def deployed_region(self) -> str:
        """The region, where code needs one (never a default: a link to another region's console misleads)."""
        if not self.region:
            raise RuntimeError("environment variable AWS_REGION is not set")
        return self.region

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        source = os.environ if environ is None else environ

        def need(name: str) -> str:
            value = source.get(name)
            if not value:
                raise RuntimeError(f"environment variable {name} is not set")
            return value

        return cls(
            jobs_table=need(Env.JOBS_TABLE),
            runs_table=need(Env.RUNS_TABLE),
            queue_urls={priority: need(Env.QUEUES_BY_PRIORITY[priority]) for priority in PRIORITIES},
            escalation_queue_url=need(Env.ESCALATION_QUEUE),
            workflow_role_arn=source.get(Env.WORKFLOW_ROLE) or None,
            state_machine_prefix=source.get(Env.STATE_MACHINE_PREFIX) or None,
            escalation_topic_arn=source.get(Env.ESCALATION_TOPIC) or None,
            api_url=source.get(Env.API_URL) or None,
            console_url=source.get(Env.CONSOLE_URL) or None,
            region=source.get("AWS_REGION") or source.get("AWS_DEFAULT_REGION") or None,
            log_groups=tuple(group for group in source.get(Env.LOG_GROUPS, "").split(",") if group),
            stage=source.get(Env.STAGE) or "dev",
            target_role_arn=source.get(Env.TARGET_ROLE) or None,
            egress_allow=tuple(item.strip() for item in source.get(Env.EGRESS_ALLOW, "").split(",") if item.strip()),
            team_limits=TeamLimits.parse(source.get(Env.TEAM_LIMITS)),
            slo_tiers=SloTiers.parse(source.get(Env.SLO_TIERS)),
            org_policy=source.get(Env.ORG_POLICY) or None,
            dead_letter_queues=dict(json.loads(source.get(Env.DEAD_LETTER_QUEUES) or "{}")),
            pages_queue_url=source.get(Env.PAGES_QUEUE) or None,
            intake_queue_arn=source.get(Env.INTAKE_QUEUE_ARN) or None,
            system_intake_queue_arn=source.get(Env.SYSTEM_INTAKE_QUEUE_ARN) or None,
            event_bus=source.get(Env.EVENT_BUS) or "default",
            queue_shards={
                priority: tuple(urls)
                for priority, urls in json.loads(source.get(Env.WORK_QUEUE_SHARDS) or "{}").items()
            },
        )
