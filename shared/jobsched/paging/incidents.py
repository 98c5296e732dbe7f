"""The escalation handler's work: one event in, the incident updated, pages queued (outbox first).

Order: the incident is written with its pages as ``unsent`` (conditional on its version, so concurrent
events for one subject serialize), then the pages are put on the pages queue, then ``unsent`` is cleared.
A crash or a failed send leaves them unsent; the next event for the subject, or this event's redelivery,
queues them. So a page can be sent twice after a crash, never lost, and never once per failure. Delivery
to topics and webhooks is the pages handler's (``jobsched.paging.delivery``): a dead webhook never slows this one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from jobsched.core.budgets import BUDGET_SUBJECT_PREFIX, Budget
from jobsched.core.records import Incident, IncidentClass, StoredIncident, StoredJob, VersionConflict
from jobsched.core.runs import instant_text
from jobsched.paging.delivery import PageDelivery, page_deliveries
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.paging.rules import (
    OPENS,
    Channel,
    Decision,
    Links,
    Page,
    Policy,
    decide_open,
    decide_resolve,
    render,
)
from jobsched.ports import EscalationStorePort, PageQueuePort
from jobsched.registry.jobs import pause_job
from jobsched.schedule.company import CompanySettings

log = logging.getLogger(__name__)
PRINCIPAL = "jobsched:escalation"
ATTEMPTS = 10  # optimistic-concurrency retries per event


@dataclass(frozen=True)
class Handled:
    pages: tuple[Page, ...] = ()
    paused: bool = False


@dataclass
class Escalator:
    jobs: EscalationStorePort
    pages: PageQueuePort
    clock: Callable[[], datetime]
    default_topic: str | None
    links: Links

    def handle(self, event: EscalationEvent) -> Handled:
        is_job = event.job is not None and event.subject == event.job
        stored_job = self.jobs.get(event.subject) if is_job else None  # read once, for every class it touches
        spec = stored_job.spec if stored_job else None
        policy = Policy.for_job(
            spec.escalation if spec else None, self.default_topic, spec.tier if spec else "important"
        )
        if event.subject.startswith(BUDGET_SUBJECT_PREFIX) and event.team:
            # A team's budget pages where its budget says (read when it pages: budgets change rarely).
            budget = self.jobs.budgets().get(event.team)
            escalation = Budget.model_validate(budget).escalation if budget else None
            policy = Policy.for_job(escalation, self.default_topic)
        if spec is not None and not event.resolves():
            # One read of the company's windows per event that may page (a resolve never does).
            held_by = CompanySettings.read(self.jobs).holding_pages(spec, self.clock())
            policy = replace(policy, held_by=held_by)
        pages: list[Page] = []
        paused = False
        for incident_class in event.resolves() or (OPENS[event.kind],):
            handled = self._apply(event, incident_class, is_job, stored_job, policy)
            pages += handled.pages
            paused = paused or handled.paused
        return Handled(tuple(pages), paused)

    def _apply(
        self,
        event: EscalationEvent,
        incident_class: IncidentClass,
        is_job: bool,
        stored_job: StoredJob | None,
        policy: Policy,
    ) -> Handled:
        for _ in range(ATTEMPTS):
            stored = self.jobs.get_incident(event.subject, incident_class)
            if stored is not None and stored.unsent:
                self._send(stored, policy, stored_job)  # what an earlier try could not deliver
                stored = self.jobs.get_incident(event.subject, incident_class)
            incident = stored.incident if stored is not None and not stored.resolved else None
            if event.resolves():
                decision = decide_resolve(incident, event)
            else:
                decision = decide_open(incident, event, policy, self.clock())
            if decision.incident == incident and not decision.resolved:
                return Handled()  # nothing changes (a redelivery, or nothing to resolve)
            try:
                written = self._write(stored, decision)
            except VersionConflict:
                continue
            if is_job:
                self.jobs.mark_incident(event.subject, incident_class, is_open=not decision.resolved)
            paused = False
            if decision.pause_reason and stored_job is not None:
                pause_job(
                    self.jobs, stored_job.key, now=self.clock(), principal=PRINCIPAL, reason=decision.pause_reason
                )
                paused = True
            self._send(written, policy, stored_job)
            return Handled(decision.pages, paused)
        raise VersionConflict(f"incident {event.subject}/{incident_class}: too many concurrent changes")

    def _write(self, stored: StoredIncident | None, decision: Decision) -> StoredIncident:
        unsent = json.dumps([asdict(page) for page in decision.pages]) if decision.pages else None
        version = stored.version if stored is not None else 0
        if decision.resolved:
            assert stored is not None
            return self.jobs.put_incident(
                StoredIncident(stored.values, version, unsent, resolved=True), expected_version=version
            )
        assert decision.incident is not None
        values = {key: value for key, value in asdict(decision.incident).items() if key != "version"}
        return self.jobs.put_incident(StoredIncident(values, version, unsent), expected_version=version)

    def _send(self, stored: StoredIncident, policy: Policy, job: StoredJob | None) -> None:
        """Queue the incident's unsent pages for the pages handler, then clear its outbox."""
        deliveries: list[PageDelivery] = []
        for index, raw in enumerate(json.loads(stored.unsent or "[]")):
            page = Page(**raw)
            channel = policy.primary if page.role == "primary" else policy.secondary
            page_id = f"{stored.values.get('subject')}/{stored.values.get('incident_class')}/v{stored.version}/{index}"
            deliveries += self._deliveries(page_id, page, channel, job)
        if deliveries:
            self.pages.send([delivery.model_dump_json() for delivery in deliveries])
        self.jobs.clear_incident_outbox(stored)

    def _deliveries(
        self, page_id: str, page: Page, channel: Channel | None, job: StoredJob | None
    ) -> Sequence[PageDelivery]:
        if channel is None or (channel.sns_topic is None and channel.webhook is None):
            log.warning("no escalation channel for %s: %s", page.subject, page.title)
            return ()
        runbook = str(job.spec.runbook_url) if job and job.spec.runbook_url else None
        text, document = render(page, self.links.for_event(page.event, runbook))
        attributes = {
            "notice": page.notice,
            "kind": str(page.event.get("kind", "")),
            "team": str(page.event.get("team") or ""),
            "role": page.role,
        }
        return page_deliveries(
            page_id,
            title=page.title,
            text=text,
            document=document,
            attributes=attributes,
            sns_topic=channel.sns_topic,
            webhook=channel.webhook,
            team=job.spec.team if job is not None else None,
            default_topic=self.default_topic,
            webhook_format="slack" if channel.webhook_format == "slack" else "json",
            webhook_secret=channel.webhook_secret,
        )


