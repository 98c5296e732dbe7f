"""``jobsched dlq list|redrive``: the dead-letter queues' messages (a team's, where the message names one), and their
redrive back where they came from."""

from __future__ import annotations

from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import emit, remote


@cli.group()
def dlq() -> None:
    """The dead-letter queues: what sits in them, and their redrive."""


@dlq.command("list")
@click.option("--team", help="Only this team's messages (a member must name their team; an admin sees all).")
@remote
def list_letters(team: str | None, client: Any, output: str) -> None:
    """Each dead-letter queue: how many messages, per team, and a few to look at."""
    found = client.call("GET", "/dlq" + (f"?team={team}" if team else "")).body
    if output != "table":
        emit(found, output)
        return
    for queue in found:
        teams = ", ".join(f"{name or '(none)'}: {count}" for name, count in sorted(queue["by_team"].items())) or "-"
        click.echo(f"{queue['queue']}: {queue['approximate']} message(s); read {queue['read']}; by team: {teams}")
        for sample in queue["samples"]:
            click.echo(
                f"  {sample['id']} ({sample['team'] or 'no team'}, {sample['receives']} receives) {sample['body']}"
            )


@dlq.command()
@click.argument("queue", type=click.Choice(["work-high", "work-normal", "work-low", "escalations"]))
@click.option("--team", help="Only this team's messages (a member must name their team).")
@click.option("--max", "limit", type=click.IntRange(1, 500), default=100, show_default=True)
@remote
def redrive(queue: str, team: str | None, limit: int, client: Any, output: str) -> None:
    """Send QUEUE's messages (--team's) back where they came from; the worker's fencing keeps a run that ended
    meanwhile from running again."""
    body: dict[str, Any] = {"max": limit} | ({"team": team} if team else {})
    done = client.call("POST", f"/dlq/{queue}/redrive", body).body
    if output != "table":
        emit(done, output)
        return
    click.echo(f"{queue}: {done['moved']} redriven, {done['left']} left (another team's, or naming none)")
