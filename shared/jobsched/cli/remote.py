"""Commands that talk to a deployed API (or the local runtime's): apply, get, status, pause, trigger, runs..."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.core.names import CALLBACK_TOKEN_HEADER, Env, RunEnv


def make_transport(api_url: str) -> Any:
    """The HTTP transport for ``api_url`` (tests substitute an in-process one)."""
    from jobsched.client import HttpTransport

    return HttpTransport(api_url)


def remote(function: Callable[..., None]) -> Callable[..., None]:
    """Adds --api and -o, builds the client, and maps failures to exit codes 1 (input) and 2 (service)."""
    import functools

    from jobsched.client import LOCAL_API, ApiClient, ClientError, ServiceError

    @click.option(
        "--api", "api_url", envvar=[Env.API, RunEnv.API_URL], default=LOCAL_API, show_default=True, help="API base URL."
    )
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


def job_ref(reference: str, team: str | None) -> tuple[str, str]:
    if "/" in reference:
        owner, _, name = reference.partition("/")
        return owner, name
    if not team:
        raise click.UsageError(f"name the team: TEAM/{reference} or --team TEAM")
    return team, reference


def emit(data: Any, output: str, columns: list[tuple[str, str]] | None = None) -> None:
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
    if key == "why":  # what a run's or task's status does not say: its error, or why it skipped or waits
        waiting = ", ".join(row.get("waiting_for") or []) and "waiting for " + ", ".join(row["waiting_for"])
        return row.get("error") or row.get("reason") or waiting or "-"
    value = row.get(key)
    if key == "depends_on" and isinstance(value, list):
        return ",".join(value) or "-"
    if isinstance(value, list):
        return str(value[0]) if value else "-"
    if key == "items" and isinstance(value, dict):  # a map task's items
        return f"{value.get('succeeded', 0)}/{value.get('total', 0)} ok, {value.get('failed', 0)} failed"
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
    ("WHY", "why"),
]


TASK_COLUMNS = [
    ("TASK", "name"),
    ("STATUS", "status"),
    ("ATTEMPT", "attempt"),
    ("AFTER", "depends_on"),
    ("ITEMS", "items"),
    ("STARTED", "started_at"),
    ("FINISHED", "finished_at"),
    ("WHY", "why"),
]
CHECK_COLUMNS = [("CHECK", "name"), ("SEVERITY", "severity"), ("PASSED", "passed"), ("WHY", "message")]


@cli.group()
def get() -> None:
    """Show jobs."""


@get.command("jobs")
@click.option("--team", required=True)
@click.option("--state", type=click.Choice(["ACTIVE", "PAUSED"]))
@remote
def get_jobs(team: str, state: str | None, client: Any, output: str) -> None:
    """List a team's jobs."""
    emit(client.paged(f"/teams/{team}/jobs", "jobs", {"state": state}), output, JOB_COLUMNS)


@get.command("job")
@click.argument("job")
@click.option("--team")
@remote
def get_job(job: str, team: str | None, client: Any, output: str) -> None:
    """Show one job (TEAM/NAME)."""
    owner, name = job_ref(job, team)
    emit(client.call("GET", f"/teams/{owner}/jobs/{name}").body, output, JOB_COLUMNS)


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
    emit(rows, output, HEALTH_COLUMNS)


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--yes", is_flag=True)
@remote
def delete(job: str, team: str | None, yes: bool, client: Any, output: str) -> None:
    """Delete a job (its runs are kept for their retention)."""
    owner, name = job_ref(job, team)
    if not yes and not click.confirm(f"delete {owner}/{name}?", default=False):
        sys.exit(1)
    client.call("DELETE", f"/teams/{owner}/jobs/{name}")
    click.echo(f"{owner}/{name}: deleted")


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--reason", required=True)
@click.option("--cancel-running", is_flag=True, help="Also cancel its running runs (containers are stopped).")
@remote
def pause(job: str, team: str | None, reason: str, cancel_running: bool, client: Any, output: str) -> None:
    """Pause a job: no new runs until resumed."""
    owner, name = job_ref(job, team)
    body = {"reason": reason, "cancel_running": cancel_running}
    paused = client.call("POST", f"/teams/{owner}/jobs/{name}/pause", body).body
    emit(paused, output, JOB_COLUMNS)
    if output == "table" and paused.get("cancelled_runs"):
        click.echo("cancelled: " + ", ".join(paused["cancelled_runs"]))


