"""``jobsched company``: the company calendars and maintenance windows jobs name as company/NAME. Everyone lists them
(``-o yaml`` writes the file the offline commands take with --company); platform admins set and delete them, each
change showing which jobs' next fires move (``--dry-run``: only that)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import emit, remote

KINDS = {"calendar": "calendars", "maintenance": "maintenance"}


@cli.group()
def company() -> None:
    """Company calendars and maintenance windows (company/NAME)."""


@company.command("list")
@remote
def list_company(client: Any, output: str) -> None:
    """Every company calendar and maintenance window (-o yaml: the file `--company` takes offline)."""
    found = client.call("GET", "/company").body
    if output != "table":
        emit(found, output)
        return
    for name, calendar in sorted(found["calendars"].items()):
        click.echo(f"calendar company/{name}: {calendar.get('description') or _calendar_summary(calendar)}")
    for name, window in sorted(found["maintenance"].items()):
        cron = window.get("cron")
        when = f"'{cron}' for {window['duration']}" if cron else f"{window['start']} to {window['end']}"
        selector = window.get("applies_to")
        scope = f", and jobs of {', '.join(selector['teams'])} it selects" if selector else ""
        click.echo(f"maintenance company/{name}: {when} {window.get('timezone', 'UTC')}, {window['action']}{scope}")


def _calendar_summary(calendar: dict[str, Any]) -> str:
    parts = []
    if calendar.get("skip_holidays"):
        parts.append(f"holidays of {calendar['skip_holidays']}")
    if calendar.get("business_days_only"):
        parts.append("business days only")
    if calendar.get("exclude_dates"):
        parts.append(f"{len(calendar['exclude_dates'])} excluded date(s)")
    if calendar.get("freezes"):
        parts.append(f"{len(calendar['freezes'])} freeze(s)")
    return ", ".join(parts) or "no exclusions"


@company.command("set")
@click.argument("kind", type=click.Choice(sorted(KINDS)))
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--reason", required=True, help="Why: kept in the company's history.")
@click.option("--dry-run", is_flag=True, help="Only show which jobs' next fires move (and what it would break).")
@remote
def set_entry(kind: str, name: str, file: Path, reason: str, dry_run: bool, client: Any, output: str) -> None:
    """Set a company calendar or maintenance window from a YAML FILE (its document, or a company file holding it):
    the jobs whose next fires it moves are listed; refused (exit 1) if a job it reaches would break the policy."""
    import yaml

    document = yaml.safe_load(file.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise click.BadParameter(f"{file} holds no mapping", param_hint="FILE")
    if set(document) & set(KINDS.values()):  # a whole company file (`list -o yaml`): the entry named NAME in it
        entries = document.get(KINDS[kind]) or {}
        if name not in entries:
            raise click.BadParameter(f"{file} has no {kind} {name}", param_hint="FILE")
        document = entries[name]
    document = json.loads(json.dumps(document, default=str))  # YAML's dates and times as the API reads them: text
    query = {"reason": reason, "dry_run": str(dry_run).lower()}
    change = client.call("PUT", f"/admin/company/{KINDS[kind]}/{name}", document, query=query).body
    _show(change, output)


@company.command("delete")
@click.argument("kind", type=click.Choice(sorted(KINDS)))
@click.argument("name")
@click.option("--reason", required=True, help="Why: kept in the company's history.")
@remote
def delete_entry(kind: str, name: str, reason: str, client: Any, output: str) -> None:
    """Delete a company calendar or maintenance window (refused while jobs name it)."""
    _show(client.call("DELETE", f"/admin/company/{KINDS[kind]}/{name}", query={"reason": reason}).body, output)


@company.command("history")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@remote
def history(limit: int, client: Any, output: str) -> None:
    """Changes to the company calendars and windows, newest first: who, when, why, and the jobs each moved."""
    entries = client.paged("/admin/company/history", "entries", limit=limit)
    columns = [("AT", "at"), ("BY", "principal"), ("ACTION", "action"), ("REASON", "reason")]
    emit(entries, output, columns)


def _show(change: dict[str, Any], output: str) -> None:
    if output != "table":
        emit(change, output)
    else:
        state = "applied" if change["applied"] else ("refused" if change["refused"] else "dry run: not applied")
        click.echo(f"{change['entry']}: {state}; reaches {change['reached']} job(s), moves {len(change['moved'])}")
        for moved in change["moved"]:
            click.echo(f"  {moved['job']}: next {', '.join(moved['before'][:3]) or 'none'}")
            click.echo(f"  {' ' * len(moved['job'])}  now  {', '.join(moved['after'][:3]) or 'none'}")
        for refused in change["refused"]:
            click.echo(f"  refused: {refused['field']}: {refused['message']}")
    if change["refused"]:
        raise SystemExit(1)
