"""``jobsched cost TEAM``: what a team's jobs cost in a month (GET /teams/{team}/cost), by job, tier or target type,
the scheduler's share apart from the targets'."""

from __future__ import annotations

from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import emit, remote


@cli.command()
@click.argument("team")
@click.option("--month", help="YYYY-MM (default: this month, UTC).")
@click.option("--by", "group", type=click.Choice(["job", "tier", "target"]), default="job", show_default=True)
@remote
def cost(team: str, month: str | None, group: str, client: Any, output: str) -> None:
    """A team's chargeback for a month: runs, attempts and cost per job (tier, target type), most expensive first."""
    query = {"by": group, **({"month": month} if month else {})}
    bill = client.call("GET", f"/teams/{team}/cost", query=query).body
    if output != "table":
        emit(bill, output)
        return
    click.echo(
        f"{team} {bill['month']}: ${bill['total_usd']:,.4f} (scheduler ${bill['scheduler_usd']:,.4f}, targets "
        f"${bill['target_usd']:,.4f}); {bill['prices']}"
    )
    columns = [(group.upper(), "key"), ("RUNS", "runs"), ("ATTEMPTS", "attempts"), ("SCHEDULER $", "scheduler_usd"),
               ("TARGETS $", "target_usd"), ("TOTAL $", "total_usd")]  # fmt: skip
    emit(bill["lines"], output, columns)