@cli.command()
@click.option("--progress", type=click.FloatRange(0, 100), help="Percent done.")
@click.option("--message", help="What the run is doing now (at most 200 characters are kept).")
@click.option("--checkpoint", help="JSON: where the run's next attempt resumes (it gets it as JOBSCHED_CHECKPOINT).")
@click.option("--token", envvar=RunEnv.CALLBACK_TOKEN, required=True, help="The attempt's callback token.")
@remote
def heartbeat(
    progress: float | None, message: str | None, checkpoint: str | None, token: str, client: Any, output: str
) -> None:
    """From inside a run (a container, a callback worker): it is alive, how far it got, and its checkpoint.
    In a container the API's URL and the token come from its environment; the call is signed with the
    container's own credentials (its task role needs execute-api:Invoke on POST /callbacks/*)."""
    body: dict[str, Any] = {k: v for k, v in {"progress": progress, "message": message}.items() if v is not None}
    if checkpoint is not None:
        try:
            body["checkpoint"] = json.loads(checkpoint)
        except json.JSONDecodeError as error:
            raise click.BadParameter(f"not JSON: {error}", param_hint="--checkpoint") from None
    said = client.call("POST", "/callbacks/heartbeat", body, headers={CALLBACK_TOKEN_HEADER: token}).body
    emit(said.get("progress") or {}, output)


DEPENDENCY_COLUMNS = [
    ("JOB", "job"),
    ("TRIGGER", "how"),
    ("LAST RUN", "run_id"),
    ("STATUS", "status"),
]


@cli.command()
@click.argument("job")
@click.option("--team")
@remote
def deps(job: str, team: str | None, client: Any, output: str) -> None:
    """The jobs JOB runs after (its after triggers) and the jobs that run after it, with their last runs."""
    owner, name = job_ref(job, team)
    body = client.call("GET", f"/teams/{owner}/jobs/{name}/dependencies").body
    if output != "table":
        emit(body, output)
        return
    for title, key in (("runs after", "upstreams"), ("run after it", "downstreams")):
        rows = [{**row, **(row.get("last_run") or {})} for row in body[key]]
        click.echo(f"{title}:" + ("" if rows else " none"))
        if rows:
            emit(rows, output, DEPENDENCY_COLUMNS)


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
    owner, name = job_ref(job, team)
    try:
        body = {"payload": json.loads(payload)} if payload else None
    except json.JSONDecodeError as error:
        raise click.BadParameter(f"not JSON: {error}", param_hint="--payload") from None
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    run = client.call("POST", f"/teams/{owner}/jobs/{name}/trigger", body, headers=headers).body
    emit(run, output, RUN_COLUMNS)


@cli.command()
@click.argument("job")
@click.option("--team")
@click.option("--from", "start", required=True, help="ISO-8601 instant with offset.")
@click.option("--to", "end", required=True, help="ISO-8601 instant with offset.")
@click.option("--max-in-flight", default=5, show_default=True, type=click.IntRange(1, 100))
@click.option("--wait/--no-wait", default=True, show_default=True, help="Show progress until done.")
@click.option("--downstream", is_flag=True, help="Instants run again also rerun the jobs after this one.")
@remote
def backfill(
    job: str,
    team: str | None,
    start: str,
    end: str,
    max_in_flight: int,
    wait: bool,
    downstream: bool,
    client: Any,
    output: str,
) -> None:
    """Run a job's instants of a past range, at most --max-in-flight at a time. The jobs after it run for
    each instant that had not run; with --downstream, also for those run again."""
    import time

    owner, name = job_ref(job, team)
    body = {"from": start, "to": end, "max_in_flight": max_in_flight, "downstream": downstream}
    progress = client.call("POST", f"/teams/{owner}/jobs/{name}/backfill", body).body
    path = f"/teams/{owner}/jobs/{name}/backfills/{progress['backfill_id']}"
    if wait and output == "table":
        with click.progressbar(length=progress["total"], label=f"backfill {progress['backfill_id']}") as bar:
            done = 0
            while progress["state"] == "RUNNING":
                time.sleep(backfill_poll_seconds)
                progress = client.call("GET", path).body
                finished = sum(progress["finished"].values())
                bar.update(finished - done)
                done = finished
    emit(progress, output, [("BACKFILL", "backfill_id"), ("STATE", "state"), ("TOTAL", "total"), ("SENT", "sent")])


backfill_poll_seconds = 2.0


