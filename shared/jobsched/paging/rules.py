"""The escalation rules: events in, one page per incident out. Pure.

Producers (worker, dispatcher, heartbeat checker) publish events (``paging.escalation_events``); the escalation handler
(``paging.incidents``) applies these rules and keeps one open
incident per subject and incident class. A subject is a job ("team/name"), a target ("TARGET#...") or
the scheduler itself ("SYSTEM").

- ``failing`` opens on run_failed, run_timed_out, missed_schedule; a run_succeeded resolves it.
  It counts consecutive failures: the primary contact is paged at ``after_failures``, the secondary
  ``secondary.after`` failures later (unless someone acknowledged the incident), and the job is paused at
  ``auto_pause_after``. 100 failures in a
  row make one page (plus the secondary and the pause notice if configured), not 100.
- ``late`` opens on deadline_missed (once per run); a run that succeeds within its deadline resolves it.
- ``circuit`` opens on circuit_open; circuit_closed resolves it.
- ``dispatcher`` opens on dispatcher_stalled; dispatcher_recovered resolves it.
- ``approval`` opens on approval_requested (a DAG task waits for a person) and pages at info severity with a
  link to the run; approval_decided (approved, rejected, timed out) resolves it.
- ``quality`` opens on checks_warned (a ``severity: warn`` check failed) and pages at warning severity; a
  run_succeeded whose warning checks passed resolves it.
- ``stale`` opens on job_stale (no success by the job's freshness deadline); job_fresh resolves it.
- ``anomaly`` opens on run_anomalous (a run far outside the job's baseline, for a job with ``anomalies: page``)
  and pages at warning severity; run_usual (a later run within it) resolves it.
A job's SLO tier routes its incidents (``Policy.for_job``): critical pages at the first failure, important
follows its escalation, best-effort opens the incident at ticket severity and never pages anyone.
While a company maintenance window that applies to the job is open (``suppress_pages``), a page it would send is
held: recorded on the incident (role, window, when, why) and not sent, the role left unpaged so the incident's next
event after the window pages it; nothing escalates meanwhile (no secondary, no auto-pause), its events still counted.
Someone may snooze an open incident until an instant (no page for it meanwhile, its events still counted)
or resolve it by hand with a reason (``resolved_by_hand``, through the same path as any resolving event).
Resolving sends one notice to every contact that was paged. Every event carries an id; an event seen
before (SQS redelivery) changes nothing.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from jobsched.core.logs import NotAQueryableRun, run_logs_query
from jobsched.core.records import Incident, IncidentClass, Role
from jobsched.core.runs import instant_text
from jobsched.core.slo import DEFAULT_TIER, Tier
from jobsched.core.spec import Escalation
from jobsched.paging.escalation_events import EscalationEvent

OPENS: dict[str, IncidentClass] = {
    "run_failed": "failing",
    "run_timed_out": "failing",
    "missed_schedule": "failing",
    "deadline_missed": "late",
    "circuit_open": "circuit",
    "dispatcher_stalled": "dispatcher",
    "job_quarantined": "failing",  # the job stopped firing: its team must act (the platform is alarmed too)
    "checks_warned": "quality",  # a warning check failed: paged once, at warning severity, until a clean success
    "approval_requested": "approval",  # a DAG task waits for a person of the team: resolved when decided
    "job_stale": "stale",  # freshness: paged by the job's tier until a success makes it fresh
    "run_anomalous": "anomaly",  # far outside the learned baseline: warning severity, until a usual run
    "budget_warning": "budget",  # a month's cost crossed a budget threshold: paged once a threshold
    "budget_exceeded": "budget",  # ... its hard one (jobs paused): resolved by hand, or by the new month's calm
}
TICKET = "ticket"  # the severity of a best-effort job's incident: recorded, shown, never paged
MAX_SEEN = 200  # event ids kept per incident for deduplication (a redelivery comes within minutes)


@dataclass(frozen=True)
class Channel:
    role: Role
    sns_topic: str | None = None
    webhook: str | None = None
    webhook_format: str = "json"
    webhook_secret: str | None = None  # a secret reference, resolved at delivery with the team's session


@dataclass(frozen=True)
class Policy:
    """Who is paged when, for one subject."""

    primary: Channel
    after_failures: int = 1
    secondary: Channel | None = None
    secondary_after: int = 3
    auto_pause_after: int | None = None
    pages: bool = True  # False: a best-effort job's incidents are tickets, recorded and never paged
    held_by: str | None = None  # a maintenance window open now that holds the job's pages (company/NAME)

    @classmethod
    def for_job(cls, escalation: Escalation | None, default_topic: str | None, tier: Tier = DEFAULT_TIER) -> Policy:
        """The job's escalation, routed by its SLO tier: critical pages at its first failure whatever
        ``after_failures`` says; important follows the escalation; best-effort opens a ticket and never pages."""
        if escalation is None:
            policy = cls(Channel("primary", sns_topic=default_topic))
        else:
            secondary = escalation.secondary
            form, secret = escalation.webhook_format, escalation.webhook_secret  # for both contacts' webhooks
            policy = cls(
                primary=Channel("primary", escalation.sns_topic, escalation.webhook, form, secret),
                after_failures=escalation.after_failures,
                secondary=(
                    Channel("secondary", secondary.sns_topic, secondary.webhook, form, secret) if secondary else None
                ),
                secondary_after=secondary.after if secondary else 3,
                auto_pause_after=escalation.auto_pause_after,
            )
        if tier == "critical":
            return replace(policy, after_failures=1)
        if tier == "best-effort":
            return replace(policy, pages=False)
        return policy


@dataclass(frozen=True)
class Page:
    role: Role
    notice: Notice
    subject: str
    title: str
    event: dict[str, Any]
    incident: dict[str, Any]


@dataclass(frozen=True)
class Decision:
    incident: Incident | None  # to store (None with ``resolved``: delete)
    resolved: bool = False
    pages: tuple[Page, ...] = ()
    pause_reason: str | None = None  # pause the job with this reason


def decide_open(incident: Incident | None, event: EscalationEvent, policy: Policy, now: datetime) -> Decision:
    """An event that opens or continues an incident."""
    incident_class = OPENS[event.kind]
    if incident is not None and event.event_id in incident.seen:
        return Decision(incident)  # a redelivery: already counted
    current = incident or Incident(
        event.subject, incident_class, instant_text(now), event.kind, severity=None if policy.pages else TICKET
    )
    failures = current.failures + (event.count if event.kind != "dispatcher_stalled" else 1)
    current = replace(
        current,
        failures=failures,
        last=event.model_dump(exclude_none=True),
        seen=(*current.seen, event.event_id)[-MAX_SEEN:],
    )
    pages: list[Page] = []
    already_paged = "primary" in current.paged
    threshold = policy.after_failures if incident_class == "failing" else 1
    snoozed = current.snoozed_until is not None and instant_text(now) < current.snoozed_until
    if policy.pages and not snoozed and "primary" not in current.paged and failures >= threshold:
        if policy.held_by is not None:
            return Decision(_held(current, "primary", policy.held_by, event, now))
        current = replace(current, paged=(*current.paged, "primary"))
        pages.append(_page("primary", "opened", current, event))
    secondary_at = threshold + policy.secondary_after
    if (
        policy.secondary
        and not snoozed
        and incident_class == "failing"
        and "primary" in current.paged
        and "secondary" not in current.paged
        and failures >= secondary_at
        and current.acknowledged_by is None  # someone acknowledged it: they are on it, nobody else is woken
    ):
        current = replace(current, paged=(*current.paged, "secondary"))
        pages.append(_page("secondary", "escalated", current, event))
    if event.kind == "budget_exceeded" and not current.auto_paused and policy.held_by is None and not snoozed:
        # The hard threshold paused jobs: said to whoever the warning reached, at once (a warning's page is not it).
        current = replace(current, auto_paused=True)
        if already_paged:
            pages.append(_page("primary", "paused", current, event))
    pause_reason = None
    if (
        incident_class == "failing"
        and policy.auto_pause_after is not None
        and not current.auto_paused
        and failures >= policy.auto_pause_after
    ):
        current = replace(current, auto_paused=True)
        pause_reason = (
            f"auto-paused after {failures} consecutive failures (last: {event.kind}"
            + (f", run {event.run_id}" if event.run_id else "")
            + (f": {event.error}" if event.error else "")
            + ")"
        )[:500]
        pages.append(_page("primary", "paused", current, event))
    return Decision(current, pages=tuple(pages), pause_reason=pause_reason)


MAX_HELD = 50  # held pages recorded per incident (the newest)


def _held(incident: Incident, role: Role, window: str, event: EscalationEvent, now: datetime) -> Incident:
    """The page a maintenance window holds, recorded on the incident instead of sent."""
    entry = {"role": role, "window": window, "at": instant_text(now), "kind": event.kind}
    return replace(incident, held=(*incident.held, entry)[-MAX_HELD:])


def decide_resolve(incident: Incident | None, event: EscalationEvent) -> Decision:
    """An event that ends an incident: one notice to each contact that was paged."""
    if incident is None:
        return Decision(None)
    pages = tuple(_page(role, "resolved", incident, event) for role in incident.paged)
    return Decision(None, resolved=True, pages=pages)


Notice = Literal["opened", "escalated", "paused", "resolved"]


def _page(role: Role, notice: Notice, incident: Incident, event: EscalationEvent) -> Page:
    what = {
        "run_failed": "run failed",
        "run_timed_out": "run timed out",
        "missed_schedule": "missed schedule",
        "job_quarantined": "quarantined by the dispatcher",
        "deadline_missed": "deadline missed",
        "circuit_open": "target circuit open",
        "dispatcher_stalled": "dispatcher stalled",
        "checks_warned": "warning check failed",
        "approval_requested": "approval requested",
        "job_stale": "stale (freshness)",
        "run_anomalous": "run outside its baseline",
        "budget_warning": "budget warning",
        "budget_exceeded": "budget exceeded: jobs paused",
    }.get(incident.first_kind, incident.first_kind)
    if notice == "resolved" and event.kind == "resolved_by_hand":
        what = f"{what}; resolved by hand: {event.detail or 'no reason given'}"
    prefix = {
        "opened": "[jobsched] ",
        "escalated": "[jobsched, escalated] ",
        "paused": "[jobsched, job paused] ",
        "resolved": "[jobsched, resolved] ",
    }[notice]
    if incident.incident_class in ("quality", "approval", "anomaly") and notice != "resolved":
        prefix = "[jobsched, approval] " if incident.incident_class == "approval" else "[jobsched, warning] "
    title = f"{prefix}{incident.subject}: {what}"
    if notice != "resolved" and incident.failures > 1:
        title += f" ({incident.failures} in a row)"
    incident_view = {
        "subject": incident.subject,
        "class": incident.incident_class,
        "opened_at": incident.opened_at,
        "failures": incident.failures,
        "paged": list(incident.paged),
        "auto_paused": incident.auto_paused,
    }
    return Page(role, notice, incident.subject, title[:100], event.model_dump(exclude_none=True), incident_view)


# ------------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class Links:
    region: str
    api_url: str | None = None
    log_groups: tuple[str, ...] = ()
    console_url: str | None = None  # a page a person opens for the run (``run`` is the API's JSON)

    def for_event(self, event: dict[str, Any], runbook_url: str | None) -> dict[str, str]:
        links: dict[str, str] = {}
        if runbook_url:
            links["runbook"] = runbook_url
        run_id, job = event.get("run_id"), event.get("job")
        if run_id:
            try:
                query = run_logs_query(str(job), str(run_id))
            except NotAQueryableRun:
                query = "fields @timestamp, level, message | sort @timestamp desc | limit 100"
            links["logs_insights_query"] = query
            links["logs_insights"] = (
                f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region={self.region}"
                "#logsV2:logs-insights$3FqueryDetail$3D~(editorString~"
                + _console_escape(query)
                + "~source~("
                + "~".join(_console_escape(group) for group in self.log_groups)
                + "))"
            )
        if run_id and job and self.api_url:
            team, _, name = job.partition("/")
            links["run"] = f"{self.api_url.rstrip('/')}/teams/{team}/jobs/{name}/runs/{urllib.parse.quote(run_id)}"
        if run_id and job and self.console_url:
            team, _, name = job.partition("/")
            where = f"/teams/{team}/jobs/{name}/runs/{urllib.parse.quote(run_id)}"
            links["console"] = self.console_url.rstrip("/") + where
        return links


def _console_escape(text: str) -> str:
    """CloudWatch console deep links escape with '*' instead of '%' inside the fragment."""
    return "'" + urllib.parse.quote(text, safe="").replace("%", "*")


def page_severity(incident: dict[str, Any]) -> Literal["info", "warning", "critical", "ticket"]:
    """Ticket for a best-effort job's incident (never paged), warning for a failed warning check (the run still
    succeeded), info for an approval someone is asked for; critical for everything else."""
    if incident.get("severity") == TICKET:
        return "ticket"
    return {"quality": "warning", "anomaly": "warning", "approval": "info"}.get(str(incident.get("class")), "critical")  # type: ignore[return-value]


def render(page: Page, links: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The page as text (SNS: email and chat) and as JSON (webhooks, SNS subscribers that parse it)."""
    event = page.event
    lines = [page.title, ""]
    for label, key in (
        ("team", "team"),
        ("job", "job"),
        ("run", "run_id"),
        ("scheduled for", "scheduled_at"),
        ("attempt", "attempt"),
        ("lateness (s)", "lateness_seconds"),
        ("target", "target"),
        ("instants missed", "count"),
        ("error", "error"),
        ("detail", "detail"),
    ):
        if event.get(key) is not None and not (key == "count" and event.get("kind") != "missed_schedule"):
            lines.append(f"{label}: {event[key]}")
    incident = page.incident
    severity = page_severity(incident)
    lines.append(f"severity: {severity}")
    lines.append(f"incident: open since {incident['opened_at']}, {incident['failures']} event(s)")
    if page.notice == "paused":
        lines.append("the job was paused: resume it with `jobsched resume` once fixed")
    lines += ["", *[f"{name}: {url}" for name, url in links.items()]]
    document = {
        "notice": page.notice,
        "severity": severity,
        "role": page.role,
        "title": page.title,
        "event": event,
        "incident": incident,
        "links": links,
    }
    return "\n".join(lines), document
