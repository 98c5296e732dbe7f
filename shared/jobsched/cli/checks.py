"""``jobsched lint`` and ``jobsched simulate``: the checks a team's CI runs on its job files (no API)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jobsched.cli import app
from jobsched.cli.app import cli
from jobsched.cli.offline import company_option, load_company, parse_instant_option

if TYPE_CHECKING:  # imported on use: the spec's models cost every CLI call otherwise (#46)
    from jobsched.core.spec import JobSpec
    from jobsched.registry.findings import Finding
    from jobsched.schedule.company import CompanySettings
    from jobsched.schedule.engine import Occurrence


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--policy", "policy_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--format", "output_format", type=click.Choice(["text", "json", "github"]), default="text", show_default=True
)
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@company_option
def lint(
    paths: tuple[Path, ...], policy_path: Path | None, output_format: str, strict: bool, company_path: Path | None
) -> None:
    """Check job files against the organisation's policy and the known mistakes (DST gaps and overlaps,
    herds, piling-up runs, deadlines shorter than timeouts, calendars that never fire, long catch-ups).
    Exit 0 clean (or warnings only), 1 errors (or warnings with --strict)."""
    from pydantic import ValidationError

    from jobsched.registry.lint import lint as lint_files
    from jobsched.registry.policy import OrgPolicy

    try:
        policy = OrgPolicy.load(policy_path) if policy_path else OrgPolicy()
    except (ValidationError, ValueError, OSError) as error:
        raise click.BadParameter(str(error).splitlines()[0], param_hint="--policy") from None
    findings = lint_files(paths, policy, now=app.clock(), company=load_company(company_path))
    if output_format == "json":
        click.echo(json.dumps([finding.as_dict() for finding in findings], indent=2))
    elif output_format == "github":
        for finding in findings:
            click.echo(github_annotation(finding))
    else:
        for finding in findings:
            where = f"{finding.file}:{finding.path}" if finding.path else finding.file
            click.echo(f"{where}: {finding.severity} {finding.rule}: {finding.message}")
            if finding.fix:
                click.echo(f"  fix: {finding.fix}")
        errors = sum(finding.severity == "error" for finding in findings)
        click.echo(f"{errors} error(s), {len(findings) - errors} warning(s)", err=True)
    if any(finding.severity == "error" for finding in findings) or (strict and findings):
        raise SystemExit(1)


def github_annotation(finding: Finding) -> str:
    """A GitHub Actions workflow command: the finding shows on the file in the pull request."""

    def escape(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def escape_property(text: str) -> str:
        return escape(text).replace(":", "%3A").replace(",", "%2C")

    message = f"{finding.path}: {finding.message}" if finding.path else finding.message
    if finding.fix:
        message += f" (fix: {finding.fix})"
    where = f"file={escape_property(finding.file)},title={escape_property(finding.rule)}"
    return f"::{finding.severity} {where}::{escape(message)}"


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--from", "start_text", required=True, help="ISO-8601 date and time (UTC if no offset).")
@click.option("--to", "end_text", required=True, help="ISO-8601 date and time (UTC if no offset).")
@click.option("--json", "as_json", is_flag=True, help="The summary as JSON.")
@click.option("--fires", "stream", is_flag=True, help="Also print every instant as it is computed (JSON lines).")
@click.option("--top", default=10, show_default=True, type=click.IntRange(1, 1000), help="Busiest minutes shown.")
@company_option
@click.option(
    "--compare",
    "compare_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A changed company file: list the jobs whose instants in the range it moves (added, removed).",
)
def simulate(
    paths: tuple[Path, ...],
    start_text: str,
    end_text: str,
    as_json: bool,
    stream: bool,
    top: int,
    company_path: Path | None,
    compare_path: Path | None,
) -> None:
    """Every instant of the jobs in a range (no cap): per job the fires, the instants skipped and moved
    by reason and the DST events met; across all jobs the busiest minutes. With --compare, what a change to the
    company calendars and windows (--company: as they are) does to each job's instants."""
    from jobsched.planning.simulate import simulate as run_simulation
    from jobsched.registry.jobfile import validate_files
    from jobsched.schedule.steps import ScheduleTooExpensive

    start = parse_instant_option(start_text, "UTC", "--from")
    end = parse_instant_option(end_text, "UTC", "--to")
    if end <= start:
        raise click.BadParameter("must be after --from", param_hint="--to")
    results = validate_files(paths)
    invalid = [(r.path, e) for r in results for e in r.errors]
    for path, error in invalid:
        click.echo(f"{path}: {error}", err=True)
    if invalid:
        raise SystemExit(1)
    specs = [r.job for r in results if r.job is not None]
    company = load_company(company_path)
    if compare_path is not None:
        print_company_change(specs, company, load_company(compare_path, "--compare"), start, end, as_json)
        return

    def echo_occurrence(spec: JobSpec, occurrence: Occurrence) -> None:
        click.echo(json.dumps(occurrence_line(spec, occurrence)))

    try:
        result = run_simulation(
            specs, start=start, end=end, on_occurrence=echo_occurrence if stream else None, company=company
        )
    except ScheduleTooExpensive as error:
        raise click.ClickException(str(error)) from None
    summary = {
        "from": start.isoformat(),
        "to": end.isoformat(),
        "fires": result.fires,
        "jobs": [
            {
                "job": job.job,
                "fires": job.fires,
                "skipped": dict(job.skipped),
                "moved": dict(job.moved),
                "dst_events": job.dst_events,
            }
            for job in result.jobs
        ],
        "busiest_minutes": [{"minute": minute.isoformat(), "fires": count} for minute, count in result.busiest(top)],
    }
    if as_json or stream:
        click.echo(json.dumps(summary, indent=None if stream else 2))
        return
    print_summary(summary)


