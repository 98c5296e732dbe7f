"""Pages out: SNS topics and webhooks. A failed delivery raises, so the pages handler's message comes
back (with backoff) and the page goes out on a later try.

A team's topic is published to with the team's session, after its ownership tag is checked; a webhook
goes through the egress guard. A channel the team may not use raises ``ChannelRefused`` (not retried:
the pages handler sends the page to the deployment's own topic instead, saying why).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import urllib3

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.ownership import TeamSessions
from jobsched.adapters.aws.targets import SecretResolver, SessionSecretResolver
from jobsched.core.errors import ChannelRefused
from jobsched.core.urls import UrlRefused
from jobsched.paging.signing import signed_headers
from jobsched.tenancy.egress import AddressPolicy, EgressRefused, GuardedHttp
from jobsched.tenancy.ownership import NotOwned, OwnershipGuard, ResourceKind, ResourceRef, secret_resource

WEBHOOK_TIMEOUT_SECONDS = 3.0  # short: a slow webhook holds only its own page (jobsched.paging.delivery)


class DeliveryFailed(RuntimeError):
    pass


class Notifier:
    def __init__(
        self,
        *,
        sns: Any | None = None,
        http: Any | None = None,
        guard: OwnershipGuard | None = None,
        sessions: TeamSessions | None = None,
        secret_resolver: SecretResolver | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sns = sns
        self.http = http or GuardedHttp(AddressPolicy())
        self.guard = guard
        self.sessions = sessions
        self.secret_resolver = secret_resolver
        self.clock = clock

    def sns_for(self, team: str | None) -> Any:
        if team is not None and self.sessions is not None and self._sns is None:
            return self.sessions.client(team, "sns")
        return self._sns or client("sns")

    def publish(
        self, topic_arn: str, *, subject: str, text: str, attributes: dict[str, str], team: str | None = None
    ) -> None:
        """``team``: the topic is that team's (checked); None: the deployment's own topic."""
        if team is not None and self.guard is not None:
            try:
                self.guard.check(ResourceRef(ResourceKind.TOPIC, topic_arn), team)
            except NotOwned as refused:
                raise ChannelRefused(str(refused)) from None
        self.sns_for(team).publish(
            TopicArn=topic_arn,
            # SNS subjects: at most 100 printable characters, no line breaks.
            Subject=" ".join(subject.split())[:100],
            Message=text,
            MessageAttributes={
                name: {"DataType": "String", "StringValue": value} for name, value in attributes.items() if value
            },
        )

    def post(self, url: str, document: dict[str, Any], *, secret: str | None = None, team: str | None = None) -> None:
        """POST the page; with ``secret`` (a reference to one of ``team``'s secrets) signed (watch.webhooks)."""
        body = json.dumps(document).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "jobsched-escalation"}
        if secret is not None:
            headers |= signed_headers(self._secret(secret, team), int(self.clock()), body)
        try:
            response = self.http.request(
                "POST",
                url,
                body=body,
                headers=headers,
                timeout=urllib3.Timeout(total=WEBHOOK_TIMEOUT_SECONDS),
                retries=False,
                redirect=False,
            )
        except (UrlRefused, EgressRefused) as refused:
            raise ChannelRefused(f"webhook {url}: {refused}") from None
        except urllib3.exceptions.HTTPError as error:
            raise DeliveryFailed(f"webhook {url}: {type(error).__name__}") from None
        if not 200 <= response.status < 300:
            raise DeliveryFailed(f"webhook {url}: HTTP {response.status}")

    def _secret(self, reference: str, team: str | None) -> str:
        """The signing secret, read as the team after its ownership is checked."""
        if team is None:
            raise ChannelRefused(f"webhook secret {reference}: no team to read it as")
        if self.guard is not None:
            try:
                self.guard.check(secret_resource(reference, "escalation.webhook_secret"), team)
            except NotOwned as refused:
                raise ChannelRefused(str(refused)) from None
        resolver = self.secret_resolver or SessionSecretResolver(self.sessions or TeamSessions(None))
        return resolver(reference, team)
