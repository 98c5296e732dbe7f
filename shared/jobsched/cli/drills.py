"""``jobsched page test``: a marked test page through a job's escalation chain (or every job's of a team), what
became of each destination; ``jobsched page destinations``: when each of a team's destinations was last verified."""

from __future__ import annotations

from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import emit, job_ref, remote

RESULT_COLUMNS = [
    ("JOB", "job"),
    ("ROLE", "role"),
    ("DESTINATION", "destination"),
    ("ADDRESS", "address"),
    ("OUTCOME", "outcome"),
    ("REASON", "reason"),
]
DESTINATION_COLUMNS = [
    ("ADDRESS", "address"),
    ("KIND", "destination"),
    ("LAST", "last"),
    ("VERIFIED AT", "at"),
    ("JOBS", "jobs"),
]


@cli.group()
def page() -> None:
    """Paging drills: prove a page reaches someone before an incident does."""


@page.command("test")
@click.argument("job", required=False)
@click.option("--team", help="The job's team, if JOB does not say it (team/name).")
@click.option("--all", "all_of", metavar="TEAM", help="Every job of TEAM instead of one.")
@remote
def test(job: str | None, team: str | None, all_of: str | None, client: Any, output: str) -> None:
    """Send a clearly marked test page through JOB's chain (or --all TEAM's); exit 1 if any did not arrive."""
    if all_of is not None:
        view = client.call("POST", f"/teams/{all_of}/page-test").body
    elif job is not None:
        owner, name = job_ref(job, team)
        view = client.call("POST", f"/teams/{owner}/jobs/{name}/page-test").body
    else:
        raise click.UsageError("name a JOB, or --all TEAM")
    if output != "table":
        emit(view, output)
    else:
        emit([result | {"reason": result.get("reason") or "-"} for result in view["results"]], output, RESULT_COLUMNS)
    if any(result["outcome"] != "delivered" for result in view["results"]):
        raise SystemExit(1)


@page.command("destinations")
@click.argument("team")
@remote
def destinations(team: str, client: Any, output: str) -> None:
    """Where TEAM's jobs page, and when each destination was last verified by a drill (or never)."""
    view = client.call("GET", f"/teams/{team}/destinations").body
    if output != "table":
        emit(view, output)
        return
    rows = [
        {
            "address": d["address"],
            "destination": d["destination"],
            "last": d["last_outcome"] or "never verified",
            "at": d["last_verified_at"] or "-",
            "jobs": ", ".join(d["jobs"]),
        }
        for d in view["destinations"]
    ]
    emit(rows, output, DESTINATION_COLUMNS)
    click.echo(f"{view['never_verified']} never verified, {view['failing']} failing")