@cli.command()
@click.argument("job", required=False)
@click.option("--team", help="The team (JOB given as NAME), or, without JOB, search every job of the team.")
@click.option("--status", help="One or several, comma-separated: FAILED,TIMED_OUT.")
@click.option("--trigger", help="schedule, manual, backfill or event.")
@click.option("--min-attempts", type=click.IntRange(1, 1000), help="Runs that took at least this many attempts.")
@click.option("--error", "error_text", help="Runs whose error contains this text.")
@click.option("--since", help="Instants from: 2027-01-04T09:00:00Z, or a span back from now (6h, 7d).")
@click.option("--until", help="Instants up to (the same forms).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 100))
@click.option("--next-token", help="Continue where the last page ended.")
@remote
def runs(
    job: str | None,
    team: str | None,
    status: str | None,
    trigger: str | None,
    min_attempts: int | None,
    error_text: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    next_token: str | None,
    client: Any,
    output: str,
) -> None:
    """A job's runs (or, with --team alone, every run of the team's jobs), newest first, searched."""
    query = {
        "limit": limit,
        "status": status,
        "trigger": trigger,
        "min_attempts": min_attempts,
        "error": error_text,
        "since": since,
        "until": until,
        "next_token": next_token,
    }
    if job is None:
        if team is None:
            raise click.UsageError("give JOB (team/name), or --team to search every job of a team")
        path, columns = f"/teams/{team}/runs", [("JOB", "job"), *RUN_COLUMNS]
    else:
        owner, name = job_ref(job, team)
        path, columns = f"/teams/{owner}/jobs/{name}/runs", RUN_COLUMNS
    page = client.call("GET", path, query={k: v for k, v in query.items() if v is not None}).body
    emit(page["runs"] if output == "table" else page, output, columns)
    if output == "table" and page.get("next_token"):
        click.echo(f"more: --next-token '{page['next_token']}'")


@cli.command()
@click.argument("job")
@click.argument("run_id")
@click.option("--team")
@remote
def run(job: str, run_id: str, team: str | None, client: Any, output: str) -> None:
    """One run: attempts, timings, lateness, error."""
    owner, name = job_ref(job, team)
    body = client.call("GET", f"/teams/{owner}/jobs/{name}/runs/{run_id}").body
    emit(body, output, RUN_COLUMNS)
    if output == "table":
        for line in run_details(body):
            click.echo(line)
    if output == "table" and body.get("trigger_detail"):
        from jobsched.core.events import trigger_summary

        click.echo(f"started by: {trigger_summary(body['trigger_detail'])}")
    if output == "table" and body.get("checks"):
        click.echo()
        emit(body["checks"], output, CHECK_COLUMNS)
    if output == "table" and body.get("tasks"):
        click.echo()
        emit(body["tasks"], output, TASK_COLUMNS)


def run_details(body: dict[str, Any]) -> list[str]:
    """What the one-line table leaves out of one run: timings, why it waits, its progress and checkpoint."""
    lines = [f"scheduled for {body['scheduled_at']}, fired {body['fire_at']}"]
    if body.get("lateness_seconds") is not None:
        lines.append(f"lateness: {body['lateness_seconds']:.1f} s")
    if body.get("finished_at"):
        lines.append(f"finished: {body['finished_at']}")
    if body.get("next_attempt_at"):
        lines.append(f"next attempt at: {body['next_attempt_at']}")
    if body.get("reason") and body.get("error"):  # the table showed the error: the reason goes here
        lines.append(f"reason: {body['reason']}")
    progress = body.get("progress")
    if progress:
        done = f"{progress['percent']:g}%" if progress.get("percent") is not None else "-"
        said = f" {progress['message']}" if progress.get("message") else ""
        lines.append(f"progress: {done}{said} (attempt {progress['attempt']}, at {progress['at']})")
        if progress.get("checkpoint") is not None:
            lines.append(f"checkpoint: {json.dumps(progress['checkpoint'], sort_keys=True)[:200]}")
    if body.get("output"):
        lines.append(f"output: {body['output'][:300]}")
    return lines


@cli.command()
@click.argument("job")
@click.argument("run_id")
@click.option("--team")
@remote
def cancel(job: str, run_id: str, team: str | None, client: Any, output: str) -> None:
    """Cancel a run that has not finished."""
    owner, name = job_ref(job, team)
    emit(client.call("POST", f"/teams/{owner}/jobs/{name}/runs/{run_id}/cancel").body, output, RUN_COLUMNS)


def _decide(
    job: str, run_id: str, task: str, team: str | None, comment: str, client: Any, output: str, verb: str
) -> None:
    owner, name = job_ref(job, team)
    path = f"/teams/{owner}/jobs/{name}/runs/{run_id}/tasks/{task}/{verb}"
    body = client.call("POST", path, {"comment": comment}).body
    emit(body, output, RUN_COLUMNS)
    if output == "table" and body.get("tasks"):
        click.echo()
        emit(body["tasks"], output, TASK_COLUMNS)


def _decision_command(verb: str, summary: str) -> None:
    """``jobsched approve`` and ``jobsched reject``: the same arguments, a different answer."""

    @cli.command(name=verb, help=summary)
    @click.argument("job")
    @click.argument("run_id")
    @click.argument("task")
    @click.option("--team")
    @click.option("--comment", default="", help="Why: kept with the decision and in the job's history.")
    @remote
    def command(job: str, run_id: str, task: str, team: str | None, comment: str, client: Any, output: str) -> None:
        _decide(job, run_id, task, team, comment, client, output, verb)


_decision_command(
    "approve", "Approve a DAG run's waiting approval TASK: the tasks after it run. You are recorded as the approver."
)
_decision_command(
    "reject", "Reject a DAG run's waiting approval TASK: it fails, and the tasks that need it are skipped."
)
