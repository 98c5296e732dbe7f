"""The console's SLO pages: a team's error budget per tier (left, burn, the jobs burning it, the window day by day),
its jobs' freshness and its paging destinations never verified or failing; and the executive view, a heat-map of
teams x days (was each day within every tier's objective?), each tier's burn across teams and the week's top
failing jobs. Read from the ledger (one item a team, tier and day), the freshness boards and the drills: never from
runs. Escaped, as ``render``."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from html import escape
from typing import Protocol

from jobsched.console.render import DASH, Links, link_text
from jobsched.core.records import StoredJob
from jobsched.core.slo import TIERS, SloDay, SloTiers, Tier, TierBudget, tier_budget
from jobsched.paging.drills import Destination, team_destinations

HEAT_DAYS = 14  # the executive heat-map's columns
MAX_TEAMS = 100  # its rows (more are counted, not drawn)
TOP_FAILING = 10
MET, NEAR, MISSED, IDLE = "#1a7f37", "#9a6700", "#cf222e", "#d0d7de"  # within, under 2x the budget, over, no events


Ledgers = dict[tuple[str, Tier], list[SloDay]]  # (team, tier) -> its ledger days


class SloJobs(Protocol):
    def slo_days(self, team: str, tier: str, first: date, last: date) -> list[SloDay]: ...
    def teams_between(self, first: date, last: date) -> set[str]: ...
    def team_freshness(self, team: str) -> dict[str, dict[str, str]]: ...
    def drills(self, team: str) -> dict[str, dict[str, str]]: ...
    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]: ...
    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]: ...


@dataclass(frozen=True)
class SloPage:
    title: str
    body: str


def team_slo(
    jobs: SloJobs, team: str, tiers: SloTiers, *, now: datetime, links: Links, default_topic: str | None = None
) -> SloPage:
    today = now.date()
    first = today - timedelta(days=tiers.window_days - 1)
    budgets = [tier_budget(tier, tiers, jobs.slo_days(team, tier, first, today), today=today) for tier in TIERS]
    keys, _ = jobs.team_page(team, limit=500, after_name=None)
    found = jobs.get_many(keys) if keys else {}
    stored = [found[key] for key in keys if key in found]
    unverified = [
        d for d in team_destinations(stored, default_topic, jobs.drills(team)) if d.last_outcome != "delivered"
    ]
    body = (
        f'<p class="muted">the last {tiers.window_days} days to {today.isoformat()}; a burn rate of 1 spends the '
        "budget exactly over the window</p>"
        + budget_table(budgets, team, links)
        + "<h2>Burn day by day</h2>"
        + burn_days(budgets)
        + "<h2>Freshness</h2>"
        + freshness_table(jobs.team_freshness(team), team, links)
        + "<h2>Paging destinations never verified or failing</h2>"
        + destinations_table(unverified)
    )
    return SloPage(f"SLOs of team {team}", body)


def budget_table(budgets: Sequence[TierBudget], team: str, links: Links) -> str:
    rows = []
    for budget in budgets:
        burning = ", ".join(
            f"{link_text(job, links(f'/teams/{team}/jobs/{job}'))} ({bad})" for job, bad in budget.top_jobs
        )
        left = budget.budget_left
        colour = MET if left > 0.25 else NEAR if left > 0 else MISSED
        rows.append(
            f"<tr><td>{escape(budget.tier)}</td><td class=num>{budget.objective.success:.2%}</td>"
            f"<td class=num>{budget.runs}</td><td class=num>{budget.bad}</td>"
            f"<td class=num>{budget.stale}/{budget.judged}</td>"
            f'<td class=num><span style="color:{colour}">{left:.0%}</span></td>'
            f"<td class=num>{budget.burn_rate_1d}</td><td class=num>{budget.burn_rate_7d}</td>"
            f"<td>{burning or DASH}</td></tr>"
        )
    return (
        "<table><tr><th>tier</th><th>objective</th><th>runs</th><th>bad</th><th>stale/judged</th>"
        "<th>budget left</th><th>burn 1d</th><th>burn 7d</th><th>burning it</th></tr>" + "".join(rows) + "</table>"
    )


def burn_days(budgets: Sequence[TierBudget]) -> str:
    """Each tier's window as a row of day cells, coloured by that day's burn (1: the budget's pace)."""
    rows = []
    for budget in budgets:
        allowed = 1 - budget.objective.success
        cells = "".join(_day_cell(day, allowed, budget.tier) for day in budget.days)
        rows.append(f"<tr><td>{escape(budget.tier)}</td><td>{cells}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _day_cell(day: SloDay, allowed: float, tier: str) -> str:
    events = day.ended + day.judged
    if not events:
        return _square(IDLE, f"{day.day.isoformat()} {tier}: no runs")
    burn = ((day.bad + day.stale) / events) / allowed
    colour = MET if burn <= 1 else NEAR if burn <= 2 else MISSED
    return _square(colour, f"{day.day.isoformat()} {tier}: {day.bad + day.stale} bad of {events}, burn {burn:.1f}")


def freshness_table(board: dict[str, dict[str, str]], team: str, links: Links) -> str:
    if not board:
        return '<p class="muted">No job of this team has a freshness policy.</p>'
    rows = []
    for name, line in sorted(board.items(), key=lambda item: (item[1].get("state") != "stale", item[0])):
        state = line.get("state", "unknown")
        colour = {"fresh": MET, "stale": MISSED}.get(state, IDLE)
        rows.append(
            f"<tr><td>{link_text(name, links(f'/teams/{team}/jobs/{name}'))}</td>"
            f'<td><span style="color:{colour}">{escape(state)}</span></td><td>{escape(line.get("since", DASH))}</td>'
            f"<td>{escape(line.get('policy', DASH))}</td><td class=muted>{escape(line.get('reason', ''))}</td></tr>"
        )
    return (
        "<table><tr><th>job</th><th>freshness</th><th>since</th><th>policy</th><th>why</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def destinations_table(shown: Sequence[Destination]) -> str:
    if not shown:
        return (
            '<p class="muted">Every destination was verified by its last drill (<code>jobsched page test</code>).</p>'
        )
    rows = [
        f"<tr><td>{escape(d.address)}</td><td>{escape(d.destination)}</td>"
        f"<td>{escape(d.last_outcome or 'never verified')}</td><td>{escape(d.last_verified_at or DASH)}</td>"
        f"<td class=muted>{escape(d.reason or '')}</td><td>{escape(', '.join(d.jobs[:5]))}</td></tr>"
        for d in shown
    ]
    return (
        "<table><tr><th>address</th><th>kind</th><th>last drill</th><th>when</th><th>why</th><th>jobs</th></tr>"
        + "".join(rows)
        + "</table>"
    )


# ------------------------------------------------------------------------------------------ executive


def executive(
    jobs: SloJobs, tiers: SloTiers, *, now: datetime, links: Links, teams: Collection[str] | None = None
) -> SloPage:
    """``teams``: the teams the viewer may see (None: every team with events in the heat-map's days)."""
    today = now.date()
    first = today - timedelta(days=HEAT_DAYS - 1)
    seen = sorted(jobs.teams_between(first, today))
    shown = [team for team in seen if teams is None or team in teams]
    drawn, more = shown[:MAX_TEAMS], len(shown) - MAX_TEAMS
    days = [first + timedelta(days=n) for n in range(HEAT_DAYS)]
    ledgers = {(team, tier): jobs.slo_days(team, tier, first, today) for team in drawn for tier in TIERS}
    heat = heat_map(drawn, days, ledgers, tiers, links)
    if more > 0:
        heat += f'<p class="muted">and {more} more teams</p>'
    body = (
        f'<p class="muted">{len(drawn)} teams, {HEAT_DAYS} days to {today.isoformat()}: a day is within its SLOs when '
        "every tier's bad share (failed, timed out, missed runs and stale judgements) is within its objective</p>"
        + heat
        + "<h2>Error budget burn per tier, across teams (7 days)</h2>"
        + tier_burns(ledgers, tiers, today)
        + "<h2>The week's top failing jobs</h2>"
        + top_failing(ledgers, today, links)
    )
    return SloPage("SLA compliance", body)


def heat_map(
    teams: Sequence[str],
    days: Sequence[date],
    ledgers: Ledgers,
    tiers: SloTiers,
    links: Links,
) -> str:
    if not teams:
        return '<p class="muted">No team has counted runs in these days.</p>'
    header = "".join(f"<th>{day.strftime('%d')}</th>" for day in days)
    rows = []
    for team in teams:
        by_tier = {tier: {entry.day: entry for entry in ledgers[(team, tier)]} for tier in TIERS}
        cells = []
        for day in days:
            counted = [(tier, by_tier[tier][day]) for tier in TIERS if day in by_tier[tier]]
            events = sum(entry.ended + entry.judged for _, entry in counted)
            if not events:
                cells.append(f"<td>{_square(IDLE, f'{team} {day.isoformat()}: no runs')}</td>")
                continue
            burns = [
                ((entry.bad + entry.stale) / (entry.ended + entry.judged)) / (1 - tiers.objectives[tier].success)
                for tier, entry in counted
                if entry.ended + entry.judged
            ]
            good = events - sum(entry.bad + entry.stale for _, entry in counted)
            worst = max(burns)
            colour = MET if worst <= 1 else NEAR if worst <= 2 else MISSED
            title = (
                f"{team} {day.isoformat()}: {good} of {events} good ({good / events:.2%}), worst tier burn {worst:.1f}"
            )
            cells.append(f"<td>{_square(colour, title)}</td>")
        rows.append(f"<tr><td>{link_text(team, links(f'/teams/{team}/slo'))}</td>{''.join(cells)}</tr>")
    legend = (
        f'<p class="legend">{_square(MET, "within")} within every objective {_square(NEAR, "near")} a tier under 2x '
        f"its budget's pace {_square(MISSED, 'missed')} a tier over it {_square(IDLE, 'idle')} no runs</p>"
    )
    return f"<table><tr><th>team</th>{header}</tr>{''.join(rows)}</table>{legend}"


def tier_burns(ledgers: Ledgers, tiers: SloTiers, today: date) -> str:
    since = today - timedelta(days=6)
    rows = []
    for tier in TIERS:
        week = [entry for (_, of), entries in ledgers.items() if of == tier for entry in entries if entry.day >= since]
        events = sum(entry.ended + entry.judged for entry in week)
        bad = sum(entry.bad + entry.stale for entry in week)
        allowed = 1 - tiers.objectives[tier].success
        burn = (bad / events) / allowed if events else 0.0
        colour = MET if burn <= 1 else NEAR if burn <= 2 else MISSED
        rows.append(
            f"<tr><td>{escape(tier)}</td><td class=num>{events}</td><td class=num>{bad}</td>"
            f'<td class=num><span style="color:{colour}">{burn:.2f}</span></td></tr>'
        )
    return "<table><tr><th>tier</th><th>events</th><th>bad</th><th>burn rate</th></tr>" + "".join(rows) + "</table>"


def top_failing(ledgers: Ledgers, today: date, links: Links) -> str:
    since = today - timedelta(days=6)
    counts: dict[tuple[str, str], int] = {}
    for (team, _), entries in ledgers.items():
        for entry in entries:
            if entry.day >= since:
                for job, bad in entry.bad_by_job.items():
                    counts[(team, job)] = counts.get((team, job), 0) + bad
    top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP_FAILING]
    if not top:
        return '<p class="muted">No failed, timed-out, missed or stale job this week.</p>'
    rows = "".join(
        f"<tr><td>{link_text(f'{team}/{job}', links(f'/teams/{team}/jobs/{job}'))}</td><td class=num>{bad}</td></tr>"
        for (team, job), bad in top
    )
    return f"<table><tr><th>job</th><th>bad events</th></tr>{rows}</table>"


def _square(colour: str, title: str) -> str:
    return (
        f'<svg width="14" height="14" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<rect width="14" height="14" rx="2" fill="{colour}"/></svg>'
    )
