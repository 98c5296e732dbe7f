"""The ``jobsched`` command line. Offline commands: ``validate`` and ``preview``.

Exit codes: 0 ok, 1 the input is wrong (every problem is printed), 2 usage errors (click's own).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from jobsched.core.errors import FieldError, SpecError
from jobsched.core.spec import Schedule
from jobsched.core.tz import UTC, get_zone
from jobsched.registry.jobfile import load_job_file, validate_files
from jobsched.schedule.engine import DEFAULT_HORIZON, CompiledSchedule, Occurrence, compile_schedule

# The edge of the system reads the clock; everything below it takes ``now`` as an argument.
clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jobsched")
def cli() -> None:
    """jobsched: register, check and preview scheduled jobs."""


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    """Check job files (YAML or JSON; directories are searched) without deploying anything."""
    now = clock()
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
        click.echo(f"{result.path}: OK {result.job.key}{_next_fire_note(result.job.schedule, result.job.key, now)}")
    sys.exit(1 if failed else 0)


def _next_fire_note(schedule: Schedule | None, hash_key: str, now: datetime) -> str:
    if schedule is None:
        return " (no schedule: runs when triggered)"
    upcoming = compile_schedule(schedule, hash_key=hash_key, anchor=now).next_fires(now, 1)
    if not upcoming:
        return " (warning: no fire instant in the next 10 years)"
    return f" (next: {_utc(upcoming[0].at)})"


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
def preview(
    expression: str | None,
    job_file: Path | None,
    timezone: str,
    after_text: str | None,
    count: int,
    job_key: str,
    as_json: bool,
) -> None:
    """Show the next fire instants of EXPRESSION (or --file JOB) and why others are skipped or moved."""
    if (expression is None) == (job_file is None):
        raise click.UsageError("give an EXPRESSION or --file JOB.yaml (one of them)")
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
            assert job.schedule is not None
            schedule, hash_key = job.schedule, job.key
        else:
            schedule = _schedule_from_options(expression or "", timezone)
            hash_key = job_key
    except SpecError as error:
        _fail_with(error.errors, job_file)
    after = _parse_after(after_text, schedule.timezone) if after_text else clock()
    compiled = compile_schedule(schedule, hash_key=hash_key, anchor=after)
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

    from jobsched.core.errors import field_errors

    try:
        return Schedule.model_validate({"expression": expression, "timezone": timezone})
    except ValidationError as error:
        problems = field_errors(error, Schedule)
        renamed = {"expression": "EXPRESSION", "timezone": "--tz"}
        raise SpecError([FieldError(renamed.get(p.path, p.path), p.code, p.message) for p in problems]) from None


def _parse_after(text: str, timezone: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"'{text}' is not an ISO-8601 date and time", param_hint="--after") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=get_zone(timezone))
    return value.astimezone(UTC)


def _fail_with(errors: list[FieldError], path: Path | None) -> None:
    for error in errors:
        click.echo(f"{path}: {error}" if path else str(error), err=True)
    sys.exit(1)


def _utc(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _local(occurrence: Occurrence, compiled: CompiledSchedule) -> datetime | None:
    return occurrence.at.astimezone(compiled.zone) if occurrence.exists else None


def _local_text(occurrence: Occurrence, compiled: CompiledSchedule) -> str:
    local = _local(occurrence, compiled)
    if local is None:
        return f"{occurrence.wall:%a %Y-%m-%d %H:%M} (does not exist)"
    return f"{local:%a %Y-%m-%d %H:%M:%S %Z}"


def _print_preview(
    compiled: CompiledSchedule, after: datetime, entries: list[tuple[Occurrence, list[Occurrence]]]
) -> None:
    schedule = compiled.schedule
    click.echo(f"# {schedule.expression} in {schedule.timezone}, after {_utc(after)}", err=True)
    for fire, skipped in entries:
        for skip in skipped:
            utc = _utc(skip.at) if skip.exists else "-" * 20
            click.echo(f"  skipped {utc}  {_local_text(skip, compiled)}  {skip.reason}")
        line = f"{_utc(fire.at)}  {_local_text(fire, compiled)}"
        if fire.fire_at != fire.at:
            line += f"  fires at {_utc(fire.fire_at)} (jitter +{int((fire.fire_at - fire.at).total_seconds())}s)"
        if fire.reason:
            line += f"  ({fire.reason})"
        click.echo(line)


def _fire_json(fire: Occurrence, skipped: list[Occurrence], compiled: CompiledSchedule) -> dict[str, Any]:
    local = _local(fire, compiled)
    assert local is not None
    entry: dict[str, Any] = {
        "utc": _utc(fire.at),
        "local": local.isoformat(),
        "zone": compiled.schedule.timezone,
        "abbreviation": local.tzname(),
    }
    if fire.fire_at != fire.at:
        entry["fire_at"] = _utc(fire.fire_at)
    if fire.reason:
        entry["reason"] = fire.reason
    if fire.moved_from:
        entry["moved_from"] = [wall.isoformat() for wall in fire.moved_from]
    if skipped:
        entry["skipped"] = [
            {
                "utc": _utc(skip.at) if skip.exists else None,
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
def capacity(paths: tuple[Path, ...], days: int, after_text: str | None, target_p99: float) -> None:
    """Size a deployment for job files: the peak minute of the next DAYS, the CDK settings and AWS quotas
    that peak needs (from the scale model, scripts/bench_scale.py), and the monthly cost."""
    from jobsched.planning.capacity import load_profile, size_for

    results = validate_files(paths)
    bad = [result for result in results if result.errors]
    for result in bad:
        for error in result.errors:
            click.echo(f"{result.path}: {error}", err=True)
    if bad or not results:
        click.echo("fix the job files first" if bad else "no job files (.yaml, .yml, .json) found", err=True)
        sys.exit(1)
    start = _parse_after(after_text, "UTC") if after_text else clock()
    profile = load_profile((r.job for r in results if r.job is not None), start=start, days=days)
    minute, peak = profile.peak()
    sizing = size_for(profile, target_p99_s=target_p99)
    d = sizing.deployment
    click.echo(f"{profile.jobs} jobs ({profile.scheduled} scheduled), {_utc(start)} + {days} days:")
    click.echo(f"  runs: {profile.total:,} ({profile.runs_per_month():,.0f} a month)")
    click.echo(f"  peak minute: {_utc(minute)} with {peak:,} runs due")
    for other, runs in sorted(profile.per_minute.items(), key=lambda item: -item[1])[1:4]:
        click.echo(f"    then {_utc(other)}: {runs:,}")
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
    click.echo("AWS quotas that peak needs (Service Quotas; defaults in README 'Sizing for a burst'):")
    click.echo(f"  Lambda concurrent executions: >= {sizing.account_concurrency:,} (default 1,000)")
    click.echo(f"  DynamoDB table write throughput: >= {max(sizing.peak_wcu, 1):,.0f} units/s (default 40,000)")
    click.echo(f"  peak worker invocations at once: {sizing.peak_concurrency:,}")
    click.echo(f"monthly cost: ${sizing.monthly_cost_usd:,.2f} (prod idle + runs at the measured price per run)")


def main() -> None:
    cli()


# ------------------------------------------------------------------------------ remote commands


def make_transport(api_url: str) -> Any:
    """The HTTP transport for ``api_url`` (tests substitute an in-process one)."""
    from jobsched.client import HttpTransport

    return HttpTransport(api_url)


def remote(function: Callable[..., None]) -> Callable[..., None]:
    """Adds --api and -o, builds the client, and maps failures to exit codes 1 (input) and 2 (service)."""
    import functools

    from jobsched.client import API_ENV, LOCAL_API, ApiClient, ClientError, ServiceError

    @click.option("--api", "api_url", envvar=API_ENV, default=LOCAL_API, show_default=True, help="API base URL.")
    @click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
    @functools.wraps(function)
    def wrapper(*args: Any, api_url: str, output: str, **kwargs: Any) -> None:
        client = ApiClient(make_transport(api_url))
        try:
            function(*args, client=client, output=output, **kwargs)
        except ClientError as error:
            where = f" ({error.field})" if error.field else ""
            click.echo(f"error: {error}{where}", err=True)
            for detail in error.errors[1:]:
                click.echo(f"  {detail.get('field')}: {detail.get('message')}", err=True)
            sys.exit(1)
        except ServiceError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(2)

    return wrapper


def _job_ref(reference: str, team: str | None) -> tuple[str, str]:
    if "/" in reference:
        owner, _, name = reference.partition("/")
        return owner, name
    if not team:
        raise click.UsageError(f"name the team: TEAM/{reference} or --team TEAM")
    return team, reference


def _emit(data: Any, output: str, columns: list[tuple[str, str]] | None = None) -> None:
    import yaml

    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    elif output == "yaml" or columns is None:
        click.echo(yaml.safe_dump(data, sort_keys=False).rstrip())
    else:
        rows = data if isinstance(data, list) else [data]
        table = [[header for header, _ in columns]] + [[_cell(row, key) for _, key in columns] for row in rows]
        widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
        for line in table:
            click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


def _cell(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    if key == "depends_on" and isinstance(value, list):
        return ",".join(value) or "-"
    if isinstance(value, list):
        return str(value[0]) if value else "-"
    return "-" if value is None else str(value)


JOB_COLUMNS = [
    ("TEAM", "team"),
    ("NAME", "name"),
    ("STATE", "state"),
    ("VERSION", "version"),
    ("NEXT", "next_fire_times"),
]
RUN_COLUMNS = [
    ("RUN", "run_id"),
    ("STATUS", "status"),
    ("ATTEMPT", "attempt"),
    ("TRIGGER", "trigger"),
    ("STARTED", "started_at"),
    ("ERROR", "error"),
]

TASK_COLUMNS = [
    ("TASK", "name"),
    ("STATUS", "status"),
    ("ATTEMPT", "attempt"),
    ("AFTER", "depends_on"),
    ("STARTED", "started_at"),
    ("FINISHED", "finished_at"),
    ("ERROR", "error"),
]


@cli.command()
@click.option(
    "-f",
    "--file",
    "paths",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Job file or directory (repeatable).",
)
@click.option("--team", help="Only the jobs of this team.")
@click.option("--prune", is_flag=True, help="Delete the team's jobs that no file defines any more.")
@click.option("--dry-run", is_flag=True, help="Show what would change, with fire times over the next 7 days.")
@click.option("--yes", is_flag=True, help="Do not ask before pruning.")
@remote
def apply(
    paths: tuple[Path, ...], team: str | None, prune: bool, dry_run: bool, yes: bool, client: Any, output: str
) -> None:
    """Create or update jobs from files: created / changed / unchanged per job."""
    results = validate_files(paths)
    failed = [(r.path, e) for r in results for e in r.errors]
    for path, error in failed:
        click.echo(f"{path}: {error}", err=True)
    if failed:
        sys.exit(1)
    specs = [r.job for r in results if r.job is not None and (team is None or r.job.team == team)]
    now = clock()
    report: list[dict[str, Any]] = []
    for spec in specs:
        current = client.call("GET", f"/teams/{spec.team}/jobs/{spec.name}", allow=(404,))
        new = spec.model_dump(mode="json", exclude_none=True)
        old = _normalized(current.body["spec"]) if current.status == 200 else None
        action = "created" if old is None else ("unchanged" if old == new else "changed")
        if dry_run and action != "unchanged":
            _print_change(spec.key, old, new, now)
        if not dry_run and action != "unchanged":
            headers = {"If-Match": str(current.body["version"])} if current.status == 200 else {}
            client.call("PUT", f"/teams/{spec.team}/jobs/{spec.name}", new, headers=headers)
        report.append({"job": spec.key, "action": action})
    if prune:
        keep = {spec.key for spec in specs}
        for owner in sorted({spec.team for spec in specs} | ({team} if team else set())):
            for job in client.paged(f"/teams/{owner}/jobs", "jobs"):
                key = f"{job['team']}/{job['name']}"
                if key in keep:
                    continue
                if not dry_run and not yes and not click.confirm(f"delete {key}?", default=False):
                    continue
                if not dry_run:
                    client.call("DELETE", f"/teams/{owner}/jobs/{job['name']}")
                report.append({"job": key, "action": "deleted"})
    suffix = " (dry run)" if dry_run else ""
    if output == "table":
        for entry in report:
            click.echo(f"{entry['job']}: {entry['action']}{suffix}")
    else:
        _emit(report, output)


def _normalized(spec: dict[str, Any]) -> dict[str, Any]:
    from jobsched.core.spec import JobSpec

    return JobSpec.model_validate(spec).model_dump(mode="json", exclude_none=True)


def _print_change(key: str, old: dict[str, Any] | None, new: dict[str, Any], now: datetime) -> None:
    import difflib
    from datetime import timedelta

    import yaml

    from jobsched.core.spec import JobSpec

    before = yaml.safe_dump(old, sort_keys=True).splitlines() if old else []
    after = yaml.safe_dump(new, sort_keys=True).splitlines()
    for line in difflib.unified_diff(before, after, f"{key} (deployed)", f"{key} (file)", lineterm=""):
        click.echo(line)

    def fires(spec: dict[str, Any] | None) -> set[str]:
        if spec is None:
            return set()
        job = JobSpec.model_validate(spec)
        if job.schedule is None:
            return set()
        compiled = compile_schedule(job.schedule, hash_key=job.key, anchor=now)
        return {_utc(o.at) for o in compiled.fires(now, until=now + timedelta(days=7))}

    old_fires, new_fires = fires(old), fires(new)
    added, removed = sorted(new_fires - old_fires), sorted(old_fires - new_fires)
    click.echo(f"fire times over the next 7 days: +{len(added)} -{len(removed)}")
    for instant in added[:10]:
        click.echo(f"  + {instant}")
    for instant in removed[:10]:
        click.echo(f"  - {instant}")


@cli.group()
def get() -> None:
    """Show jobs."""


@get.command("jobs")
@click.option("--team", required=True)
@click.option("--state", type=click.Choice(["ACTIVE", "PAUSED"]))
@remote
def get_jobs(team: str, state: str | None, client: Any, output: str) -> None:
    """List a team's jobs."""
    _emit(client.paged(f"/teams/{team}/jobs", "jobs", {"state": state}), output, JOB_COLUMNS)


