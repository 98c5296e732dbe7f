"""The Lambda handlers as AWS calls them: sample events from events/, Powertools batch, the DLQ."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import urllib3

from jobsched import wiring
from jobsched.adapters.aws.notify import Notifier
from jobsched.core.runs import RunStatus, instant_text
from tests.aws.harness import EVENTS, FakeContext, Stack, sqs_event


def test_dispatcher_handler_ticks_with_the_sample_event(deployed: Stack) -> None:
    from functions.dispatcher.handler import handler

    now = wiring.utc_now()
    deployed.clock.now = now
    deployed.register(
        {"name": "live", "team": "ops", "schedule": {"expression": "* * * * *"}, "target": {"type": "callback"}}
    )
    event = json.loads((EVENTS / "dispatcher_tick.json").read_text())
    summary = handler(event, FakeContext(function_name="jobsched-test-dispatcher"))
    assert summary["due_jobs"] == 1 and summary["messages_sent"] >= 14 and summary["advanced"] == 1


def test_worker_handler_runs_a_message_and_reports_no_failure(deployed: Stack) -> None:
    from functions.worker.handler import handler

    now = wiring.utc_now()
    deployed.clock.now = now
    inbox = deployed.sqs.create_queue(QueueName="inbox", tags={"jobsched-team": "ops"})["QueueUrl"]
    deployed.register({"name": "nightly", "team": "ops", "target": {"type": "sqs", "queue_url": inbox}})
    body = json.loads(json.loads((EVENTS / "worker_sqs_batch.json").read_text())["Records"][0]["body"])
    body |= {"scheduled_at": instant_text(now), "fire_at": instant_text(now)}
    deployed.sqs.send_message(QueueUrl=deployed.queue_urls["normal"], MessageBody=json.dumps(body))
    messages = deployed.sqs.receive_message(QueueUrl=deployed.queue_urls["normal"])["Messages"]
    response = handler(sqs_event(deployed, messages), FakeContext())
    assert response == {"batchItemFailures": []}
    run = deployed.runs.get("ops/nightly", "20270104T100000Z")
    assert run is not None and run.status is RunStatus.SUCCEEDED
    assert len(deployed.sqs.receive_message(QueueUrl=inbox).get("Messages", [])) == 1


def test_a_message_that_cannot_be_parsed_ends_in_the_dead_letter_queue(deployed: Stack) -> None:
    from functions.worker.handler import handler

    url = deployed.queue_urls["normal"]
    deployed.sqs.send_message(QueueUrl=url, MessageBody='{"job": "ops/x", "this is": "not a run message"}')
    failures = 0
    for _ in range(10):
        messages = deployed.sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages", [])
        if not messages:
            break
        response = handler(sqs_event(deployed, messages), FakeContext())
        failures += len(response["batchItemFailures"])
    assert failures == 5  # maxReceiveCount from names.WORK_QUEUES
    [dead] = deployed.sqs.receive_message(QueueUrl=deployed.dlq_urls["normal"])["Messages"]
    assert "not a run message" in dead["Body"]


def test_escalation_handler_pages_once_for_the_sample_event_delivered_twice(deployed: Stack) -> None:
    from functions.escalation.handler import handler

    deployed.register({"name": "nightly", "team": "ops", "target": {"type": "callback"}})
    event = json.loads((EVENTS / "escalation_sqs_batch.json").read_text())
    twice = {"Records": [event["Records"][0], {**event["Records"][0], "messageId": "redelivered"}]}
    assert handler(twice, FakeContext(function_name="jobsched-test-escalation")) == {"batchItemFailures": []}
    [page] = deployed.pages()
    assert page["subject"] == "[jobsched] ops/nightly: run failed"
    assert "https://api.example.com/dev/teams/ops/jobs/nightly/runs/20270104T100000Z" in page["message"]
    assert deployed.jobs.open_incidents("ops/nightly") == {"failing"}


def page_event(stack: Stack, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Real moto messages of the pages queue in the shape of the sample event."""
    template = json.loads((EVENTS / "pages_sqs_batch.json").read_text())["Records"][0]
    records = []
    for raw in messages:
        record = copy.deepcopy(template)
        record |= {"messageId": raw["MessageId"], "receiptHandle": raw["ReceiptHandle"], "body": raw["Body"]}
        record["attributes"]["ApproximateReceiveCount"] = raw["Attributes"]["ApproximateReceiveCount"]
        records.append(record)
    return {"Records": records}


def test_pages_handler_delivers_the_sample_page_and_backs_off_a_failing_webhook(
    deployed: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functions.pages import handler as pages
    from jobsched.paging.delivery import FIRST_RETRY

    sample = json.loads(json.loads((EVENTS / "pages_sqs_batch.json").read_text())["Records"][0]["body"])
    topic_page = sample | {"page_id": "ops/nightly/failing/v1/0/topic", "destination": "topic", "team": None}
    topic_page["address"] = deployed.default_topic
    deployed.page_queue.send([json.dumps(sample), json.dumps(topic_page)])
    received = deployed.sqs.receive_message(
        QueueUrl=deployed.page_deliveries_url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    webhook_id = next(raw["MessageId"] for raw in received if '"webhook"' in raw["Body"])
    posts: list[str] = []

    class DeadWebhook:
        def request(self, method: str, url: str, **_: Any) -> Any:
            posts.append(url)
            raise urllib3.exceptions.ReadTimeoutError(None, url, "read timed out")  # type: ignore[arg-type]

    notifier = wiring.default_page_sender().notifier
    assert isinstance(notifier, Notifier)
    notifier.http = DeadWebhook()
    visibility: list[int] = []
    real = deployed.sqs.change_message_visibility
    monkeypatch.setattr(pages.queue(), "_client", deployed.sqs)

    def spied(**kwargs: Any) -> Any:
        visibility.append(kwargs["VisibilityTimeout"])
        return real(**kwargs)

    monkeypatch.setattr(deployed.sqs, "change_message_visibility", spied)
    result = pages.handler(page_event(deployed, received), FakeContext(function_name="jobsched-test-pages"))
    assert result == {"batchItemFailures": [{"itemIdentifier": webhook_id}]}, "only the webhook's page comes back"
    assert posts == ["https://hooks.example.com/oncall"]
    assert visibility == [int(FIRST_RETRY.total_seconds())], "it comes back after the backoff, not the queue's timeout"
    [page] = deployed.pages()
    assert page["topic"] == deployed.default_topic and page["subject"] == "[jobsched] ops/nightly: run failed"
