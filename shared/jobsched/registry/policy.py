"""An organisation's policy for jobs: fields every job must set, allowed target types and accounts (per team too),
schedule frequency floors, catch-up ceilings and time zones, retry and timeout ceilings, and priority grants.

One document drives both doors: ``jobsched lint --policy POLICY.yaml`` in a team's CI, and the deployment (CDK
context ``org_policy``, the same YAML or its path) which refuses a breach at ``PUT`` with a 422 naming the rule and
the field, and serves it at ``GET /policy``. Breaches are errors."""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, field_validator

from jobsched.core.durations import Duration, format_duration
from jobsched.core.errors import FieldError
from jobsched.core.spec import JobSpec, StrictModel
from jobsched.registry.findings import INTERVAL_SAMPLE, Finding, LintedJob, shortest_interval
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.fires import preview_schedule

ACCOUNT_IN_ARN = re.compile(r"^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:(\d{12}):")
ACCOUNT_IN_QUEUE_URL = re.compile(r"^https://sqs\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/(\d{12})/")
PRIORITY_CLASSES = ("high", "normal", "low")
AROUND = timedelta(hours=2)  # sampled before each instant where fires may bunch
MAX_RULE_ITEMS = 200  # entries of any one list in a policy: a policy is configuration, not data


class TargetsPolicy(StrictModel):
    allowed_types: list[str] | None = Field(default=None, max_length=MAX_RULE_ITEMS)
    allowed_accounts: list[str] | None = Field(default=None, max_length=MAX_RULE_ITEMS)


class SchedulePolicy(StrictModel):
    min_interval: Duration | None = None
    max_catchup_runs: int | None = Field(default=None, ge=1)
    timezones: list[str] | None = Field(
        default=None, max_length=MAX_RULE_ITEMS, description='allowed zones, glob patterns: ["UTC", "Europe/*"]'
    )


class LimitsPolicy(StrictModel):
    max_attempts: int | None = Field(default=None, ge=1, le=20, description="retry.max_attempts at most")
    max_timeout: Duration | None = Field(default=None, description="a target's timeout at most")


