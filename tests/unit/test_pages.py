"""Page delivery: backoff, fallback to the deployment's topic, and one dead address costing one timeout."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.errors import ChannelRefused
from jobsched.paging.delivery import (
    FALLBACK_AFTER,
    FIRST_RETRY,
    MAX_RETRY,
    PageDelivery,
    PageNotDelivered,
    PageSender,
    retry_delay,
)

DEFAULT = "arn:aws:sns:us-east-1:123456789012:jobsched-dev-escalations"


class FakeNotifier:
    def __init__(self) -> None:
        self.posts: list[str] = []
        self.published: list[tuple[str, str]] = []
        self.dead: set[str] = set()
        self.refused: set[str] = set()

    def post(self, url: str, document: dict[str, Any], **_: Any) -> None:
        self.posts.append(url)
        if url in self.refused:
            raise ChannelRefused(f"webhook {url}: a private address")
        if url in self.dead:
            raise TimeoutError("read timed out")

    def publish(
        self, topic: str, *, subject: str, text: str, attributes: dict[str, str], team: str | None = None
    ) -> None:
        self.published.append((topic, text))


def page(address: str, index: int = 0) -> PageDelivery:
    return PageDelivery(
        page_id=f"team/job/failing/v1/{index}/webhook",
        destination="webhook",
        address=address,
        team="team",
        title="[jobsched] team/job: run failed",
        text="team/job failed",
        document={"notice": "opened"},
        attributes={"notice": "opened"},
    )


def test_retries_back_off_from_30_seconds_to_15_minutes() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 4)] == [FIRST_RETRY * f for f in (1, 2, 4, 8)]
    assert retry_delay(50) == MAX_RETRY


def test_a_dead_webhook_costs_one_try_for_a_flood_of_pages_and_then_falls_back() -> None:
    notifier, now = FakeNotifier(), [0.0]
    notifier.dead.add("https://dead.example.com/hook")
    sender = PageSender(notifier, DEFAULT, monotonic=lambda: now[0])
    for index in range(20):
        with pytest.raises(PageNotDelivered) as failed:
            sender.deliver(page("https://dead.example.com/hook", index), attempt=1)
        assert failed.value.retry_in == FIRST_RETRY
    assert notifier.posts == ["https://dead.example.com/hook"], "tried once; the other 19 waited without trying"
    assert sender.deliver(page("https://alive.example.com/hook"), attempt=1) == "sent"
    now[0] += FIRST_RETRY.total_seconds()  # the page's own retry tries the address again
    with pytest.raises(PageNotDelivered):
        sender.deliver(page("https://dead.example.com/hook"), attempt=2)
    assert len(notifier.posts) == 3
    assert sender.deliver(page("https://dead.example.com/hook"), attempt=FALLBACK_AFTER) == "fallback"
    [(topic, text)] = notifier.published
    assert topic == DEFAULT and f"failed {FALLBACK_AFTER} times" in text


def test_a_refused_channel_falls_back_at_once_and_without_a_default_topic_is_undeliverable() -> None:
    notifier = FakeNotifier()
    notifier.refused.add("http://10.0.0.5/hook")
    assert PageSender(notifier, DEFAULT).deliver(page("http://10.0.0.5/hook"), attempt=1) == "fallback"
    assert "Not sent to the job's own channel" in notifier.published[0][1]
    assert PageSender(notifier, None).deliver(page("http://10.0.0.5/hook"), attempt=1) == "undeliverable"


def test_the_deployment_topic_failing_never_falls_back_to_itself() -> None:
    class DownTopic(FakeNotifier):
        def publish(self, topic: str, **_: Any) -> None:
            raise ConnectionError("SNS unavailable")

    own = page(DEFAULT).model_copy(update={"destination": "topic", "team": None})
    with pytest.raises(PageNotDelivered):
        PageSender(DownTopic(), DEFAULT).deliver(own, attempt=FALLBACK_AFTER + 3)  # type: ignore[arg-type]
    assert timedelta(0) < retry_delay(FALLBACK_AFTER + 3) <= MAX_RETRY
