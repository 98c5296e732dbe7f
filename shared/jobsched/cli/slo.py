"""``jobsched slo TEAM``: the team's error budget per SLO tier: the objective, the budget left over the window,
how fast it burns, and the jobs that burn it most; then its jobs' freshness, stale first. ``jobsched policy``: the
organisation's policy the deployment enforces."""

from __future__ import annotations

from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import emit, remote

TIER_COLUMNS = [
    ("TIER", "tier"),
    ("OBJECTIVE", "objective"),
    ("RUNS", "runs"),
    ("BAD", "bad"),
    ("LATE", "late"),
    ("PAST DEADLINE", "past_deadline"),
    ("STALE", "stale"),
    ("BUDGET LEFT", "left"),
    ("BURN 1D", "burn_rate_1d"),
    ("BURN 7D", "burn_rate_7d"),
    ("BURNING", "burning"),
]


FRESHNESS_COLUMNS = [
    ("JOB", "job"),
    ("FRESHNESS", "state"),
    ("SINCE", "since"),
    ("POLICY", "policy"),
    ("WHY", "reason"),
]


@cli.command()
@click.argument("team")
@remote
def slo(team: str, client: Any, output: str) -> None:
    """TEAM's error budget per SLO tier over the platform's window (a burn rate of 1 spends it exactly)."""
    view = client.call("GET", f"/teams/{team}/slo").body
    if output != "table":
        emit(view, output)
        return
    rows = [
        {
            "tier": tier["tier"],
            "objective": f"{tier['objective']['success']:.2%}",
            "runs": tier["runs"],
            "bad": tier["bad"],
            "late": tier["late"],
            "past_deadline": tier["past_deadline"],
            "stale": f"{tier['stale']}/{tier['judged']}" if tier["judged"] else "-",
            "left": f"{tier['budget_left']:.0%}",
            "burn_rate_1d": tier["burn_rate_1d"],
            "burn_rate_7d": tier["burn_rate_7d"],
            "burning": ", ".join(f"{job['job']} ({job['bad']})" for job in tier["burning"]) or "-",
        }
        for tier in view["tiers"]
    ]
    click.echo(f"team {team}: the last {view['window_days']} days to {view['as_of']}")
    emit(rows, output, TIER_COLUMNS)
    if view["freshness"]:
        click.echo("")
        emit(view["freshness"], output, FRESHNESS_COLUMNS)


@cli.command()
@remote
def policy(client: Any, output: str) -> None:
    """The organisation's policy for jobs, as the deployment enforces it at PUT: save it as the file
    `jobsched lint --policy` reads (YAML; -o json for JSON)."""
    view = client.call("GET", "/policy").body
    emit(view, "json" if output == "json" else "yaml")
