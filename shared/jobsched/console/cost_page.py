"""The executive view's cost: this month's top teams and top jobs by what they cost (``planning.chargeback``: one key
range of usage items a team, never the runs), the scheduler's share apart. Escaped, as ``render``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Protocol

from jobsched.console.render import Links, link_text
from jobsched.core.prices import PriceTable
from jobsched.planning.chargeback import CostLine, chargeback
from jobsched.ports import UsagePort

TOP = 10
MAX_TEAMS_PRICED = 50  # teams whose month is read for one view (the heat-map's teams, at most)


class CostJobs(UsagePort, Protocol):
    """The jobs store as the cost view reads it."""


def top_costs(jobs: CostJobs, teams: Sequence[str], *, now: datetime, prices: PriceTable, links: Links) -> str:
    month = now.strftime("%Y-%m")
    bills = [chargeback(jobs, team, month, by="job", prices=prices) for team in list(teams)[:MAX_TEAMS_PRICED]]
    by_team = sorted(((bill.team, bill.total, bill.scheduler) for bill in bills), key=lambda row: (-row[1], row[0]))
    jobs_rows: list[CostLine] = sorted(
        (line for bill in bills for line in bill.lines), key=lambda line: (-line.total, line.key)
    )
    if not jobs_rows:
        return f'<p class="muted">No usage recorded in {month}.</p>'
    team_rows = "".join(
        f"<tr><td>{link_text(team, links(f'/teams/{team}'))}</td><td class=num>${total:,.2f}</td>"
        f"<td class=num>${scheduler:,.2f}</td></tr>"
        for team, total, scheduler in by_team[:TOP]
    )
    job_rows = "".join(
        f"<tr><td>{link_text(line.key, links(_job_path(line.key)))}</td><td class=num>{line.runs:,}</td>"
        f"<td class=num>${line.total:,.2f}</td></tr>"
        for line in jobs_rows[:TOP]
    )
    return (
        f'<p class="muted">{escape(month)} so far, {escape(prices.label)}</p>'
        "<table><tr><th>team</th><th>cost</th><th>of which the scheduler</th></tr>" + team_rows + "</table>"
        "<table><tr><th>job</th><th>runs</th><th>cost</th></tr>" + job_rows + "</table>"
    )


def _job_path(key: str) -> str:
    team, _, name = key.partition("/")
    return f"/teams/{team}/jobs/{name}"
