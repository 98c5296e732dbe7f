"""No noisy neighbours (#13, first part): what one team sends cannot stall a shared component."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from jobsched import wiring
from jobsched.core.limits import TeamLimits
from jobsched.core.names import LOCAL_STAGE, Env
from jobsched.core.runs import RunMessage, RunStatus, instant_text, parse_instant
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import Clock, FakeContext, Stack, sqs_event
from tests.helpers import recording_server, silent_server

NOISY = {
    "schedule": {"expression": "* * * * *", "blackouts": [{"cron": "* * 1 12 *", "duration": "31d"}]},
    "target": {"type": "lambda", "function": "echo"},
}


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


def test_put_refuses_a_schedule_that_would_stall_the_dispatcher(api: ApiClient, stack: Stack) -> None:
    started = time.perf_counter()
    response = api.call("PUT", "/teams/noisy/jobs/december", NOISY, principal=team_role("noisy"))
    assert response.status == 422 and response.body["error"]["field"] == "schedule"
    assert response.body["error"]["errors"][0]["code"] == "schedule_too_expensive"
    assert time.perf_counter() - started < 10
    assert stack.jobs.get("noisy/december") is None


def test_validate_refuses_it_too_and_answers_a_hostile_owner_in_milliseconds(api: ApiClient) -> None:
    result = api.call("POST", "/validate", NOISY | {"name": "december", "team": "noisy"}).body
    assert result["valid"] is False and result["errors"][0]["code"] == "schedule_too_expensive"
    hostile = {"name": "x", "team": "noisy", "owner": "a@" + "." * 16_000 + "@", "target": {"type": "callback"}}
    started = time.perf_counter()
    answer = api.call("POST", "/validate", hostile).body
    assert answer["valid"] is False and answer["errors"][0]["field"] == "owner"
    assert time.perf_counter() - started < 0.5, "linear-time validation (the regex took 2.3 s)"


def test_high_priority_is_granted_by_the_platform_not_chosen_by_a_team(stack: Stack) -> None:
    from jobsched.api.identity import Membership
    from tests.aws.api_client import ACCOUNT, ADMIN

    api = ApiClient(stack)
    body = {"priority": "high", "target": {"type": "callback"}}
    refused = api.call("PUT", "/teams/eager/jobs/first", body, principal=team_role("eager"))
    assert refused.status == 422 and refused.body["error"]["field"] == "priority"
    assert refused.body["error"]["errors"][0]["code"] == "priority_not_granted"
    assert (
        api.call("PUT", "/teams/eager/jobs/first", body | {"priority": "low"}, principal=team_role("eager")).status
        == 201
    )

    api.services.membership = Membership.from_config(
        {
            "admins": [ADMIN],
            "team_patterns": [f"arn:aws:iam::{ACCOUNT}:role/team-{{team}}"],
            "priorities": {"payments": ["high", "normal", "low"]},
        }
    )
    assert api.call("PUT", "/teams/payments/jobs/ledger", body, principal=team_role("payments")).status == 201
    assert api.call("PUT", "/teams/eager/jobs/second", body, principal=team_role("eager")).status == 422


def minutely(team: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "team": team,
        "schedule": {"expression": "* * * * *"},
        "target": {"type": "lambda", "function": "echo"},
        **extra,
    }


@pytest.mark.in_memory_queues  # moto's SendMessage scans the whole queue: O(n^2) for a thousand messages
def test_a_thousand_run_backlog_delays_another_teams_run_by_one_run_not_a_thousand(stack: Stack, clock: Clock) -> None:
    """Team A's 20 jobs come back from 50 minutes without a tick and catch up 1,000 instants in one tick; team
    B's canary is due in the same tick. With two teams, B's fair share is every other run: its run is sent
    (and served, queues handing out in send order) after at most one of A's, where it would have been after
    all 1,000 in job order."""
    catch_up = {"schedule": {"expression": "* * * * *", "catchup": {"policy": "all", "window": "1h", "max_runs": 50}}}
    allow = {"concurrency": {"max_running": 100, "overlap": "allow"}}
    for index in range(20):
        stack.register(minutely("bulk", f"job{index:02d}", **catch_up, **allow))
    stack.register(minutely("canary", "probe"))  # catch-up "latest": its one overdue instant
    clock.advance(timedelta(minutes=50))
    report = stack.tick()
    assert report.job_errors == 0 and report.due_jobs == 21
    order = stack.in_queue_order()
    due_now = [m for m in order if isinstance(m, RunMessage) and m.fire_at <= instant_text(clock())]
    assert sum(m.team == "bulk" for m in due_now) == 1000
    position = next(i for i, m in enumerate(order) if m.team == "canary")
    assert position <= 1, f"the canary's run waits behind {position} of the backlog's runs"
    # Served in queue order, the canary's run starts after at most one of the backlog's.
    served = [stack.worker.process_any(message) for message in order[: position + 1]]
    assert served[-1].action == "succeeded" and served[-1].lateness is not None
    canary = order[position]
    assert isinstance(canary, RunMessage)
    assert served[-1].lateness == clock() - parse_instant(canary.fire_at), "no lateness beyond the outage's own"


@pytest.mark.in_memory_queues
def test_every_team_is_held_to_its_max_running_by_default(stack: Stack, clock: Clock) -> None:
    """No quota item written by hand: the platform default (20) holds a team's 21st run back, never drops
    it, and leaves another team's run alone."""
    limit = TeamLimits().max_running
    long_run = {"target": {"type": "callback", "timeout": "1h"}}
    for index in range(limit + 1):
        stack.register(minutely("greedy", f"hold{index:02d}", **long_run))
    stack.register(minutely("quiet", "canary"))
    stack.tick()
    clock.advance(timedelta(minutes=1))
    outcomes = stack.pump()
    waiting = [o for o in outcomes if o.action == "waiting"]
    # One run held back, looking again after 1 s, 1 s, 2 s... (each look a new delivery of the same run).
    assert waiting and all(f"team greedy max_running {limit} reached" in o.detail for o in waiting)
    assert len({o.resend.run_id for o in waiting if o.resend is not None}) == 1
    assert [o.wait.total_seconds() for o in waiting if o.wait is not None] == [1, 1, 2, 4, 8, 16, 30][: len(waiting)]
    running = [s for s in stack.jobs.slot_holders("TEAM#greedy", "QUOTA")]
    assert len(running) == limit
    [canary] = stack.run_list("quiet/canary")
    assert canary.status is RunStatus.SUCCEEDED
    assert len(stack.pending()) >= 1, "the held run is still queued, not dropped"


