"""Commands that need no API: validate, preview and capacity read job files and the schedule engine."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jobsched.cli import app
from jobsched.cli.app import cli
from jobsched.core.tz import UTC, get_zone

if TYPE_CHECKING:  # imported on use: the spec's models cost every CLI call otherwise (#46)
    from collections.abc import Callable

    from jobsched.core.errors import FieldError
    from jobsched.core.spec import JobSpec, Schedule
    from jobsched.schedule.company import CompanySettings
    from jobsched.schedule.engine import CompiledSchedule, Occurrence

COMPANY_HELP = (
    "YAML of the company calendars and maintenance windows the jobs name as company/NAME "
    "({calendars: {NAME: ...}, maintenance: {NAME: ...}}; `jobsched company list -o yaml` writes the deployment's)."
)


def company_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--company FILE``: the company calendars and windows offline commands resolve company/NAME with."""
    path = click.Path(exists=True, dir_okay=False, path_type=Path)
    return click.option("--company", "company_path", type=path, help=COMPANY_HELP)(command)


def load_company(path: Path | None, hint: str = "--company") -> CompanySettings:
    import yaml
    from pydantic import ValidationError

    from jobsched.schedule.company import NO_COMPANY, CompanySettings

    if path is None:
        return NO_COMPANY
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(document, dict):
            raise ValueError("the file holds calendars: and maintenance: mappings")
        return CompanySettings.from_document(document)
    except (ValidationError, ValueError, OSError, yaml.YAMLError) as error:
        raise click.BadParameter(f"{path}: {str(error).splitlines()[0]}", param_hint=hint) from None


def _next_fire_note(spec: JobSpec, now: datetime, company: CompanySettings) -> str:
    if spec.schedule is None:
        return " (no schedule: runs when triggered)"
    missing = company.missing(spec)
    if missing:
        return f" (next: unknown: {missing[0][1]} is not in --company)"
    from jobsched.schedule.fires import preview_schedule

    compiled = preview_schedule(spec, registered_at=now, company=company)
    assert compiled is not None
    upcoming = compiled.next_fires(now, 1)
    if not upcoming:
        return " (warning: no fire instant in the next 10 years)"
    return f" (next: {utc_text(upcoming[0].at)})"


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@company_option
def validate(paths: tuple[Path, ...], company_path: Path | None) -> None:
    """Check job files (YAML or JSON; directories are searched) without deploying anything."""
    from jobsched.registry.jobfile import validate_files

    company = load_company(company_path)
    now = app.clock()
    failed = False
    results = validate_files(paths)
    if not results:
        click.echo("no job files (.yaml, .yml, .json) found", err=True)
        sys.exit(1)
    for result in results:
        if result.errors:
            failed = True
            for error in result.errors:
                click.echo(f"{result.path}: {error}")
            continue
        assert result.job is not None
        click.echo(f"{result.path}: OK {result.job.key}{_next_fire_note(result.job, now, company)}")
    sys.exit(1 if failed else 0)


