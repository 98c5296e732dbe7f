"""The console's change history of a team: what changed recently on its jobs (spec changes, pauses, stops, reruns:
the audit each change writes), on its limits, and on the resources its runs depend on (a new version of a secret its
jobs name, a policy attached to or detached from the targets' role: CloudTrail's records, ``core.changes``), newest
first, so "check for recent changes, secrets or IAM" is one look. Read from the audit items (a page of each job's
and each resource's newest entries, the team's limits history), never from runs. Escaped, as ``render``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import Protocol

from jobsched.console.render import DASH, Links, age_text, link_text
from jobsched.core.changes import resource_subject, role_name, secret_name
from jobsched.core.names import JobsKeys
from jobsched.core.records import AuditEntry, StoredJob
from jobsched.tenancy.ownership import ResourceKind, spec_resources

PER_JOB = 10  # a job's newest entries read
MAX_JOBS = 500
MAX_SHOWN = 200
READERS = 16
SINCE = timedelta(days=14)
MAX_RESOURCES = 100  # secrets and roles whose changes a team's history reads


class ChangeJobs(Protocol):
    def team_page(self, team: str, *, limit: int, after_name: str | None) -> tuple[list[str], str | None]: ...
    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]: ...
    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]: ...


@dataclass(frozen=True)
class Change:
    subject: str  # team/name, or "team limits"
    entry: AuditEntry


def team_changes(jobs: ChangeJobs, team: str, *, now: datetime, roles: Sequence[str] = ()) -> list[Change]:
    """The team's changes of the last ``SINCE``, newest first (at most ``MAX_SHOWN``); ``roles``: the roles its runs
    act through (the deployment's targets role)."""
    keys, _ = jobs.team_page(team, limit=MAX_JOBS, after_name=None)
    resources = watched_resources(jobs.get_many(keys).values(), roles) if keys else watched_resources([], roles)
    subjects = [*keys, f"{JobsKeys.TEAM_PREFIX}{team}", *resources]

    def newest(subject: str) -> list[Change]:
        entries, _ = jobs.history(subject, limit=PER_JOB)
        shown = resources.get(subject) or (subject if "/" in subject else "team limits")
        return [Change(shown, entry) for entry in entries if now - entry.at <= SINCE]

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        found = [change for changes in pool.map(newest, subjects) for change in changes]
    return sorted(found, key=lambda change: change.entry.at, reverse=True)[:MAX_SHOWN]


def watched_resources(jobs: Iterable[StoredJob], roles: Sequence[str]) -> dict[str, str]:
    """Change subject -> how it is shown: the secrets the jobs name (admission checked they are the team's) and the
    roles given; at most ``MAX_RESOURCES``."""
    found: dict[str, str] = {}
    for role in roles:
        found[resource_subject("role", role_name(role))] = f"role {role_name(role)}"
    for stored in jobs:
        for resource in spec_resources(stored.spec):
            if resource.kind is ResourceKind.SECRET and len(found) < MAX_RESOURCES:
                name = secret_name(resource.name)
                found[resource_subject("secret", name)] = f"secret {name}"
    return found


def changes_view(changes: list[Change], now: datetime, links: Links) -> str:
    if not changes:
        return f'<p class="muted">No change in the last {SINCE.days} days.</p>'
    rows = []
    for change in changes:
        entry = change.entry
        resource = change.subject.startswith(("secret ", "role "))  # CloudTrail's record: no job, no version
        team, _, name = change.subject.partition("/")
        href = links(f"/teams/{team}/jobs/{name}") if name and not resource else None
        details = {k: v for k, v in (entry.details or {}).items() if k != "event_id"}
        what = entry.reason or ", ".join(f"{k}: {v}" for k, v in details.items()) or DASH
        who = entry.confirmed_by or entry.principal
        version = DASH if resource else str(entry.version)
        rows.append(
            f"<tr><td class=num>{age_text(now - entry.at)} ago</td><td>{link_text(change.subject, href)}</td>"
            f"<td>{escape(entry.action)}</td><td class=num>{version}</td><td>{escape(who)}</td>"
            f"<td class=muted>{escape(str(what)[:300])}</td></tr>"
        )
    return (
        f'<p class="muted">{len(changes)} change(s) in the last {SINCE.days} days, newest first</p>'
        "<table><tr><th>when</th><th>what</th><th>action</th><th>version</th><th>who</th><th>why, or details</th></tr>"
        + "".join(rows)
        + "</table>"
    )