def test_max_jobs_and_api_rate_are_limits_a_platform_admin_can_raise(stack: Stack) -> None:
    api = ApiClient(stack)
    stack.jobs.set_team_limits("small", {"max_jobs": 2})
    for name in ("one", "two"):
        assert api.call("PUT", f"/teams/small/jobs/{name}", CALLBACK, principal=team_role("small")).status == 201
    refused = api.call("PUT", "/teams/small/jobs/three", CALLBACK, principal=team_role("small"))
    assert refused.status == 429 and refused.body["error"]["code"] == "quota_exceeded"
    assert refused.body["error"]["field"] == "max_jobs" and "its max_jobs" in refused.body["error"]["message"]
    assert stack.jobs.get("small/three") is None
    assert api.call("PUT", "/teams/small/jobs/two", CALLBACK, principal=team_role("small")).status == 200, (
        "changing an existing job is not creating one"
    )
    stack.jobs.set_team_limits("small", {"max_jobs": None})  # back to the platform default
    assert api.call("PUT", "/teams/small/jobs/three", CALLBACK, principal=team_role("small")).status == 201
    with pytest.raises(ValueError, match="unknown team limit"):
        stack.jobs.set_team_limits("small", {"max_jobz": 3})


CALLBACK = {"target": {"type": "callback"}}