@cli.command()
@click.argument("expression", required=False)
@click.option(
    "--file",
    "job_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Preview the schedule of this job file instead of an expression.",
)
@click.option("--tz", "timezone", default="UTC", show_default=True, help="IANA time zone of the expression.")
@click.option(
    "--after",
    "after_text",
    help="ISO-8601 instant; fire times strictly after it (default: now). "
    "Without an offset it is read in the schedule's zone.",
)
@click.option("--count", default=10, show_default=True, type=click.IntRange(1, 10000))
@click.option("--job", "job_key", default="", help="team/name that fixes H values and jitter.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@company_option
def preview(
    expression: str | None,
    job_file: Path | None,
    timezone: str,
    after_text: str | None,
    count: int,
    job_key: str,
    as_json: bool,
    company_path: Path | None,
) -> None:
    """Show the next fire instants of EXPRESSION (or --file JOB) and why others are skipped or moved."""
    if (expression is None) == (job_file is None):
        raise click.UsageError("give an EXPRESSION or --file JOB.yaml (one of them)")
    from jobsched.core.errors import FieldError, SpecError
    from jobsched.registry.jobfile import load_job_file
    from jobsched.schedule.engine import DEFAULT_HORIZON
    from jobsched.schedule.fires import preview_schedule, schedule_for

    try:
        if job_file is not None:
            job = load_job_file(job_file)
            if job.schedule is None:
                _fail_with(
                    [
                        FieldError(
                            "schedule",
                            "no_schedule",
                            "the job has no schedule; it runs only when triggered",
                        )
                    ],
                    job_file,
                )
            company = load_company(company_path)
            missing = company.missing(job)
            if missing:
                message = f"{missing[0][1]} is not defined: pass --company FILE with its definition"
                _fail_with([FieldError(missing[0][0], "unknown_company_reference", message)], job_file)
            assert job.schedule is not None
            after = parse_instant_option(after_text, job.schedule.timezone) if after_text else app.clock()
            found = preview_schedule(job, registered_at=after, company=company)  # its several schedules merged
            assert found is not None
            compiled = found
        else:
            schedule = _schedule_from_options(expression or "", timezone)
            after = parse_instant_option(after_text, schedule.timezone) if after_text else app.clock()
            compiled = schedule_for(schedule, job=job_key, registered_at=after)
    except SpecError as error:
        _fail_with(error.errors, job_file)
    entries = compiled.preview(after, count)
    if as_json:
        click.echo(json.dumps([_fire_json(fire, skipped, compiled) for fire, skipped in entries], indent=2))
    else:
        _print_preview(compiled, after, entries)
    if len(entries) < count:
        years = DEFAULT_HORIZON.days // 366
        click.echo(f"only {len(entries)} fire instant(s) in the next {years} years", err=True)


def _schedule_from_options(expression: str, timezone: str) -> Schedule:
    from pydantic import ValidationError

    from jobsched.core.errors import FieldError, SpecError, field_errors
    from jobsched.core.spec import Schedule

    try:
        return Schedule.model_validate({"expression": expression, "timezone": timezone})
    except ValidationError as error:
        problems = field_errors(error, Schedule)
        renamed = {"expression": "EXPRESSION", "timezone": "--tz"}
        raise SpecError([FieldError(renamed.get(p.path, p.path), p.code, p.message) for p in problems]) from None


def parse_instant_option(text: str, timezone: str, option: str = "--after") -> datetime:
    """An ISO-8601 date and time given to ``option``; without an offset, in ``timezone``. UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"'{text}' is not an ISO-8601 date and time", param_hint=option) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=get_zone(timezone))
    return value.astimezone(UTC)


def _fail_with(errors: list[FieldError], path: Path | None) -> None:
    for error in errors:
        click.echo(f"{path}: {error}" if path else str(error), err=True)
    sys.exit(1)


def utc_text(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _local(occurrence: Occurrence, compiled: CompiledSchedule) -> datetime | None:
    return occurrence.at.astimezone(compiled.zone_of(occurrence)) if occurrence.exists else None


def _local_text(occurrence: Occurrence, compiled: CompiledSchedule) -> str:
    local = _local(occurrence, compiled)
    if local is None:
        return f"{occurrence.wall:%a %Y-%m-%d %H:%M} (does not exist)"
    return f"{local:%a %Y-%m-%d %H:%M:%S %Z}"


def _print_preview(
    compiled: CompiledSchedule, after: datetime, entries: list[tuple[Occurrence, list[Occurrence]]]
) -> None:
    click.echo(f"# {compiled.describe()}, after {utc_text(after)}", err=True)
    for fire, skipped in entries:
        for skip in skipped:
            utc = utc_text(skip.at) if skip.exists else "-" * 20
            click.echo(f"  skipped {utc}  {_local_text(skip, compiled)}  {skip.reason}")
        line = f"{utc_text(fire.at)}  {_local_text(fire, compiled)}"
        if fire.fire_at != fire.at:
            line += f"  fires at {utc_text(fire.fire_at)} (jitter +{int((fire.fire_at - fire.at).total_seconds())}s)"
        if fire.reason:
            line += f"  ({fire.reason})"
        if fire.schedule:
            line += f"  [{fire.schedule}]"
        click.echo(line)


def _fire_json(fire: Occurrence, skipped: list[Occurrence], compiled: CompiledSchedule) -> dict[str, Any]:
    local = _local(fire, compiled)
    assert local is not None
    entry: dict[str, Any] = {
        "utc": utc_text(fire.at),
        "local": local.isoformat(),
        "zone": compiled.zone_of(fire).key,
        "abbreviation": local.tzname(),
    }
    if fire.fire_at != fire.at:
        entry["fire_at"] = utc_text(fire.fire_at)
    if fire.reason:
        entry["reason"] = fire.reason
    if fire.schedule:
        entry["schedule"] = fire.schedule
    if fire.moved_from:
        entry["moved_from"] = [wall.isoformat() for wall in fire.moved_from]
    if skipped:
        entry["skipped"] = [
            {
                "utc": utc_text(skip.at) if skip.exists else None,
                "local": (local_skip.isoformat() if (local_skip := _local(skip, compiled)) else skip.wall.isoformat()),
                "reason": skip.reason,
            }
            for skip in skipped
        ]
    return entry


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--days", default=7, show_default=True, type=click.IntRange(1, 366), help="How far ahead to look.")
@click.option("--after", "after_text", help="ISO-8601 instant to start from (default: now).")
@click.option("--p99", "target_p99", default=60.0, show_default=True, help="Target p99 start lateness (s).")
@company_option
def capacity(
    paths: tuple[Path, ...], days: int, after_text: str | None, target_p99: float, company_path: Path | None
) -> None:
    """Size a deployment for job files: the peak minute of the next DAYS, the CDK settings and AWS quotas
    that peak needs (from the scale model, scripts/bench_scale.py), and the monthly cost."""
    from collections import Counter

    from jobsched.core.events import RULES_PER_BUS, trigger_bus
    from jobsched.core.waits import job_rules
    from jobsched.planning.capacity import load_profile, size_for
    from jobsched.registry.jobfile import validate_files

    results = validate_files(paths)
    bad = [result for result in results if result.errors]
    for result in bad:
        for error in result.errors:
            click.echo(f"{result.path}: {error}", err=True)
    if bad or not results:
        click.echo("fix the job files first" if bad else "no job files (.yaml, .yml, .json) found", err=True)
        sys.exit(1)
    start = parse_instant_option(after_text, "UTC") if after_text else app.clock()
    company = load_company(company_path)
    profile = load_profile((r.job for r in results if r.job is not None), start=start, days=days, company=company)
    minute, peak = profile.peak()
    sizing = size_for(profile, target_p99_s=target_p99)
    d = sizing.deployment
    click.echo(f"{profile.jobs} jobs ({profile.scheduled} scheduled), {utc_text(start)} + {days} days:")
    click.echo(f"  runs: {profile.total:,} ({profile.runs_per_month():,.0f} a month)")
    click.echo(f"  peak minute: {utc_text(minute)} with {peak:,} runs due")
    for other, runs in sorted(profile.per_minute.items(), key=lambda item: -item[1])[1:4]:
        click.echo(f"    then {utc_text(other)}: {runs:,}")
    if profile.truncated:
        click.echo(
            f"  note: {profile.truncated} schedule(s) fire more than the tool follows; their tail is not counted"
        )
    met = "meets" if sizing.p99_lateness_s <= target_p99 else "MISSES"
    click.echo(
        f"settings (modelled p99 start lateness at the peak {sizing.p99_lateness_s:.1f} s, {met} {target_p99:g} s;"
        f" held back most by: {sizing.binding}):"
    )
    click.echo(f"  cdk deploy {sizing.context()}")
    click.echo(f"  memory: dispatcher {d.dispatcher_memory_mb} MB, worker {d.worker_memory_mb} MB")
    click.echo("AWS quotas that peak needs (Service Quotas; defaults: docs/operate/upgrade-and-cost.md):")
    click.echo(f"  Lambda concurrent executions: >= {sizing.account_concurrency:,} (default 1,000)")
    busiest = f"{max(sizing.peak_wcu, 1):,.0f} units/s"
    click.echo(f"  DynamoDB write throughput, the busiest table or index: >= {busiest} (default 40,000)")
    click.echo(f"  peak worker invocations at once: {sizing.peak_concurrency:,}")
    # Every trigger is a rule, and so is every bucket or job a job waits on (its wake rules).
    rules = Counter(trigger_bus(rule.trigger) for r in results if r.job is not None for rule in job_rules(r.job))
    for bus, count in sorted(rules.items()):
        over = " OVER: ask for more, or spread the triggers over team buses" if count > RULES_PER_BUS else ""
        click.echo(f"  EventBridge rules on bus {bus}: {count:,} (default quota {RULES_PER_BUS} per bus){over}")
    click.echo(f"monthly cost: ${sizing.monthly_cost_usd:,.2f} (prod idle + runs at the measured price per run)")
    print_forecasts([r.job for r in results if r.job is not None], start, company)


def print_forecasts(specs: list[Any], now: datetime, company: CompanySettings, shown: int = 10) -> None:
    """Each job's expected runs and scheduler cost a month, the most expensive first (``planning.forecast``)."""
    from jobsched.core.prices import US_EAST_1
    from jobsched.planning.forecast import forecast

    expected = sorted(
        ((spec.key, forecast(spec, now=now, company=company, prices=US_EAST_1)) for spec in specs),
        key=lambda item: (-item[1].usd_per_month, item[0]),
    )
    click.echo(f"expected per job (the scheduler's share a month, {US_EAST_1.label}; the targets' own not foreseen):")
    for key, job in expected[:shown]:
        capped = " (capped)" if job.capped else ""
        click.echo(f"  {key}: {job.runs_per_month:,} runs, ${job.usd_per_month:,.4f}{capped}")
