"""``jobsched lint``: an organisation's policy and the mistakes schedulers are known for, found in job
files before they are applied. Pure: files in, findings out; ``now`` is an argument.

Each finding has a stable rule id, a severity, the file and the field, and the fix. Errors are policy
breaches (and invalid files); warnings are built-in checks a team may accept (``--strict`` refuses them).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from jobsched.core.durations import format_duration
from jobsched.core.errors import SpecError
from jobsched.core.expressions import CronExpression
from jobsched.core.spec import JobSpec
from jobsched.registry.dependencies import cycle_through
from jobsched.registry.findings import INTERVAL_SAMPLE, Finding, LintedJob, shortest_interval
from jobsched.registry.jobfile import find_job_files, parse_document, validate_document
from jobsched.registry.policy import OrgPolicy, policy_findings
from jobsched.schedule.company import NO_COMPANY, CompanySettings
from jobsched.schedule.engine import CompiledSchedule
from jobsched.schedule.fires import preview_schedule
from jobsched.schedule.several import SeveralSchedules
from jobsched.schedule.steps import ScheduleTooExpensive

DST_HORIZON = timedelta(days=400)  # a year ahead, both transitions of every zone
NO_FIRE_HORIZON = timedelta(days=90)
HERD_HORIZON = timedelta(days=1)
MAX_OCCURRENCES = 20_000  # per job and check: a lint run is bounded whatever the files say
LONG_CATCHUP = timedelta(days=1)


def lint(
    paths: Iterable[Path], policy: OrgPolicy, *, now: datetime, company: CompanySettings = NO_COMPANY
) -> list[Finding]:
    """Every finding of every job file under ``paths``, in file order."""
    findings: list[Finding] = []
    jobs: list[LintedJob] = []
    for path in find_job_files(paths):
        loaded = _load(path, findings)
        if loaded is not None:
            jobs.append(loaded)
    for job in jobs:
        missing = company.missing(job.spec)
        findings += [
            Finding(
                "unknown-company-reference",
                "error",
                job.file,
                path,
                f"{reference} is not defined in the company file given (PUT refuses it where it is not defined)",
                "pass --company FILE with its definition (jobsched company list -o yaml writes the deployment's)",
            )
            for path, reference in missing
        ]
        job.compiled = preview_schedule(job.spec, registered_at=now, company=company)
        if job.compiled is not None:
            try:
                job.fires = [o.at for o in itertools.islice(job.compiled.fires(now), INTERVAL_SAMPLE)]
            except ScheduleTooExpensive as error:
                findings.append(_too_expensive(job, error))
                continue  # every other check would walk the same stream
        findings += policy_findings(job, policy)
        findings += _builtin(job, now)
    findings += _herds(jobs, policy, now)
    findings += _dependency_cycles(jobs)
    order = {str(path): index for index, path in enumerate(find_job_files(paths))}
    return sorted(findings, key=lambda f: (order.get(f.file, 0), f.severity != "error", f.path, f.rule))


def _too_expensive(job: LintedJob, error: ScheduleTooExpensive) -> Finding:
    return Finding(
        "schedule-too-expensive",
        "error",
        job.file,
        "schedule",
        f"{error} (PUT refuses it)",
        "make the calendar or blackouts leave fires, or use an expression that fires outside them",
    )


def _load(path: Path, findings: list[Finding]) -> LintedJob | None:
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
    return LintedJob(str(path), spec, document if isinstance(document, dict) else {})


# ------------------------------------------------------------------------------------------- policy


# ------------------------------------------------------------------------------------------ built-in


def _builtin(job: LintedJob, now: datetime) -> list[Finding]:
    spec = job.spec
    found = _dst(job, now) + _no_fires(job, now)
    timeout = _timeout(spec)
    shortest = shortest_interval(job.fires)
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


def _dst(job: LintedJob, now: datetime) -> list[Finding]:
    """Each schedule's fixed wall times in a DST gap or overlap (a job with several: each in its own zone)."""
    if job.compiled is None:
        return []
    parts = job.compiled.parts if isinstance(job.compiled, SeveralSchedules) else [job.compiled]
    found: list[Finding] = []
    for part, (path, document) in zip(parts, _written_schedules(job.document), strict=False):
        found += _dst_of(job, part, path, document, now)
    return found


def _written_schedules(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(field path, document) of each schedule as the file wrote it, in the job's order (``schedule`` then
    ``schedules``, or ``schedules`` alone)."""
    raw = document.get("schedules")
    listed: list[Any] = raw if isinstance(raw, list) else []
    written = [(f"schedules[{index}]", entry) for index, entry in enumerate(listed)]
    if isinstance(document.get("schedule"), dict):
        written.insert(0, ("schedule", document["schedule"]))
    return [(path, entry if isinstance(entry, dict) else {}) for path, entry in written] or [("schedule", {})]


def _dst_of(
    job: LintedJob, compiled: CompiledSchedule, path: str, document: dict[str, Any], now: datetime
) -> list[Finding]:
    """A fixed wall time in a DST gap (it shifts) or overlap (it folds), with the next dates it happens."""
    if not isinstance(compiled.expression, CronExpression) or compiled.expression.wildcard:
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
    # A policy set explicitly in the file is the team's decision: no warning for it (--strict passes a compliant file).
    written = document.get("dst", {})
    decided = written if isinstance(written, dict) else {}
    if "gap" in decided:
        gaps.clear()
    if "fold" in decided:
        folds.clear()
    found = [
        Finding(
            "dst-gap",
            "warning",
            job.file,
            f"{path}.expression",
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
            f"{path}.expression",
            f"{wall} occurs twice in {zone} on {', '.join(dates[:3])}; it runs once (dst.fold: {compiled.fold_policy})",
            "schedule outside the zone's transition hour, run in UTC, or set schedule.dst.fold explicitly",
        )
        for wall, dates in folds.items()
    ]
    return found


def _no_fires(job: LintedJob, now: datetime) -> list[Finding]:
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


def _herds(jobs: list[LintedJob], policy: OrgPolicy, now: datetime) -> list[Finding]:
    """Many jobs at one minute across the files, each at a fixed minute: suggest H to spread them."""
    at_minute: dict[datetime, list[LintedJob]] = defaultdict(list)
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


def _dependency_cycles(jobs: list[LintedJob]) -> list[Finding]:
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