@get.command("job")
@click.argument("job")
@click.option("--team")
@remote
def get_job(job: str, team: str | None, client: Any, output: str) -> None:
    """Show one job (TEAM/NAME)."""
    owner, name = _job_ref(job, team)
    _emit(client.call("GET", f"/teams/{owner}/jobs/{name}").body, output, JOB_COLUMNS)


STRIP_MARKS = {
    "succeeded": ".",
    "retried": "r",
    "failed": "F",
    "timed_out": "T",
    "missed": "M",
    "skipped": "s",
    "cancelled": "c",
    "running": ">",
    "waiting": "w",
}
HEALTH_COLUMNS = [
    ("JOB", "job"),
    ("LAST RUNS (old->new)", "strip_marks"),
    ("SUCCESS", "success"),
    ("LATE P95", "lateness_p95_s"),
    ("DURATION P95", "duration_p95_s"),
    ("STREAK", "streak"),
    ("NEXT", "next_fire"),
    ("INCIDENTS", "incidents"),
]


@cli.command()
@click.argument("target")
@click.option("--window", default="7d", show_default=True, help="How far back the rates and percentiles look.")
@remote
def status(target: str, window: str, client: Any, output: str) -> None:
    """Health of a team's jobs, worst first (TEAM), or of one job (TEAM/JOB).

    LAST RUNS: . succeeded  r succeeded after a retry  F failed  T timed out  M missed  s skipped
    c cancelled  > running  w waiting.
    """
    if "/" in target:
        owner, name = target.split("/", 1)
        rows = [client.call("GET", f"/teams/{owner}/jobs/{name}/health", query={"window": window}).body]
    else:
        rows = client.paged(f"/teams/{target}/health", "jobs", {"window": window})
        # Each page comes worst first; across pages, the same order (open incidents, then success rate).
        rows.sort(key=lambda r: (-len(r["open_incidents"]), 1.0 if r["success_rate"] is None else r["success_rate"]))
    if output == "table":
        for row in rows:
            row["strip_marks"] = "".join(STRIP_MARKS.get(cell, "?") for cell in row["strip"]) or "-"
            rate = row["success_rate"]
            row["success"] = "-" if rate is None else f"{rate:.1%}"
            row["incidents"] = ",".join(row["open_incidents"]) or "-"
            if row["state"] == "PAUSED":
                row["next_fire"] = "paused"
    _emit(rows, output, HEALTH_COLUMNS)


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--yes", is_flag=True)
@remote
def delete(job: str, team: str | None, yes: bool, client: Any, output: str) -> None:
    """Delete a job (its runs are kept for their retention)."""
    owner, name = _job_ref(job, team)
    if not yes and not click.confirm(f"delete {owner}/{name}?", default=False):
        sys.exit(1)
    client.call("DELETE", f"/teams/{owner}/jobs/{name}")
    click.echo(f"{owner}/{name}: deleted")


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--reason", required=True)
@remote
def pause(job: str, team: str | None, reason: str, client: Any, output: str) -> None:
    """Pause a job: no new runs until resumed."""
    owner, name = _job_ref(job, team)
    _emit(client.call("POST", f"/teams/{owner}/jobs/{name}/pause", {"reason": reason}).body, output, JOB_COLUMNS)


