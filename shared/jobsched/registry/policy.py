"""An organisation's policy for job files (``jobsched lint --policy POLICY.yaml``): fields every job must set,
allowed target types and accounts, schedule frequency floors and catch-up ceilings. Breaches are errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from jobsched.core.durations import Duration, format_duration
from jobsched.core.spec import StrictModel
from jobsched.registry.findings import Finding, LintedJob, shortest_interval

ACCOUNT_IN_ARN = re.compile(r"^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:(\d{12}):")
ACCOUNT_IN_QUEUE_URL = re.compile(r"^https://sqs\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/(\d{12})/")


class TargetsPolicy(StrictModel):
    allowed_types: list[str] | None = None
    allowed_accounts: list[str] | None = None


class SchedulePolicy(StrictModel):
    min_interval: Duration | None = None
    max_catchup_runs: int | None = Field(default=None, ge=1)


class LintPolicy(StrictModel):
    """An organisation's policy (``--policy POLICY.yaml``)."""

    require: list[str] = Field(default_factory=list, description="fields every job must set, e.g. target.timeout")
    targets: TargetsPolicy = Field(default_factory=TargetsPolicy)
    schedule: SchedulePolicy = Field(default_factory=SchedulePolicy)
    herd_threshold: int = Field(default=10, ge=2, description="jobs at one fixed minute that make a herd")

    @classmethod
    def load(cls, path: Path) -> LintPolicy:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return cls.model_validate(document)


def policy_findings(job: LintedJob, policy: LintPolicy) -> list[Finding]:
    found = [*_required(job, policy), *_targets(job, policy)]
    limits = policy.schedule
    schedule = job.spec.schedule
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


def _required(job: LintedJob, policy: LintPolicy) -> list[Finding]:
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


def _targets(job: LintedJob, policy: LintPolicy) -> list[Finding]:
    found = []
    rules = policy.targets
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
