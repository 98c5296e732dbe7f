"""Page delivery, off the incident path (#13): a dead webhook delays only its own pages.

The escalation handler stores the incident with its pages unsent, puts one ``PageDelivery`` per page and
destination on the pages queue, then clears the outbox; it never waits on a topic or a webhook. The pages
handler delivers each with a short timeout. A delivery that fails comes back with a growing delay; after
``FALLBACK_AFTER`` tries (or at once, when the team may not use the channel) the page goes to the
deployment's own topic, saying why, so a page is never dropped while that topic works.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel

from jobsched.core.errors import ChannelRefused
from jobsched.ports import NotifierPort

log = logging.getLogger(__name__)

FALLBACK_AFTER = 4  # tries at the job's own channel before the deployment's topic gets the page
FIRST_RETRY = timedelta(seconds=30)
FAILING_FOR = timedelta(seconds=25)  # after a failed try, other pages to that address wait without trying;
# shorter than FIRST_RETRY, so a page's own retry always tries again
MAX_RETRY = timedelta(minutes=15)

Delivered = Literal["sent", "fallback", "undeliverable"]


class PageDelivery(BaseModel):
    """One page to one destination, rendered: the pages handler needs nothing else to send it."""

    page_id: str  # subject/class/version/index/destination: the same on every redelivery
    destination: Literal["topic", "webhook"]
    address: str  # topic ARN or webhook URL
    team: str | None = None  # the topic or webhook is this team's (checked); None: the deployment's topic
    title: str
    text: str
    document: dict[str, Any]
    attributes: dict[str, str]
    webhook_format: Literal["json", "slack"] = "json"
    webhook_secret: str | None = None  # a reference (never the value): resolved when sending


class PageNotDelivered(RuntimeError):
    """Try again after ``retry_in`` (the pages handler sets the message's visibility to it)."""

    def __init__(self, message: str, retry_in: timedelta) -> None:
        super().__init__(message)
        self.retry_in = retry_in


def retry_delay(attempt: int) -> timedelta:
    """30 s, 1 min, 2 min, ... up to 15 min after the ``attempt``-th failed try."""
    doublings = max(0, min(attempt - 1, 10))
    return min(MAX_RETRY, FIRST_RETRY * (1 << doublings))


@dataclass
class PageSender:
    notifier: NotifierPort
    default_topic: str | None
    monotonic: Callable[[], float] = time.monotonic
    # Addresses that failed lately (per warm function): a flood of pages to one dead webhook costs one
    # timeout, not one per page, and leaves the batch's other pages alone.
    _failing: dict[str, tuple[float, str]] = field(default_factory=dict)

    def deliver(self, delivery: PageDelivery, *, attempt: int) -> Delivered:
        """Send once. Raises PageNotDelivered while the channel may still come back."""
        failing = self._failing.get(delivery.address)
        if failing is not None and failing[0] > self.monotonic():
            return self._not_delivered(delivery, attempt, f"not tried: it failed moments ago ({failing[1]})")
        try:
            self._send(delivery)
        except ChannelRefused as refused:
            return self._fallback(delivery, f"Not sent to the job's own channel: {refused}")
        except Exception as error:
            reason = f"{type(error).__name__}: {error}"
            self._failing[delivery.address] = (self.monotonic() + FAILING_FOR.total_seconds(), reason)
            return self._not_delivered(delivery, attempt, reason, error)
        self._failing.pop(delivery.address, None)
        return "sent"

    def _not_delivered(
        self, delivery: PageDelivery, attempt: int, reason: str, error: Exception | None = None
    ) -> Delivered:
        if attempt >= FALLBACK_AFTER and self._can_fall_back(delivery):
            return self._fallback(delivery, f"The job's {delivery.destination} failed {attempt} times: {reason}")
        raise PageNotDelivered(f"{delivery.page_id}: {reason}", retry_delay(attempt)) from error

    def _send(self, delivery: PageDelivery) -> None:
        if delivery.destination == "webhook":
            document = (
                {"text": f"{delivery.title}\n{delivery.text}"}
                if delivery.webhook_format == "slack"
                else delivery.document
            )
            self.notifier.post(delivery.address, document, secret=delivery.webhook_secret, team=delivery.team)
        else:
            self.notifier.publish(
                delivery.address,
                subject=delivery.title,
                text=delivery.text,
                attributes=delivery.attributes,
                team=delivery.team,
            )

    def _can_fall_back(self, delivery: PageDelivery) -> bool:
        return bool(self.default_topic) and not (
            delivery.destination == "topic" and delivery.address == self.default_topic
        )

    def _fallback(self, delivery: PageDelivery, note: str) -> Delivered:
        log.warning("page %s goes to the deployment's topic: %s", delivery.page_id, note)
        if not self._can_fall_back(delivery):
            log.error("page %s is undeliverable: %s", delivery.page_id, note)
            return "undeliverable"
        assert self.default_topic is not None
        self.notifier.publish(
            self.default_topic,
            subject=delivery.title,
            text=f"{delivery.text}\n\n{note}",
            attributes=delivery.attributes,
        )
        return "fallback"


def page_deliveries(
    page_id: str,
    *,
    title: str,
    text: str,
    document: dict[str, Any],
    attributes: dict[str, str],
    sns_topic: str | None,
    webhook: str | None,
    team: str | None,
    default_topic: str | None,
    webhook_format: Literal["json", "slack"] = "json",
    webhook_secret: str | None = None,
) -> Sequence[PageDelivery]:
    """One delivery per destination, so a dead webhook never holds back the same page's topic."""
    common = {"title": title, "text": text, "document": document, "attributes": attributes}
    found = []
    if sns_topic:
        own = sns_topic == default_topic
        found.append(
            PageDelivery(
                page_id=f"{page_id}/topic", destination="topic", address=sns_topic, team=None if own else team, **common
            )
        )
    if webhook:
        found.append(
            PageDelivery(
                page_id=f"{page_id}/webhook",
                destination="webhook",
                address=webhook,
                team=team,
                webhook_format=webhook_format,
                webhook_secret=webhook_secret,
                **common,
            )
        )
    return found