@cli.command()
@click.argument("job")
@click.option("--team")
@remote
def resume(job: str, team: str | None, client: Any, output: str) -> None:
    """Resume a paused job (what fell in the pause does not run)."""
    owner, name = _job_ref(job, team)
    _emit(client.call("POST", f"/teams/{owner}/jobs/{name}/resume").body, output, JOB_COLUMNS)


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--payload", help="JSON to send instead of the job's payload.")
@click.option("--idempotency-key", help="The same key always gives the same run.")
@remote
def trigger(
    job: str, team: str | None, payload: str | None, idempotency_key: str | None, client: Any, output: str
) -> None:
    """Run a job now."""
    owner, name = _job_ref(job, team)
    try:
        body = {"payload": json.loads(payload)} if payload else None
    except json.JSONDecodeError as error:
        raise click.BadParameter(f"not JSON: {error}", param_hint="--payload") from None
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    run = client.call("POST", f"/teams/{owner}/jobs/{name}/trigger", body, headers=headers).body
    _emit(run, output, RUN_COLUMNS)


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--from", "start", required=True, help="ISO-8601 instant with offset.")
@click.option("--to", "end", required=True, help="ISO-8601 instant with offset.")
@click.option("--max-in-flight", default=5, show_default=True, type=click.IntRange(1, 100))
@click.option("--wait/--no-wait", default=True, show_default=True, help="Show progress until done.")
@remote
def backfill(
    job: str, team: str | None, start: str, end: str, max_in_flight: int, wait: bool, client: Any, output: str
) -> None:
    """Run a job's instants of a past range, at most --max-in-flight at a time."""
    import time

    owner, name = _job_ref(job, team)
    body = {"from": start, "to": end, "max_in_flight": max_in_flight}
    progress = client.call("POST", f"/teams/{owner}/jobs/{name}/backfill", body).body
    path = f"/teams/{owner}/jobs/{name}/backfills/{progress['backfill_id']}"
    if wait and output == "table":
        with click.progressbar(length=progress["total"], label=f"backfill {progress['backfill_id']}") as bar:
            done = 0
            while progress["state"] != "DONE":
                time.sleep(backfill_poll_seconds)
                progress = client.call("GET", path).body
                finished = sum(progress["finished"].values())
                bar.update(finished - done)
                done = finished
    _emit(progress, output, [("BACKFILL", "backfill_id"), ("STATE", "state"), ("TOTAL", "total"), ("SENT", "sent")])


