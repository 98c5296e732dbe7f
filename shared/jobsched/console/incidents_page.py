"""The open incidents across teams: age, events, who was paged or acknowledged it, the last error or the question
asked. Pure, escaped, as ``render``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape

from jobsched.console.render import DASH, Links, age_text, link_text
from jobsched.core.records import Incident

# ------------------------------------------------------------------------------------- incidents


def incidents_view(incidents: Sequence[Incident], runbooks: dict[str, str], now: datetime, links: Links) -> str:
    """Open incidents across teams, oldest first: age, failures, who was paged, the last error, the runbook."""
    if not incidents:
        return '<p class="muted">No open incident.</p>'
    rows = []
    for incident in incidents:
        opened = datetime.fromisoformat(incident.opened_at.replace("Z", "+00:00"))
        age = age_text(now - opened)
        subject = incident.subject
        team, _, name = subject.partition("/")
        href = links(f"/teams/{team}/jobs/{name}") if name and not subject.startswith(("TARGET#", "SYSTEM")) else None
        runbook = runbooks.get(subject)
        book = f'<a href="{escape(runbook)}">runbook</a>' if runbook else DASH
        paged = ", ".join(incident.paged) or "nobody yet"
        if incident.acknowledged_by:  # someone is on it
            paged += f"; acknowledged by {incident.acknowledged_by}"
        if incident.snoozed_until and incident.snoozed_until > now.strftime("%Y-%m-%dT%H:%M:%SZ"):
            paged += f"; snoozed until {incident.snoozed_until}"
        if incident.severity == "ticket":
            paged += " (a ticket: best-effort, never paged)"
        if incident.held:  # pages a maintenance window held: recorded, not sent
            windows = ", ".join(sorted({entry["window"] for entry in incident.held}))
            paged += f"; {len(incident.held)} page(s) held by maintenance {windows}"
        last = incident.last or {}
        error = str(last.get("error") or DASH)
        # A run waiting for a person is not a failure: its row is blue, says what is asked, and links the run.
        asking = incident.incident_class == "approval"
        badge = (
            '<span class="badge approval">? waits for approval</span>'
            if asking
            else f'<span class="badge incident">&#9888; {escape(incident.incident_class)}</span>'
        )
        if last.get("run_id") and name and not subject.startswith(("TARGET#", "SYSTEM")):
            href = links(f"/teams/{team}/jobs/{name}/runs/{last['run_id']}") or href  # the run it is about
        if asking:
            error = str(last.get("detail") or DASH)
        rows.append(
            f"<tr><td>{badge}</td>"
            f"<td>{link_text(subject, href)}</td><td class=num>{age}</td><td class=num>{incident.failures}</td>"
            f"<td>{escape(paged)}</td><td class=muted>{escape(error[:200])}</td><td>{book}</td></tr>"
        )
    return (
        f'<p class="muted">{len(incidents)} open, oldest first</p><table><tr><th>class</th><th>subject</th>'
        "<th>open for</th><th>events</th><th>paged</th><th>last error, or what is asked</th><th></th></tr>"
        + "".join(rows)
        + "</table>"
    )