class OrgPolicy(StrictModel):
    """An organisation's policy (``--policy POLICY.yaml``, CDK context ``org_policy``)."""

    require: list[str] = Field(
        default_factory=list, max_length=MAX_RULE_ITEMS, description="fields every job must set, e.g. target.timeout"
    )
    targets: TargetsPolicy = Field(default_factory=TargetsPolicy)
    teams: dict[str, TargetsPolicy] = Field(
        default_factory=dict, max_length=MAX_RULE_ITEMS, description="a team's own allowed targets (instead)"
    )
    schedule: SchedulePolicy = Field(default_factory=SchedulePolicy)
    limits: LimitsPolicy = Field(default_factory=LimitsPolicy)
    priorities: dict[str, list[str]] | None = Field(
        default=None,
        max_length=MAX_RULE_ITEMS,
        description='priority classes per team; "*" for every other team (absent: no rule)',
    )
    herd_threshold: int = Field(default=10, ge=2, description="jobs at one fixed minute that make a herd")

    @field_validator("priorities")
    @classmethod
    def _classes(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        for team, classes in (value or {}).items():
            unknown = sorted(set(classes) - set(PRIORITY_CLASSES))
            if unknown:
                raise ValueError(f"priorities.{team}: {', '.join(unknown)}; classes are {', '.join(PRIORITY_CLASSES)}")
        return value

    @classmethod
    def load(cls, path: Path) -> OrgPolicy:
        return cls.parse(path.read_text(encoding="utf-8"))

    @classmethod
    def parse(cls, text: str | None) -> OrgPolicy:
        """YAML or JSON (JSON is YAML); empty: no rules."""
        document = yaml.safe_load(text) if text else None
        return cls.model_validate(document or {})

    def targets_for(self, team: str) -> TargetsPolicy:
        return self.teams.get(team, self.targets)


def admission_errors(
    written: dict[str, Any],
    spec: JobSpec,
    policy: OrgPolicy,
    *,
    now: datetime,
    company: CompanySettings,
    around: Sequence[datetime] = (),
) -> list[FieldError]:
    """The policy's breaches of a job about to be stored, as the API refuses them: code ``policy_violation``, the
    rule and the fix in the message, the field as the path. ``written``: the document as the caller wrote it
    (defaults do not satisfy ``require``, as in lint). ``around``: instants where fires may bunch (a window's
    openings), sampled too besides the first fires from ``now``."""
    job = LintedJob("", spec, written)
    job.compiled = preview_schedule(spec, registered_at=now, company=company)
    if job.compiled is not None and policy.schedule.min_interval is not None:
        # Bounded: the admission's schedule cost check has run first (a schedule too expensive is refused before).
        # Samples are joined in time order: a gap between two samples is wider than any real one, never narrower.
        fires = {o.at for o in itertools.islice(job.compiled.fires(now), INTERVAL_SAMPLE)}
        for point in around:
            fires |= {o.at for o in itertools.islice(job.compiled.fires(point - AROUND), INTERVAL_SAMPLE // 4)}
        job.fires = sorted(fires)
    return [
        FieldError(
            found.path, "policy_violation", f"{found.rule}: {found.message}" + (f" ({found.fix})" if found.fix else "")
        )
        for found in policy_findings(job, policy)
    ]


def policy_findings(job: LintedJob, policy: OrgPolicy) -> list[Finding]:
    found = [*_required(job, policy), *_targets(job, policy), *_limits(job, policy)]
    limits = policy.schedule
    schedule = job.spec.schedule
    zones = limits.timezones
    if zones is not None and schedule is not None and not any(fnmatch.fnmatchcase(schedule.timezone, z) for z in zones):
        found.append(
            Finding(
                "policy-timezone",
                "error",
                job.file,
                "schedule.timezone",
                f"time zone {schedule.timezone} is not allowed; allowed: {', '.join(zones)}",
                "schedule in an allowed zone",
            )
        )
    if limits.min_interval is not None and schedule is not None:
        shortest = shortest_interval(job.fires)
        if shortest is not None and shortest < limits.min_interval:
            found.append(
                Finding(
                    "policy-min-interval",
                    "error",
                    job.file,
                    "schedule.expression",
                    f"fires every {format_duration(shortest)} at its most frequent; the policy's minimum is"
                    f" {format_duration(limits.min_interval)}",
                    "run it less often, or ask the platform team for an exception",
                )
            )
    if limits.max_catchup_runs is not None and schedule is not None:
        catchup = schedule.catchup
        runs = 1 if catchup.policy == "latest" else (0 if catchup.policy == "none" else catchup.max_runs)
        if runs > limits.max_catchup_runs:
            found.append(
                Finding(
                    "policy-max-catchup",
                    "error",
                    job.file,
                    "schedule.catchup.max_runs",
                    f"catch-up may start {runs} runs after an outage; the policy allows {limits.max_catchup_runs}",
                    f"set schedule.catchup.max_runs to at most {limits.max_catchup_runs}, or policy: latest",
                )
            )
    return found


def _required(job: LintedJob, policy: OrgPolicy) -> list[Finding]:
    found = []
    for required in policy.require:
        documents = [job.document]
        if required.startswith("target.") and isinstance(job.document.get("dag"), dict):
            tasks = job.document["dag"].get("tasks") or []
            documents = [task for task in tasks if isinstance(task, dict)]  # each task's own target
        for index, document in enumerate(documents):
            if _lookup(document, required) is None:
                where = required if documents == [job.document] else f"dag.tasks[{index}].{required}"
                found.append(
                    Finding(
                        "policy-require",
                        "error",
                        job.file,
                        where,
                        f"the organisation requires {required}",
                        f"add {required} to the job file",
                    )
                )
    return found


def _limits(job: LintedJob, policy: OrgPolicy) -> list[Finding]:
    found = []
    spec, limits = job.spec, policy.limits
    if limits.max_attempts is not None and spec.retry.max_attempts > limits.max_attempts:
        found.append(
            Finding(
                "policy-max-retries",
                "error",
                job.file,
                "retry.max_attempts",
                f"{spec.retry.max_attempts} attempts; the policy allows {limits.max_attempts}",
                f"set retry.max_attempts to at most {limits.max_attempts}",
            )
        )
    if limits.max_timeout is not None:
        for where, target in spec.targets():
            timeout = getattr(target, "timeout", None)
            if timeout is not None and timeout > limits.max_timeout:
                found.append(
                    Finding(
                        "policy-max-timeout",
                        "error",
                        job.file,
                        f"{where}.timeout",
                        f"a timeout of {format_duration(timeout)}; the policy allows"
                        f" {format_duration(limits.max_timeout)}",
                        f"set the timeout to at most {format_duration(limits.max_timeout)}",
                    )
                )
    if policy.priorities is not None:
        granted = policy.priorities.get(spec.team, policy.priorities.get("*", ["normal", "low"]))
        if spec.priority not in granted:
            found.append(
                Finding(
                    "policy-priority",
                    "error",
                    job.file,
                    "priority",
                    f"team {spec.team} may use priority {', '.join(granted)}, not {spec.priority}",
                    "use a granted priority, or ask the platform team for a grant",
                )
            )
    return found


def _targets(job: LintedJob, policy: OrgPolicy) -> list[Finding]:
    found = []
    rules = policy.targets_for(job.spec.team)
    for where, target in job.spec.targets():
        kind = getattr(target, "type", "")
        if rules.allowed_types is not None and kind not in rules.allowed_types:
            found.append(
                Finding(
                    "policy-target-type",
                    "error",
                    job.file,
                    f"{where}.type",
                    f"target type {kind} is not allowed; allowed: {', '.join(rules.allowed_types)}",
                    "use an allowed target type",
                )
            )
        if rules.allowed_accounts is not None:
            for account in _accounts(target):
                if account not in rules.allowed_accounts:
                    found.append(
                        Finding(
                            "policy-target-account",
                            "error",
                            job.file,
                            where,
                            f"the target is in account {account}; allowed: {', '.join(rules.allowed_accounts)}",
                            "point it at a resource in an allowed account",
                        )
                    )
    return found


def _accounts(target: Any) -> set[str]:
    found = set()
    for value in target.model_dump(mode="json").values():
        if isinstance(value, str):
            match = ACCOUNT_IN_ARN.match(value) or ACCOUNT_IN_QUEUE_URL.match(value)
            if match:
                found.add(match.group(1))
    return found


def _lookup(document: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(document, dict):
            return None
        document = document.get(part)
    return document