def acknowledge(
    store: EscalationStorePort, subject: str, incident_class: IncidentClass, *, by: str, now: datetime
) -> Incident | None:
    """Someone is on it: the open incident names who and when, and its secondary contact is not paged. None when
    no such incident is open. Acknowledging again changes nothing (the first one stays)."""

    def acknowledged(values: dict[str, Any]) -> dict[str, Any] | None:
        if values.get("acknowledged_by"):
            return None
        return values | {"acknowledged_by": by, "acknowledged_at": instant_text(now)}

    return _change_open(store, (subject, incident_class), acknowledged)


def snooze(
    store: EscalationStorePort, subject: str, incident_class: IncidentClass, *, by: str, until: datetime
) -> Incident | None:
    """No page for the open incident before ``until`` (its events are still counted; the later one wins). None
    when no such incident is open."""
    snoozed = {"snoozed_until": instant_text(until), "snoozed_by": by}
    return _change_open(store, (subject, incident_class), lambda values: values | snoozed)


def _change_open(
    store: EscalationStorePort,
    incident: tuple[str, IncidentClass],
    change: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> Incident | None:
    """The open incident's fields changed by ``change`` (None: nothing to change), versioned like every incident
    write and read again after a concurrent event; None when no such incident is open."""
    subject, incident_class = incident
    for _ in range(ATTEMPTS):
        stored = store.get_incident(subject, incident_class)
        if stored is None or stored.resolved:
            return None
        values = change(stored.values)
        if values is None:
            return stored.incident
        try:
            written = store.put_incident(
                StoredIncident(values, stored.version, stored.unsent), expected_version=stored.version
            )
        except VersionConflict:
            continue  # an event changed it meanwhile: read it again
        return written.incident
    raise VersionConflict(f"incident {subject}/{incident_class}: too many concurrent changes")
