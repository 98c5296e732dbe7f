"""The console's change history of a team: what changed recently on its jobs (spec changes, pauses, stops, reruns:
the audit each change writes) and on its limits, newest first, so "check for recent changes" is one look. Read from
the audit items (a page of each job's newest entries, the team's limits history), never from runs. Escaped, as
``render``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import Protocol

from jobsched.console.render import DASH, Links, age_text, link_text
from jobsched.core.names import JobsKeys
from jobsched.core.records import AuditEntry

PER_JOB = 10  # a job's newest entries read
MAX_JOBS = 500
MAX_SHOWN = 200
READERS = 16
SINCE = timedelta(days=14)


class ChangeJobs(Protocol):
    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]: ...
    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]: ...


@dataclass(frozen=True)
class Change:
    subject: str  # team/name, or "team limits"
    entry: AuditEntry


def team_changes(jobs: ChangeJobs, team: str, *, now: datetime) -> list[Change]:
    """The team's changes of the last ``SINCE``, newest first (at most ``MAX_SHOWN``)."""
    keys, _ = jobs.team_page(team, limit=MAX_JOBS, after_name=None)
    subjects = [*keys, f"{JobsKeys.TEAM_PREFIX}{team}"]

    def newest(subject: str) -> list[Change]:
        entries, _ = jobs.history(subject, limit=PER_JOB)
        shown = subject if "/" in subject else "team limits"
        return [Change(shown, entry) for entry in entries if now - entry.at <= SINCE]

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        found = [change for changes in pool.map(newest, subjects) for change in changes]
    return sorted(found, key=lambda change: change.entry.at, reverse=True)[:MAX_SHOWN]


def changes_view(changes: list[Change], now: datetime, links: Links) -> str:
    if not changes:
        return f'<p class="muted">No change in the last {SINCE.days} days.</p>'
    rows = []
    for change in changes:
        entry = change.entry
        team, _, name = change.subject.partition("/")
        href = links(f"/teams/{team}/jobs/{name}") if name else None
        what = entry.reason or ", ".join(f"{k}: {v}" for k, v in (entry.details or {}).items()) or DASH
        who = entry.confirmed_by or entry.principal
        rows.append(
            f"<tr><td class=num>{age_text(now - entry.at)} ago</td><td>{link_text(change.subject, href)}</td>"
            f"<td>{escape(entry.action)}</td><td class=num>{entry.version}</td><td>{escape(who)}</td>"
            f"<td class=muted>{escape(str(what)[:300])}</td></tr>"
        )
    return (
        f'<p class="muted">{len(changes)} change(s) in the last {SINCE.days} days, newest first</p>'
        "<table><tr><th>when</th><th>what</th><th>action</th><th>version</th><th>who</th><th>why, or details</th></tr>"
        + "".join(rows)
        + "</table>"
    )
