"""Paging drills: a clearly marked test page sent now through a job's real escalation chain (its primary and
secondary contacts, each SNS topic and webhook, routed as a real page would be), and a report per destination:
delivered, failed (with the reason), or refused (the team may not use it: another team's topic, a private
address). Nothing falls back to the deployment's topic: a drill is about the job's own chain. Each outcome is
kept per team and destination (``DrillsPort``), so the destinations never verified, or failing, can be listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from jobsched.core.errors import ChannelRefused
from jobsched.core.records import StoredJob
from jobsched.core.runs import instant_text
from jobsched.paging.delivery import PageDelivery, page_deliveries
from jobsched.paging.rules import Policy
from jobsched.ports import NotifierPort

DrillOutcome = Literal["delivered", "failed", "refused"]
TEST_TITLE = "[jobsched, TEST] paging drill for {job}: nothing is wrong"


@dataclass(frozen=True)
class DrillResult:
    job: str
    role: str  # primary or secondary
    destination: str  # topic or webhook
    address: str
    outcome: DrillOutcome
    reason: str | None = None


def destinations(stored: StoredJob, default_topic: str | None) -> list[tuple[str, PageDelivery]]:
    """(role, delivery) of every destination of the job's chain, each carrying the marked test page."""
    spec = stored.spec
    policy = Policy.for_job(spec.escalation, default_topic, spec.tier)
    title = TEST_TITLE.format(job=spec.key)
    text = (
        f"{title}\n\nThis is a test of the escalation chain of {spec.key} (team {spec.team}), sent on request. "
        "No run failed. If you received it, this destination works."
    )
    document = {"notice": "test", "test": True, "title": title, "job": spec.key, "team": spec.team}
    found = []
    for role, channel in (("primary", policy.primary), ("secondary", policy.secondary)):
        if channel is None:
            continue
        for delivery in page_deliveries(
            f"drill/{spec.key}/{role}",
            title=title,
            text=text,
            document=document | {"role": role},
            attributes={"notice": "test", "kind": "paging_drill", "role": role, "test": "true"},
            sns_topic=channel.sns_topic,
            webhook=channel.webhook,
            team=spec.team,
            default_topic=default_topic,
            webhook_format="slack" if channel.webhook_format == "slack" else "json",
            webhook_secret=channel.webhook_secret,
        ):
            found.append((role, delivery))
    return found


@dataclass(frozen=True)
class Destination:
    """Where a team's jobs page, which of them page it, and its last drill (None: never verified)."""

    address: str
    destination: str  # topic or webhook
    jobs: tuple[str, ...]
    last_outcome: str | None = None
    last_verified_at: str | None = None
    reason: str | None = None

    @property
    def failing(self) -> bool:
        return self.last_outcome in ("failed", "refused")


def team_destinations(
    jobs: Sequence[StoredJob], default_topic: str | None, verified: dict[str, dict[str, str]]
) -> list[Destination]:
    """Every destination the team's ``jobs`` page, by address, with its last drill from ``verified``."""
    paged: dict[str, tuple[str, list[str]]] = {}
    for stored in jobs:
        for _, delivery in destinations(stored, default_topic):
            kind, paging = paged.setdefault(delivery.address, (delivery.destination, []))
            if stored.key not in paging:
                paging.append(stored.key)
    found = []
    for address, (kind, paging) in sorted(paged.items()):
        last = verified.get(address, {})
        found.append(Destination(address, kind, tuple(paging), last.get("outcome"), last.get("at"), last.get("reason")))
    return found


def drill(notifier: NotifierPort, stored: StoredJob, default_topic: str | None) -> list[DrillResult]:
    """Send the test page to every destination of the job's chain, now; what became of each."""
    results = []
    for role, delivery in destinations(stored, default_topic):
        outcome: DrillOutcome = "delivered"
        reason = None
        try:
            if delivery.destination == "webhook":
                notifier.post(delivery.address, delivery.document, secret=delivery.webhook_secret, team=delivery.team)
            else:
                notifier.publish(
                    delivery.address,
                    subject=delivery.title,
                    text=delivery.text,
                    attributes=delivery.attributes,
                    team=delivery.team,
                )
        except ChannelRefused as refused:
            outcome, reason = "refused", str(refused)
        except Exception as error:  # the destination's own failure: reported, the next one still tried
            outcome, reason = "failed", f"{type(error).__name__}: {error}"
        results.append(DrillResult(stored.key, role, delivery.destination, delivery.address, outcome, reason))
    return results


def verified_values(results: Sequence[DrillResult], now: datetime) -> dict[str, dict[str, str]]:
    """What is kept per destination address: the last drill's outcome, when, for which job."""
    return {
        result.address: {
            "outcome": result.outcome,
            "at": instant_text(now),
            "job": result.job,
            "destination": result.destination,
            **({"reason": result.reason[:300]} if result.reason else {}),
        }
        for result in results
    }