backfill_poll_seconds = 2.0


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--status")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 100))
@remote
def runs(job: str, team: str | None, status: str | None, limit: int, client: Any, output: str) -> None:
    """A job's runs, newest first."""
    owner, name = _job_ref(job, team)
    page = client.call("GET", f"/teams/{owner}/jobs/{name}/runs", query={"limit": limit, "status": status}).body
    _emit(page["runs"], output, RUN_COLUMNS)


@cli.command()
@click.argument("job")
@click.argument("run_id")
@click.option("--team")
@remote
def run(job: str, run_id: str, team: str | None, client: Any, output: str) -> None:
    """One run: attempts, timings, lateness, error."""
    owner, name = _job_ref(job, team)
    body = client.call("GET", f"/teams/{owner}/jobs/{name}/runs/{run_id}").body
    _emit(body, output, RUN_COLUMNS)
    if output == "table" and body.get("tasks"):
        click.echo()
        _emit(body["tasks"], output, TASK_COLUMNS)


@cli.command()
@click.argument("job")
@click.argument("run_id")
@click.option("--team")
@remote
def cancel(job: str, run_id: str, team: str | None, client: Any, output: str) -> None:
    """Cancel a run that has not finished."""
    owner, name = _job_ref(job, team)
    _emit(client.call("POST", f"/teams/{owner}/jobs/{name}/runs/{run_id}/cancel").body, output, RUN_COLUMNS)


