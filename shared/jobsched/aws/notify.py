"""Pages out: SNS topics and webhooks. A failed delivery raises, so the escalation handler's message
comes back and the page (kept unsent on its incident) goes out on the next try."""

from __future__ import annotations

import json
from typing import Any

import urllib3

from jobsched.aws.clients import client

WEBHOOK_TIMEOUT_SECONDS = 5.0


class DeliveryFailed(RuntimeError):
    pass


class Notifier:
    def __init__(self, *, sns: Any | None = None, http: urllib3.PoolManager | None = None) -> None:
        self._sns = sns
        self.http = http or urllib3.PoolManager(retries=False)

    @property
    def sns(self) -> Any:
        return self._sns or client("sns")

    def publish(self, topic_arn: str, *, subject: str, text: str, attributes: dict[str, str]) -> None:
        self.sns.publish(
            TopicArn=topic_arn,
            # SNS subjects: at most 100 printable characters, no line breaks.
            Subject=" ".join(subject.split())[:100],
            Message=text,
            MessageAttributes={
                name: {"DataType": "String", "StringValue": value} for name, value in attributes.items() if value
            },
        )

    def post(self, url: str, document: dict[str, Any]) -> None:
        try:
            response = self.http.request(
                "POST",
                url,
                body=json.dumps(document).encode(),
                headers={"Content-Type": "application/json", "User-Agent": "jobsched-escalation"},
                timeout=urllib3.Timeout(total=WEBHOOK_TIMEOUT_SECONDS),
                retries=False,
                redirect=False,
            )
        except urllib3.exceptions.HTTPError as error:
            raise DeliveryFailed(f"webhook {url}: {type(error).__name__}") from None
        if not 200 <= response.status < 300:
            raise DeliveryFailed(f"webhook {url}: HTTP {response.status}")
