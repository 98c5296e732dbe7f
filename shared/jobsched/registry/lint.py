"""``jobsched lint``: an organisation's policy and the mistakes schedulers are known for, found in job
files before they are applied. Pure: files in, findings out; ``now`` is an argument.

Each finding has a stable rule id, a severity, the file and the field, and the fix. Errors are policy
breaches (and invalid files); warnings are built-in checks a team may accept (``--strict`` refuses them).
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field

from jobsched.core.durations import Duration, format_duration
from jobsched.core.errors import SpecError
from jobsched.core.expressions import CronExpression
from jobsched.core.spec import JobSpec, StrictModel
from jobsched.registry.dependencies import cycle_through
from jobsched.registry.jobfile import find_job_files, parse_document, validate_document
from jobsched.schedule.engine import CompiledSchedule, ScheduleTooExpensive
from jobsched.schedule.fires import preview_schedule

Severity = Literal["error", "warning"]
DST_HORIZON = timedelta(days=400)  # a year ahead, both transitions of every zone
NO_FIRE_HORIZON = timedelta(days=90)
INTERVAL_SAMPLE = 200  # consecutive fires looked at for a job's shortest interval
HERD_HORIZON = timedelta(days=1)
MAX_OCCURRENCES = 20_000  # per job and check: a lint run is bounded whatever the files say
LONG_CATCHUP = timedelta(days=1)
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


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    file: str
    path: str
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v != ""}


@dataclass
class _Job:
    file: str
    spec: JobSpec
    document: dict[str, Any]
    compiled: CompiledSchedule | None = None
    fires: list[datetime] = field(default_factory=list)  # the next INTERVAL_SAMPLE fires


def lint(paths: Iterable[Path], policy: LintPolicy, *, now: datetime) -> list[Finding]:
    """Every finding of every job file under ``paths``, in file order."""
    findings: list[Finding] = []
    jobs: list[_Job] = []
    for path in find_job_files(paths):
        loaded = _load(path, findings)
        if loaded is not None:
            jobs.append(loaded)
    for job in jobs:
        job.compiled = preview_schedule(job.spec, registered_at=now)
        if job.compiled is not None:
            try:
                job.fires = [o.at for o in itertools.islice(job.compiled.fires(now), INTERVAL_SAMPLE)]
            except ScheduleTooExpensive as error:
                findings.append(_too_expensive(job, error))
                continue  # every other check would walk the same stream
        findings += _policy(job, policy)
        findings += _builtin(job, now)
    findings += _herds(jobs, policy, now)
    findings += _dependency_cycles(jobs)
    order = {str(path): index for index, path in enumerate(find_job_files(paths))}
    return sorted(findings, key=lambda f: (order.get(f.file, 0), f.severity != "error", f.path, f.rule))


def _too_expensive(job: _Job, error: ScheduleTooExpensive) -> Finding:
    return Finding(
        "schedule-too-expensive",
        "error",
        job.file,
        "schedule",
        f"{error} (PUT refuses it)",
        "make the calendar or blackouts leave fires, or use an expression that fires outside them",
    )


def _load(path: Path, findings: list[Finding]) -> _Job | None:
    try:
        document = parse_document(path.read_text(encoding="utf-8"), suffix=path.suffix.lower())
        spec = validate_document(document)
    except SpecError as error:
        findings += [
            Finding("invalid", "error", str(path), e.path, e.message, "see the job file format") for e in error.errors
        ]
        return None
    except (OSError, UnicodeDecodeError) as error:
        findings.append(Finding("invalid", "error", str(path), "", f"cannot read the file: {error}"))
        return None
    return _Job(str(path), spec, document if isinstance(document, dict) else {})


# ------------------------------------------------------------------------------------------- policy


def _policy(job: _Job, policy: LintPolicy) -> list[Finding]:
    found = [*_required(job, policy), *_targets(job, policy)]
    limits = policy.schedule
    schedule = job.spec.schedule
    if limits.min_interval is not None and schedule is not None:
        shortest = _shortest_interval(job.fires)
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


def _required(job: _Job, policy: LintPolicy) -> list[Finding]:
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


def _targets(job: _Job, policy: LintPolicy) -> list[Finding]:
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


# ------------------------------------------------------------------------------------------ built-in


def _builtin(job: _Job, now: datetime) -> list[Finding]:
    spec = job.spec
    found = _dst(job, now) + _no_fires(job, now)
    timeout = _timeout(spec)
    shortest = _shortest_interval(job.fires)
    if timeout is not None and shortest is not None and timeout > shortest and spec.concurrency.overlap == "allow":
        found.append(
            Finding(
                "overlap-pileup",
                "warning",
                job.file,
                "concurrency.overlap",
                f"a run may take {format_duration(timeout)} but the next starts {format_duration(shortest)} later,"
                " and overlap is allow: slow runs pile up",
                "set concurrency.overlap to skip or queue, or shorten the target's timeout",
            )
        )
    if timeout is not None and spec.deadline is not None and spec.deadline < timeout:
        found.append(
            Finding(
                "deadline-under-timeout",
                "warning",
                job.file,
                "deadline",
                f"the deadline ({format_duration(spec.deadline)}) is shorter than the target's timeout"
                f" ({format_duration(timeout)}): a run still within its timeout is already late",
                "make the deadline at least the timeout, or shorten the timeout",
            )
        )
    schedule = spec.schedule
    if schedule is not None and schedule.catchup.policy == "all" and schedule.catchup.window > LONG_CATCHUP:
        found.append(
            Finding(
                "catchup-all-long",
                "warning",
                job.file,
                "schedule.catchup",
                f"catch-up all over {format_duration(schedule.catchup.window)}: after an outage up to"
                f" {schedule.catchup.max_runs} runs start at once against the target",
                "use policy: latest, or a window of a day or less",
            )
        )
    return found


def _timeout(spec: JobSpec) -> timedelta | None:
    target = spec.target
    return getattr(target, "timeout", None) if target is not None else None


def _shortest_interval(fires: list[datetime]) -> timedelta | None:
    gaps = [later - earlier for earlier, later in itertools.pairwise(fires)]
    return min(gaps) if gaps else None


def _dst(job: _Job, now: datetime) -> list[Finding]:
    """A fixed wall time in a DST gap (it shifts) or overlap (it folds), with the next dates it happens."""
    compiled = job.compiled
    if compiled is None or not isinstance(compiled.expression, CronExpression) or compiled.expression.wildcard:
        return []
    gaps: dict[str, list[str]] = defaultdict(list)
    folds: dict[str, list[str]] = defaultdict(list)
    for occurrence in itertools.islice(compiled.occurrences(now, until=now + DST_HORIZON), MAX_OCCURRENCES):
        reason = occurrence.reason or ""
        scheduled = occurrence.scheduled_wall
        wall = scheduled.strftime("%H:%M")
        if occurrence.reason_kind == "dst gap":
            outcome = reason.split(": ", 1)[-1] if "shifted" in reason else "skipped"
            gaps[wall].append(f"{scheduled.date()} ({outcome})")
        elif occurrence.reason_kind == "dst overlap":
            folds[wall].append(str(scheduled.date()))
    zone = compiled.schedule.timezone
    found = [
        Finding(
            "dst-gap",
            "warning",
            job.file,
            "schedule.expression",
            f"{wall} does not exist in {zone} on {', '.join(dates[:3])}",
            "schedule outside the zone's transition hour, run in UTC, or set schedule.dst.gap explicitly",
        )
        for wall, dates in gaps.items()
    ]
    found += [
        Finding(
            "dst-overlap",
            "warning",
            job.file,
            "schedule.expression",
            f"{wall} occurs twice in {zone} on {', '.join(dates[:3])}; it runs once (dst.fold: {compiled.fold_policy})",
            "schedule outside the zone's transition hour, run in UTC, or set schedule.dst.fold explicitly",
        )
        for wall, dates in folds.items()
    ]
    return found


def _no_fires(job: _Job, now: datetime) -> list[Finding]:
    schedule = job.spec.schedule
    if job.compiled is None or schedule is None or (schedule.calendar is None and not schedule.blackouts):
        return []
    if any(
        o.fires for o in itertools.islice(job.compiled.occurrences(now, until=now + NO_FIRE_HORIZON), MAX_OCCURRENCES)
    ):
        return []
    return [
        Finding(
            "no-fires-90d",
            "warning",
            job.file,
            "schedule",
            "its calendar and blackouts leave no fire in the next 90 days",
            "check schedule.calendar and schedule.blackouts (jobsched preview --file shows what is skipped)",
        )
    ]


def _herds(jobs: list[_Job], policy: LintPolicy, now: datetime) -> list[Finding]:
    """Many jobs at one minute across the files, each at a fixed minute: suggest H to spread them."""
    at_minute: dict[datetime, list[_Job]] = defaultdict(list)
    for job in jobs:
        expression = job.compiled.expression if job.compiled is not None else None
        if not isinstance(expression, CronExpression) or not job.spec.schedule:
            continue
        minute_field = job.spec.schedule.expression.split()[0]
        if not minute_field.isdigit():
            continue  # H, a range or a step spreads already
        for fire in job.fires:
            if fire > now + HERD_HORIZON:
                break
            at_minute[fire.replace(second=0, microsecond=0)].append(job)
    found: dict[str, Finding] = {}
    for minute, crowd in sorted(at_minute.items()):
        if len({j.spec.key for j in crowd}) < policy.herd_threshold:
            continue
        for job in crowd:
            found.setdefault(
                job.file,
                Finding(
                    "herd",
                    "warning",
                    job.file,
                    "schedule.expression",
                    f"{len(crowd)} jobs fire at {minute:%H:%M} UTC ({minute:%Y-%m-%d}): they start in one burst",
                    "use H for the minute (e.g. 'H " + " ".join(job.spec.schedule.expression.split()[1:]) + "')"
                    if job.spec.schedule
                    else "",
                ),
            )
    return list(found.values())


def _dependency_cycles(jobs: list[_Job]) -> list[Finding]:
    """Jobs of these files that run after each other in a circle (PUT refuses the job that closes it)."""
    by_key = {job.spec.key: job for job in jobs}
    upstreams = {key: [u for u in job.spec.upstreams() if u in by_key] for key, job in by_key.items()}
    found: list[Finding] = []
    reported: set[str] = set()
    for start in by_key:
        if start in reported:
            continue
        chain = cycle_through(start, upstreams[start], lambda job: upstreams.get(job, []), limit=len(by_key))
        if chain is None:
            continue
        reported.update(chain)
        for key in dict.fromkeys(chain):
            found.append(
                Finding(
                    "dependency-cycle",
                    "error",
                    by_key[key].file,
                    "triggers",
                    "a cycle: " + " runs after ".join(chain),
                    "remove one after trigger of the cycle (PUT refuses the job that closes it)",
                )
            )
    return found
