"""``jobsched history``, ``rollback``, ``explain`` and ``ack``: who changed what, when and why; an old
spec back; why a job ran or did not at an instant; acknowledging an incident."""

from __future__ import annotations

import difflib
from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import JOB_COLUMNS, emit, job_ref, remote

HISTORY_COLUMNS = [
    ("AT", "at"),
    ("VERSION", "version"),
    ("ACTION", "action"),
    ("PRINCIPAL", "principal"),
    ("CONFIRMED BY", "confirmed_by"),
    ("REASON", "reason"),
    ("DETAILS", "details"),
]


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000), help="Entries, newest first.")
@click.option("--diff", "show_diff", is_flag=True, help="Show each spec change as a diff against the one before.")
@remote
def history(job: str, team: str | None, limit: int, show_diff: bool, client: Any, output: str) -> None:
    """A job's history, newest first: every spec version, pause and resume with their reasons, triggers,
    cancels, reruns, backfills, rollbacks; who did it and when."""
    owner, name = job_ref(job, team)
    entries = client.paged(f"/teams/{owner}/jobs/{name}/history", "entries", limit=limit)
    if output != "table":
        emit(entries, output)
    elif show_diff:
        print_diffs(f"{owner}/{name}", entries)
    else:
        rows = [
            {**entry, "details": summary(entry.get("details")), "confirmed_by": confirmed(entry)} for entry in entries
        ]
        emit(rows, output, HISTORY_COLUMNS)


def confirmed(entry: dict[str, Any]) -> str | None:
    return "UNCONFIRMED (see CloudTrail)" if entry.get("unconfirmed") else entry.get("confirmed_by")


def summary(details: dict[str, Any] | None) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted((details or {}).items()) if value not in (None, [], ""))


def print_diffs(key: str, entries: list[dict[str, Any]]) -> None:
    """Spec versions oldest first, each as a unified diff of its YAML against the previous one."""
    previous: list[str] = []
    label = f"{key} (none)"
    for entry in reversed(entries):
        heading = f"{entry['at']} v{entry['version']} {entry['action']} by {entry['principal']}"
        if entry.get("reason"):
            heading += f": {entry['reason']}"
        if entry.get("spec") is None:
            click.echo(f"# {heading}")
            continue
        import yaml

        current = yaml.safe_dump(entry["spec"], sort_keys=True).splitlines()
        click.echo(f"# {heading}")
        for line in difflib.unified_diff(previous, current, label, f"{key} v{entry['version']}", lineterm=""):
            click.echo(line)
        previous, label = current, f"{key} v{entry['version']}"


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--to-version", required=True, type=click.IntRange(1), help="The version whose spec comes back.")
@remote
def rollback(job: str, team: str | None, to_version: int, client: Any, output: str) -> None:
    """Apply an earlier version's spec again, as a new version (audited as a rollback)."""
    owner, name = job_ref(job, team)
    stored = client.call("POST", f"/teams/{owner}/jobs/{name}/rollback", {"to_version": to_version}).body
    emit(stored, output, JOB_COLUMNS)


@cli.command()
@click.argument("job")
@click.argument("instant")
@click.option("--team")
@remote
def explain(job: str, instant: str, team: str | None, client: Any, output: str) -> None:
    """Why JOB ran, will run, or did not run at INSTANT: an instant with its offset (2027-03-28T01:30:00Z) or a
    wall time in the job's timezone (2027-03-28T02:30)."""
    owner, name = job_ref(job, team)
    body = client.call("GET", f"/teams/{owner}/jobs/{name}/explain", query={"at": instant}).body
    if output != "table":
        emit(body, output)
        return
    click.echo(f"{body['job']} at {body['asked']} ({body['timezone']})")
    for note in body["notes"]:
        click.echo(f"note: {note}")
    for answer in body["answers"]:
        click.echo(f"\n{answer['at']} ({answer['wall']}): {answer['verdict'].upper()}")
        for line in answer["why"]:
            click.echo(f"  - {line}")
        for other in answer["other_runs"]:
            click.echo(f"  also: run {other['run_id']} ({other['trigger']}): {other['status']}")
    click.echo(f"\nnext fire: {body['next_fire'] or '-'}")


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option(
    "--class",
    "incident_class",
    type=click.Choice(["failing", "late", "quality", "approval", "stale", "anomaly"]),
    default="failing",
    show_default=True,
    help="Which of the job's open incidents.",
)
@click.option("--comment", default="", help="Kept in the job's history.")
@remote
def ack(job: str, team: str | None, incident_class: str, comment: str, client: Any, output: str) -> None:
    """Acknowledge JOB's open incident: you are named on it, and its secondary contact is not paged."""
    owner, name = job_ref(job, team)
    path = f"/teams/{owner}/jobs/{name}/incidents/{incident_class}/acknowledge"
    body = client.call("POST", path, {"comment": comment}).body
    if output != "table":
        emit(body, output)
        return
    click.echo(
        f"{owner}/{name} {incident_class}: acknowledged by {body['acknowledged_by']} at {body['acknowledged_at']}"
    )
