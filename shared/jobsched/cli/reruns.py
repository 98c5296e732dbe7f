"""``jobsched rerun``: run a finished run again with its own instant, or a range of runs by status."""

from __future__ import annotations

from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import RUN_COLUMNS, emit, job_ref, remote

RERUN_STATUSES = ("FAILED", "TIMED_OUT", "MISSED", "SKIPPED", "CANCELLED", "SUCCEEDED")
PROGRESS_COLUMNS = [
    ("BACKFILL", "backfill_id"),
    ("STATE", "state"),
    ("TOTAL", "total"),
    ("SENT", "sent"),
    ("RERUN", "rerun"),
    ("IN FLIGHT", "in_flight"),
]


def statuses(value: str | None) -> list[str]:
    chosen = [part.strip().upper() for part in (value or "").split(",") if part.strip()]
    unknown = [status for status in chosen if status not in RERUN_STATUSES]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}; allowed: {', '.join(RERUN_STATUSES)}", param_hint="--status")
    return chosen


@cli.command()
@click.argument("job")
@click.argument("run_id", required=False)
@click.option("--team")
@click.option("--force", is_flag=True, help="Also a run that SUCCEEDED.")
@click.option(
    "--downstream",
    is_flag=True,
    help="When it finishes, rerun the jobs after it for the same instant; with --tasks: and the tasks after them.",
)
@click.option(
    "--from-failure",
    is_flag=True,
    help="A DAG run: keep what succeeded, run the failed tasks and what depends on them.",
)
@click.option("--tasks", "task_names", metavar="A,B", help="A DAG run: run these tasks again (comma-separated).")
@click.option("--from", "start", help="A range: ISO-8601 instant with offset.")
@click.option("--to", "end", help="A range: ISO-8601 instant with offset.")
@click.option("--status", "status_text", help=f"A range: which ended runs to run again ({','.join(RERUN_STATUSES)}).")
@click.option("--max-in-flight", default=5, show_default=True, type=click.IntRange(1, 100))
@click.option("--rate", "rate_per_minute", type=click.IntRange(1, 6000), help="A range: at most this many a minute.")
@click.option("--priority", type=click.Choice(["high", "normal", "low"]), help="A range: the class to run in.")
@click.option("--cancel", "cancel_id", metavar="BACKFILL_ID", help="Stop a range rerun (or backfill) by its id.")
@remote
def rerun(
    job: str,
    run_id: str | None,
    team: str | None,
    force: bool,
    downstream: bool,
    from_failure: bool,
    task_names: str | None,
    start: str | None,
    end: str | None,
    status_text: str | None,
    max_in_flight: int,
    rate_per_minute: int | None,
    priority: str | None,
    cancel_id: str | None,
    client: Any,
    output: str,
) -> None:
    """Run again, with its own scheduled instant: one run (TEAM/JOB RUN_ID), or every run of a range
    that ended in --status (TEAM/JOB --from --to --status FAILED,MISSED). Same run ids, new attempts. A DAG
    run is re-executed: every task, or --from-failure, or --tasks a,b [--downstream]."""
    owner, name = job_ref(job, team)
    base = f"/teams/{owner}/jobs/{name}"
    if cancel_id:
        emit(client.call("DELETE", f"{base}/backfills/{cancel_id}").body, output, PROGRESS_COLUMNS)
    elif run_id:
        asked: dict[str, Any] = {"force": force, "downstream": downstream, "from_failure": from_failure}
        if task_names:
            asked["tasks"] = [name.strip() for name in task_names.split(",") if name.strip()]
        emit(client.call("POST", f"{base}/runs/{run_id}/rerun", asked).body, output, RUN_COLUMNS)
    else:
        chosen = statuses(status_text)
        if not (start and end and chosen):
            raise click.UsageError("give RUN_ID, or a range: --from, --to and --status")
        body: dict[str, Any] = {"from": start, "to": end, "status": chosen, "max_in_flight": max_in_flight}
        body["downstream"] = downstream
        body |= {k: v for k, v in (("rate_per_minute", rate_per_minute), ("priority", priority)) if v is not None}
        emit(client.call("POST", f"{base}/reruns", body).body, output, PROGRESS_COLUMNS)