def print_company_change(
    specs: list[JobSpec], before: CompanySettings, after: CompanySettings, start: Any, end: Any, as_json: bool
) -> None:
    """The jobs whose instants in (start, end] the changed company file moves; exit 0 either way."""
    from jobsched.planning.company import compare_fires
    from jobsched.schedule.steps import ScheduleTooExpensive

    try:
        moved = compare_fires(specs, before, after, start=start, end=end)
    except ScheduleTooExpensive as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        click.echo(json.dumps({"moved": [m.as_dict() for m in moved]}, indent=2))
        return
    click.echo(f"{len(moved)} of {len(specs)} job(s) move between {start.isoformat()} and {end.isoformat()}")
    for job in moved:
        click.echo(f"  {job.job}: +{len(job.added)} -{len(job.removed)} instant(s)")
        for instant in job.removed[:5]:
            click.echo(f"    - {instant}")
        for instant in job.added[:5]:
            click.echo(f"    + {instant}")


def occurrence_line(spec: JobSpec, occurrence: Occurrence) -> dict[str, Any]:
    line: dict[str, Any] = {"job": spec.key, "at": occurrence.at.isoformat(), "fires": occurrence.fires}
    if occurrence.reason:
        line["reason"] = occurrence.reason
    return line


def print_summary(summary: dict[str, Any]) -> None:
    click.echo(f"{summary['fires']} fires from {summary['from']} to {summary['to']}")
    for job in summary["jobs"]:
        skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(job["skipped"].items())) or "none"
        moved = ", ".join(f"{n} {kind}" for kind, n in sorted(job["moved"].items())) or "none"
        click.echo(f"{job['job']}: {job['fires']} fires; skipped: {skipped}; moved: {moved}")
        for event in job["dst_events"][:10]:
            click.echo(f"  DST: {event}")
        if len(job["dst_events"]) > 10:
            click.echo(f"  DST: ... {len(job['dst_events']) - 10} more")
    click.echo("busiest minutes (UTC):")
    for entry in summary["busiest_minutes"]:
        click.echo(f"  {entry['minute']}  {entry['fires']} fires")
