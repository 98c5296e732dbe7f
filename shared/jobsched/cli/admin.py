"""``jobsched admin``: what platform admins change for a team (its limits; team members get 403); and
``jobsched breakers``: a team's open circuit breakers, which an admin may close."""

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


@admin.command("budget")
@click.argument("team")
@click.option("--set", "monthly", type=click.FloatRange(min=0.01), help="The monthly budget, USD.")
@click.option("--warn", default="0.8", show_default=True, help="Fractions that page, comma-separated (0.5,0.8).")
@click.option("--hard", default="1.0", show_default=True, help="The fraction that pauses non-critical jobs ('none').")
@click.option("--job", "jobs", multiple=True, metavar="NAME=USD", help="A job's own monthly budget (repeat).")
@click.option("--delete", is_flag=True, help="Delete the team's budget (what it paused stays paused).")
@click.option("--resume", is_flag=True, help="Resume exactly the team's jobs a budget paused.")
@remote
def budget(
    team: str,
    monthly: float | None,
    warn: str,
    hard: str,
    jobs: tuple[str, ...],
    delete: bool,
    resume: bool,
    client: Any,
    output: str,
) -> None:
    """Set TEAM's monthly budget (--set), delete it, or resume what it paused; shows the month's spend."""
    if resume:
        resumed = client.call("POST", f"/admin/teams/{team}/budget/resume").body
        emit(resumed, output) if output != "table" else click.echo(f"resumed {len(resumed['resumed'])} job(s)")
        return
    if delete:
        emit(client.call("DELETE", f"/admin/teams/{team}/budget").body, output)
        return
    if monthly is not None:
        per_job = {}
        for entry in jobs:
            name, sep, usd = entry.partition("=")
            if not sep:
                raise click.BadParameter(f"{entry!r} is not NAME=USD", param_hint="--job")
            per_job[name] = float(usd)
        body: dict[str, Any] = {
            "monthly_usd": monthly,
            "warn_at": [float(part) for part in warn.split(",") if part.strip()],
            "hard_at": None if hard.strip().lower() == "none" else float(hard),
            "jobs": per_job,
        }
        client.call("PUT", f"/admin/teams/{team}/budget", body)
    bill = client.call("GET", f"/teams/{team}/cost").body
    if output != "table":
        emit(bill, output)
        return
    budget_usd = bill.get("budget_usd")
    of = f" of ${budget_usd:,.2f} ({bill['total_usd'] / budget_usd:.0%})" if budget_usd else " (no budget)"
    click.echo(f"{team} {bill['month']}: spent ${bill['total_usd']:,.2f}{of}")


BREAKER_COLUMNS = [
    ("TARGET", "target"),
    ("SCOPE", "scope"),
    ("STATE", "state"),
    ("OPEN UNTIL", "open_until"),
    ("FAILURES", "failures"),
    ("HOLDING", "holding"),
]


@cli.command()
@click.argument("team")
@click.option("--close", "close", metavar="BREAKER", help="Close this breaker by hand (platform admins; audited).")
@click.option("--reason", help="Why it is closed (required with --close).")
@remote
def breakers(team: str, close: str | None, reason: str | None, client: Any, output: str) -> None:
    """TEAM's open circuit breakers: the target, until when, and the runs each holds back."""
    if close is not None:
        if not reason:
            raise click.BadParameter("say why the breaker is closed", param_hint="--reason")
        closed = client.call("POST", f"/teams/{team}/breakers/close", {"breaker": close, "reason": reason}).body
        if output != "table":
            emit(closed, output)
        else:
            click.echo(f"closed {closed['breaker']} (by {closed['by']}); runs sent now: {len(closed['sent'])}")
        return
    view = client.call("GET", f"/teams/{team}/breakers").body
    if output != "table":
        emit(view, output)
        return
    if not view["breakers"]:
        click.echo(f"no open breakers for team {team}")
        return
    rows = [breaker | {"holding": len(breaker["held"])} for breaker in view["breakers"]]
    emit(rows, output, BREAKER_COLUMNS)
    for breaker in view["breakers"]:
        if breaker["held"]:
            click.echo(f"\n{breaker['breaker']} holds:")
            for held in breaker["held"]:
                click.echo(f"  {held}")
