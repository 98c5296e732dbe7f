"""``jobsched admin``: what platform admins change for a team (its limits); team members get 403."""

from __future__ import annotations

from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.cli.remote import emit, remote
from jobsched.core.limits import TeamLimits

LIMITS = tuple(TeamLimits().as_dict())
LIMIT_COLUMNS = [("LIMIT", "limit"), ("NOW", "now"), ("SET FOR TEAM", "override"), ("DEFAULT", "default")]


@cli.group()
def admin() -> None:
    """Platform administration (admins only)."""


@admin.command("quota")
@click.argument("team")
@click.option("--set", "settings", multiple=True, metavar="LIMIT=N", help=f"Set a limit ({', '.join(LIMITS)}).")
@click.option("--reset", multiple=True, type=click.Choice(LIMITS), help="Return a limit to the platform's default.")
@remote
def quota(team: str, settings: tuple[str, ...], reset: tuple[str, ...], client: Any, output: str) -> None:
    """Show TEAM's limits, or change them with --set and --reset."""
    changes: dict[str, int | None] = dict.fromkeys(reset)
    for setting in settings:
        name, _, value = setting.partition("=")
        if name not in LIMITS or not value.strip().isdigit():
            raise click.BadParameter(
                f"{setting!r}: give LIMIT=N with LIMIT one of {', '.join(LIMITS)}", param_hint="--set"
            )
        changes[name] = int(value)
    if changes:
        view = client.call("PUT", f"/admin/teams/{team}", changes).body
    else:
        view = client.call("GET", f"/admin/teams/{team}").body
    if output != "table":
        emit(view, output)
        return
    rows = [
        {
            "limit": name,
            "now": view["limits"][name],
            "override": view["overrides"].get(name, "-"),
            "default": view["defaults"][name],
        }
        for name in LIMITS
    ]
    emit(rows, output, LIMIT_COLUMNS)
