"""``jobsched snooze`` and ``jobsched resolve``: work a job's open incident (``jobsched ack`` says you are on it).
Each is audited in the job's history."""

from __future__ import annotations

from typing import Any

import click

from jobsched.cli import app
from jobsched.cli.app import cli
from jobsched.cli.remote import emit, job_ref, remote

INCIDENT_CLASSES = ["failing", "late", "quality", "approval", "stale", "anomaly"]


def incident_option(function: Any) -> Any:
    return click.option(
        "--class",
        "incident_class",
        type=click.Choice(INCIDENT_CLASSES),
        default="failing",
        show_default=True,
        help="Which of the job's open incidents.",
    )(function)


@cli.command()
@click.argument("job")
@click.option("--team", help="The job's team, if JOB does not say it (team/name).")
@incident_option
@click.option("--until", "until", required=True, help="An instant (2027-01-04T18:00:00Z) or a span from now (2h).")
@click.option("--reason", required=True, help="Why (kept in the job's history).")
@remote
def snooze(job: str, team: str | None, incident_class: str, until: str, reason: str, client: Any, output: str) -> None:
    """No page for JOB's open incident before UNTIL (its events are still counted); at most 7 days ahead."""
    from jobsched.core.durations import parse_duration
    from jobsched.core.runs import instant_text

    try:
        instant = instant_text(app.clock() + parse_duration(until))
    except ValueError:
        instant = until  # an instant: the API checks it
    owner, name = job_ref(job, team)
    path = f"/teams/{owner}/jobs/{name}/incidents/{incident_class}/snooze"
    body = client.call("POST", path, {"until": instant, "reason": reason}).body
    if output != "table":
        emit(body, output)
        return
    click.echo(f"{owner}/{name} {incident_class}: snoozed until {body['snoozed_until']} by {body['snoozed_by']}")


@cli.command()
@click.argument("job")
@click.option("--team", help="The job's team, if JOB does not say it (team/name).")
@incident_option
@click.option("--reason", required=True, help="Why (in the resolve notice and the job's history).")
@remote
def resolve(job: str, team: str | None, incident_class: str, reason: str, client: Any, output: str) -> None:
    """Resolve JOB's open incident by hand: everyone who was paged gets the resolve notice with your reason."""
    owner, name = job_ref(job, team)
    path = f"/teams/{owner}/jobs/{name}/incidents/{incident_class}/resolve"
    body = client.call("POST", path, {"reason": reason}).body
    if output != "table":
        emit(body, output)
        return
    click.echo(f"{owner}/{name} {incident_class}: resolving (the notice goes to everyone who was paged)")