# ------------------------------------------------------------------------------------ local runtime

LOCAL_POINTER = Path.home() / ".jobsched-local" / "current"


@cli.group()
def local() -> None:
    """The whole scheduler on this machine: moto for AWS, the real handlers, the API on 127.0.0.1."""


@local.command("up")
@click.option("--port", default=8080, show_default=True, help="Port of the local API.")
@click.option("--tick", type=float, help="Seconds between dispatcher ticks (default: the rule's 60).")
@click.option("--as", "principal", help="Default caller ARN (default: a platform admin).")
@click.option("--no-examples", is_flag=True, help="Do not register the example jobs.")
@click.option(
    "--alarm-time-scale",
    type=float,
    help="Shrink alarm periods by this factor (default: 60/tick, so a 1 s tick makes a 5-minute period 5 s).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep tables here across restarts (default: a fresh state each start).",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def local_up(
    port: int,
    tick: float | None,
    principal: str | None,
    no_examples: bool,
    alarm_time_scale: float | None,
    state_dir: Path | None,
    log_level: str,
) -> None:
    """Start moto, deploy the app's template into it, and drive the handlers until Ctrl-C."""
    import logging
    import os
    import signal
    import threading

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("werkzeug", "botocore", "urllib3", "jsii"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ["POWERTOOLS_LOG_LEVEL"] = log_level.upper()
    from infra.local.runtime import DEFAULT_ADMIN, TEAM_PATTERN, LocalRuntime

    if state_dir:
        state_dir.mkdir(parents=True, exist_ok=True)
    runtime = LocalRuntime(
        port=port,
        tick_seconds=tick,
        principal=principal or DEFAULT_ADMIN,
        examples=not no_examples,
        state_dir=state_dir,
        alarm_time_scale=alarm_time_scale,
    )
    runtime.start()
    LOCAL_POINTER.parent.mkdir(parents=True, exist_ok=True)
    LOCAL_POINTER.write_text(str(runtime.state_dir))
    example = TEAM_PATTERN.format(team="payments")
    jobs = "team 'examples': hello (every minute), flaky (fails twice, then succeeds), callback"
    click.echo(
        f"""
jobsched is running locally.
  API          {runtime.api_url}   (AWS, in moto: {runtime.endpoint})
  CLI          export JOBSCHED_API={runtime.api_url}
  identity     requests act as {runtime.principal}
               X-Jobsched-Principal: {example}  acts as team payments
  examples     {jobs if not no_examples else "none (--no-examples)"}
  watch        jobsched runs examples/hello      jobsched local escalations
  state        {runtime.state_dir}
Ctrl-C stops everything."""
    )
    stopped = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    click.echo("stopping...")
    runtime.stop()


def _state_options(command: Callable[..., None]) -> Callable[..., None]:
    """--state-dir and -o for the commands that read what the local runtime keeps."""
    command = click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)(
        command
    )
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="The runtime's state directory (default: the one running or last run).",
    )(command)


