"""``jobsched logs``: a run's lines from every component, in order; ``--follow`` until the run ends."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import job_ref, remote

follow_poll_seconds = 2.0
SHOWN_FIELDS = ("attempt", "outcome", "detail", "task", "run_ids", "lateness_s", "error")


@cli.command()
@click.argument("job")
@click.argument("run_id")
@click.option("--team")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the run has ended.")
@click.option("--limit", default=500, show_default=True, type=click.IntRange(1, 1000))
@remote
def logs(job: str, run_id: str, team: str | None, follow: bool, limit: int, client: Any, output: str) -> None:
    """A run's log lines from the dispatcher, the worker (with its target adapter), escalation and pages."""
    from jobsched.core.runs import TERMINAL  # imported here: the spec's models cost every CLI call otherwise

    ended = {status.value for status in TERMINAL}
    owner, name = job_ref(job, team)
    base = f"/teams/{owner}/jobs/{name}/runs/{run_id}"
    seen: set[str] = set()
    while True:
        body = client.call("GET", f"{base}/logs?limit={limit}").body
        for line in body["lines"]:
            key = json.dumps(line, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            click.echo(json.dumps(line) if output == "json" else text_line(line))
        if not follow or client.call("GET", base).body["status"] in ended:
            break
        time.sleep(follow_poll_seconds)
    if not seen and output == "table":
        click.echo(f"no lines yet; the query, to run it in the console: {body['query']}", err=True)


def text_line(line: dict[str, Any]) -> str:
    fields = " ".join(f"{key}={line['fields'][key]}" for key in SHOWN_FIELDS if line["fields"].get(key) is not None)
    return f"{line['at']} {line['component']:<20} {line['level']:<7} {line['message']} {fields}".rstrip()
