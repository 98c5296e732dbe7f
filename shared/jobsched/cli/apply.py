"""``jobsched apply -f DIR``: a folder of job files (a git folder, the source of truth) made what is deployed. Jobs go
in dependency order, each file is reported on its own (one refusal does not stop the others), ``--prune`` deletes
the jobs no file defines any more (downstreams first), and ``--dry-run`` shows all of it without changing anything."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jobsched.cli import app
from jobsched.cli.app import cli
from jobsched.cli.offline import utc_text
from jobsched.cli.remote import emit, remote
from jobsched.client import ClientError

if TYPE_CHECKING:
    from jobsched.core.spec import JobSpec
    from jobsched.schedule.company import CompanySettings


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
    """Create or update jobs from files, upstreams first: created / changed / unchanged / refused per file."""
    from jobsched.core.spec import JobSpec  # imported on use: the spec's models cost every CLI call otherwise (#46)
    from jobsched.registry.apply_order import upstreams_first
    from jobsched.registry.jobfile import validate_files

    results = validate_files(paths)
    failed = [(r.path, e) for r in results for e in r.errors]
    for path, error in failed:
        click.echo(f"{path}: {error}", err=True)
    if failed:
        sys.exit(1)
    files = {r.job.key: r.path for r in results if r.job is not None}
    specs = [r.job for r in results if r.job is not None and (team is None or r.job.team == team)]
    company = functools.cache(lambda: _deployed_company(client))  # read once, on the first diff that needs it
    report = [
        _apply_one(client, spec, files[spec.key], dry_run, app.clock(), company)
        for spec in upstreams_first(specs, lambda spec: spec.key, JobSpec.upstreams)
    ]
    if prune:
        report += _prune(client, {spec.key for spec in specs}, {spec.team for spec in specs}, team, dry_run, yes)
    suffix = " (dry run)" if dry_run else ""
    if output == "table":
        for entry in report:
            why = f": {entry['error']}" if entry.get("error") else ""
            where = f"  ({entry['file']})" if entry.get("error") and entry.get("file") else ""
            click.echo(f"{entry['job']}: {entry['action']}{suffix}{why}{where}")
            for warning in entry.get("warnings", []):
                click.echo(f"  warning: {warning}")
    else:
        emit(report, output)
    if any(entry["action"] == "refused" for entry in report):
        sys.exit(1)


def _deployed_company(client: Any) -> CompanySettings:
    """The deployment's company calendars and windows (GET /company), for a diff's fire times."""
    from jobsched.schedule.company import CompanySettings

    return CompanySettings.from_document(client.call("GET", "/company").body)


def _apply_one(
    client: Any, spec: JobSpec, path: Path, dry_run: bool, now: datetime, company: Callable[[], CompanySettings]
) -> dict[str, Any]:
    """PUT one job if it differs from what is deployed (If-Match: the version read); print the diff on a dry run.
    A refusal is this file's answer, not the end of the folder."""
    entry: dict[str, Any] = {"job": spec.key, "file": str(path)}
    try:
        current = client.call("GET", f"/teams/{spec.team}/jobs/{spec.name}", allow=(404,))
        new = spec.model_dump(mode="json", exclude_none=True)
        old = _normalized(current.body["spec"]) if current.status == 200 else None
        action = "created" if old is None else ("unchanged" if old == new else "changed")
        if dry_run and action != "unchanged":
            _print_change(spec.key, old, new, now, company)
        if not dry_run and action != "unchanged":
            headers = {"If-Match": str(current.body["version"])} if current.status == 200 else {}
            stored = client.call("PUT", f"/teams/{spec.team}/jobs/{spec.name}", new, headers=headers).body
            warnings = [f"{w['field']}: {w['message']}" for w in (stored or {}).get("warnings") or []]
            if warnings:
                entry["warnings"] = warnings
    except ClientError as refused:
        where = f" ({refused.field})" if refused.field else ""
        return entry | {"action": "refused", "error": f"{refused.code}{where}: {refused}"}
    return entry | {"action": action}


def _prune(
    client: Any, keep: set[str], teams: set[str], team: str | None, dry_run: bool, yes: bool
) -> list[dict[str, Any]]:
    """Delete the teams' deployed jobs that no file defines (asking first unless --yes), downstreams first."""
    from jobsched.core.spec import JobSpec
    from jobsched.registry.apply_order import downstreams_first

    gone = [
        job
        for owner in sorted(teams | ({team} if team else set()))
        for job in client.paged(f"/teams/{owner}/jobs", "jobs")
        if _key(job) not in keep
    ]
    deleted = []
    for job in downstreams_first(gone, _key, lambda job: JobSpec.model_validate(job["spec"]).upstreams()):
        key = _key(job)
        if not dry_run and not yes and not click.confirm(f"delete {key}?", default=False):
            continue
        entry: dict[str, Any] = {"job": key, "action": "deleted"}
        if not dry_run:
            try:
                client.call("DELETE", f"/teams/{job['team']}/jobs/{job['name']}")
            except ClientError as refused:
                entry = {"job": key, "action": "refused", "error": f"{refused.code}: {refused}"}
        deleted.append(entry)
    return deleted


def _key(job: dict[str, Any]) -> str:
    return f"{job['team']}/{job['name']}"


def _normalized(spec: dict[str, Any]) -> dict[str, Any]:
    from jobsched.core.spec import JobSpec

    return JobSpec.model_validate(spec).model_dump(mode="json", exclude_none=True)


def _print_change(
    key: str, old: dict[str, Any] | None, new: dict[str, Any], now: datetime, company: Callable[[], CompanySettings]
) -> None:
    import difflib

    import yaml

    from jobsched.core.spec import JobSpec
    from jobsched.schedule.company import NO_COMPANY
    from jobsched.schedule.fires import preview_schedule

    before = yaml.safe_dump(old, sort_keys=True).splitlines() if old else []
    after = yaml.safe_dump(new, sort_keys=True).splitlines()
    for line in difflib.unified_diff(before, after, f"{key} (deployed)", f"{key} (file)", lineterm=""):
        click.echo(line)

    def fires(spec: dict[str, Any] | None) -> set[str]:
        if spec is None:
            return set()
        job = JobSpec.model_validate(spec)
        compiled = preview_schedule(
            job, registered_at=now, company=company() if job.company_references() else NO_COMPANY
        )
        if compiled is None:
            return set()
        return {utc_text(o.at) for o in compiled.fires(now, until=now + timedelta(days=7))}

    from jobsched.core.prices import US_EAST_1
    from jobsched.planning.forecast import forecast

    def expected(spec: dict[str, Any] | None) -> Any:
        if spec is None:
            return None
        job = JobSpec.model_validate(spec)
        settings = company() if job.company_references() else NO_COMPANY
        return forecast(job, now=now, company=settings, prices=US_EAST_1)

    after_forecast = expected(new)
    click.echo(f"cost: {after_forecast.change_from(expected(old))} (the scheduler's share, us-east-1 list prices)")
    old_fires, new_fires = fires(old), fires(new)
    added, removed = sorted(new_fires - old_fires), sorted(old_fires - new_fires)
    click.echo(f"fire times over the next 7 days: +{len(added)} -{len(removed)}")
    for instant in added[:10]:
        click.echo(f"  + {instant}")
    for instant in removed[:10]:
        click.echo(f"  - {instant}")