def test_a_never_answering_http_target_leaves_another_teams_run_in_the_same_batch_on_time(
    deployed: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records of a batch run with their own deadlines: team A's run waits out its 3 s timeout while team
    B's, in the same batch of the same worker invocation, finishes at once."""
    from functions.worker.handler import handler

    monkeypatch.setenv(Env.STAGE, LOCAL_STAGE)  # test endpoints listen on loopback
    now = wiring.utc_now()
    deployed.clock.now = now
    with silent_server() as hung, recording_server() as answering:
        for team, url in (("hung", hung), ("fine", answering.url)):
            deployed.register(
                {
                    "name": "call",
                    "team": team,
                    "target": {"type": "http", "url": url, "timeout": "3s"},
                    "retry": {"max_attempts": 1},
                }
            )
            message = RunMessage.scheduled(job=f"{team}/call", team=team, at=now, fire_at=now, spec_version=1)
            deployed.sqs.send_message(QueueUrl=deployed.queue_urls["normal"], MessageBody=message.model_dump_json())
        received = deployed.sqs.receive_message(QueueUrl=deployed.queue_urls["normal"], MaxNumberOfMessages=10)
        started = time.monotonic()
        assert handler(sqs_event(deployed, received["Messages"]), FakeContext()) == {"batchItemFailures": []}
        elapsed = time.monotonic() - started
    [slow] = deployed.run_list("hung/call")
    [quick] = deployed.run_list("fine/call")
    assert slow.status is RunStatus.FAILED and "ReadTimeoutError" in (slow.error or "")
    assert quick.status is RunStatus.SUCCEEDED and len(answering.seen) == 1
    assert quick.finished_at and quick.started_at and slow.finished_at and slow.started_at
    # B finished before A's 3 s timeout could have run out (within about a second of A's start, more on a
    # loaded 2-core CI machine), A ran into its timeout.
    assert quick.finished_at - slow.started_at < timedelta(seconds=3), "B never waited on A's target"
    assert slow.finished_at - slow.started_at >= timedelta(seconds=2)
    assert 3 <= elapsed < 8, "the batch lasts about its slowest record's timeout"


def test_a_never_answering_webhook_leaves_another_teams_pages_on_time(
    deployed: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Incident handling never waits on a webhook; the pages handler delivers team B's page while team A's
    webhook times out (3 s), and A's page comes back later with backoff."""
    from functions.escalation.handler import handler as escalation_handler
    from functions.pages.handler import handler as pages_handler
    from jobsched.paging.escalation_events import EscalationEvent

    monkeypatch.setenv(Env.STAGE, LOCAL_STAGE)
    team_topic = deployed.topic("fine-oncall", team="fine")
    with silent_server() as hung:
        for team, escalation in (("hung", {"webhook": hung}), ("fine", {"sns_topic": team_topic})):
            deployed.register({"name": "job", "team": team, "target": {"type": "callback"}, "escalation": escalation})
            event = EscalationEvent(
                kind="run_failed",
                subject=f"{team}/job",
                occurred_at="2027-01-04T10:00:05Z",
                team=team,
                job=f"{team}/job",
                run_id="20270104T100000Z",
                error="boom",
            )
            deployed.sqs.send_message(QueueUrl=deployed.escalation_url, MessageBody=event.model_dump_json())
        events = deployed.sqs.receive_message(QueueUrl=deployed.escalation_url, MaxNumberOfMessages=10)["Messages"]
        batch = {"Records": [{**record_shape(raw), "eventSourceARN": "arn:aws:sqs:us-east-1:1:esc"} for raw in events]}
        assert escalation_handler(batch, FakeContext(function_name="jobsched-test-escalation")) == {
            "batchItemFailures": []
        }
        assert hung.connections == 0, "incidents are stored and pages queued without touching the webhook"

        pages = deployed.sqs.receive_message(
            QueueUrl=deployed.page_deliveries_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        )["Messages"]
        published: list[float] = []
        sender = wiring.default_page_sender()
        real_publish = sender.notifier.publish

        def timed_publish(*args: Any, **kwargs: Any) -> None:
            real_publish(*args, **kwargs)
            published.append(time.monotonic() - started_pages)

        monkeypatch.setattr(sender.notifier, "publish", timed_publish)
        started_pages = time.monotonic()
        result = pages_handler(
            {"Records": [record_shape(raw) for raw in pages]}, FakeContext(function_name="jobsched-test-pages")
        )
        elapsed = time.monotonic() - started_pages
        assert hung.connections == 1, "A's webhook was tried once"
    assert len(result["batchItemFailures"]) == 1, "A's page comes back for a later try"
    # Waiting on A's webhook would put B's publish at or after its 3 s timeout; the margins are wide because
    # a loaded 2-core CI machine stretches every step.
    assert published and published[0] < 3, "B's page went out without waiting on A's webhook"
    assert 3 <= elapsed < 8, "the batch lasts about one webhook timeout"
    [page] = deployed.pages()
    assert page["topic"] == team_topic


def record_shape(raw: dict[str, Any]) -> dict[str, Any]:
    """An SQS Lambda event record for a message received from moto."""
    return {
        "messageId": raw["MessageId"],
        "receiptHandle": raw["ReceiptHandle"],
        "body": raw["Body"],
        "attributes": {"ApproximateReceiveCount": raw.get("Attributes", {}).get("ApproximateReceiveCount", "1")},
        "messageAttributes": {},
        "md5OfBody": raw["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:jobsched-test",
        "awsRegion": "us-east-1",
    }
