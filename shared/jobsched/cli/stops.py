"""``jobsched resume`` (a job, or the jobs an emergency stop paused, with a catch-up) and ``jobsched stop`` (an
emergency stop by selector: teams, tags, target types)."""

from __future__ import annotations

from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import JOB_COLUMNS, emit, job_ref, remote


@cli.command()
@click.argument("job", required=False)
@click.option("--team")
@click.option("--stop", "stop_id", help="Resume exactly the jobs this emergency stop paused (jobsched stop).")
@click.option(
    "--catchup",
    type=click.Choice(["none", "latest", "all"]),
    help="With --stop: what fell in the stop runs (nothing, its latest instant, every instant as a backfill).",
)
@remote
def resume(
    job: str | None, team: str | None, stop_id: str | None, catchup: str | None, client: Any, output: str
) -> None:
    """Resume a paused job (what fell in the pause does not run), or with --stop the jobs an emergency stop
    paused, with --catchup."""
    if stop_id is not None:
        if job is not None or catchup is None:
            raise click.UsageError("--stop resumes a stop's jobs: give --catchup none|latest|all and no JOB")
        resumed = client.call("POST", f"/stops/{stop_id}/resume", {"catchup": catchup}).body
        if output != "table":
            emit(resumed, output)
            return
        click.echo(f"{stop_id}: resumed by {resumed['resumed_by']} at {resumed['resumed_at']} (catch-up {catchup})")
        emit(resumed["resumed"], output, [("JOB", "job"), ("OUTCOME", "outcome"), ("CATCH-UP", "catch_up")])
        return
    if job is None:
        raise click.UsageError("give a JOB, or --stop ID")
    owner, name = job_ref(job, team)
    emit(client.call("POST", f"/teams/{owner}/jobs/{name}/resume").body, output, JOB_COLUMNS)


@cli.command()
@click.option("--team", "teams", multiple=True, required=True, help="A team whose jobs it stops (repeat for more).")
@click.option("--tag", "tags", multiple=True, help="key=value: only jobs with this tag (repeat: all must match).")
@click.option("--target-type", "target_types", multiple=True, help="Only jobs calling this target type (repeat).")
@click.option("--reason", required=True, help="Why: on every job's history and the stop.")
@click.option("--cancel-running", is_flag=True, help="Also cancel the matching jobs' running runs.")
@remote
def stop(
    teams: tuple[str, ...],
    tags: tuple[str, ...],
    target_types: tuple[str, ...],
    reason: str,
    cancel_running: bool,
    client: Any,
    output: str,
) -> None:
    """Emergency stop: pause every job of the teams matching the tags and target types in one audited call;
    resume them with `jobsched resume --stop ID --catchup ...`."""
    pairs = {}
    for tag in tags:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"'{tag}' is not key=value", param_hint="--tag")
        pairs[key] = value
    body = {
        "teams": list(teams),
        "tags": pairs,
        "target_types": list(target_types),
        "reason": reason,
        "cancel_running": cancel_running,
    }
    stopped = client.call("POST", "/stops", body).body
    if output != "table":
        emit(stopped, output)
        return
    click.echo(f"{stopped['stop_id']}: stopped {len(stopped['stopped'])} job(s): {reason}")
    for key in stopped["stopped"]:
        click.echo(f"  paused  {key}")
    for key in stopped["already_paused"]:
        click.echo(f"  left    {key} (paused before)")
    for run in stopped["cancelled_runs"]:
        click.echo(f"  cancelled {run}")
    click.echo(f"resume: jobsched resume --stop {stopped['stop_id']} --catchup none|latest|all")