def _state_file(state_dir: Path | None, name: str) -> Path | None:
    folder = state_dir or (Path(LOCAL_POINTER.read_text()) if LOCAL_POINTER.exists() else None)
    path = folder / name if folder else None
    return path if path and path.exists() else None


@local.command("escalations")
@_state_options
def local_escalations(state_dir: Path | None, output: str) -> None:
    """The pages the local runtime's escalation topic has delivered (what on-call would receive)."""
    path = _state_file(state_dir, "escalations.jsonl")
    events = [json.loads(line) for line in path.read_text().splitlines()] if path else []
    if output == "json":
        click.echo(json.dumps(events, indent=2))
        return
    if not events:
        click.echo("no escalations")
    for event in events:
        click.echo(f"{event.get('subject')}  ({event.get('notice')}, {event.get('kind')})")
        click.echo("    " + "\n    ".join(str(event.get("message", "")).splitlines()[1:]).strip())


@local.command("alarms")
@_state_options
def local_alarms(state_dir: Path | None, output: str) -> None:
    """Every alarm of the stack as the local runtime evaluates it: state, since when, and why."""
    path = _state_file(state_dir, "alarms.json")
    rows = json.loads(path.read_text()) if path else []
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no alarms evaluated yet (is `make run` up?)")
        return
    order = {"ALARM": 0, "INSUFFICIENT_DATA": 1, "OK": 2}
    for row in sorted(rows, key=lambda r: (order.get(r["state"], 3), r["alarm"])):
        since = datetime.fromtimestamp(row["since"], UTC).strftime("%H:%M:%S") if row["since"] else "-"
        click.echo(f"{row['state']:<17} {row['alarm']:<40} since {since}  {row['reason']}")
