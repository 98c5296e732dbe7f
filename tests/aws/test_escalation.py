"""Nothing fails silently: pages once per incident, with context; missed schedules; deadlines; escalation
chains; auto-pause; circuit breakers. moto SNS delivers pages to a queue the tests read."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.run_records import StaleAttempt
from jobsched.core.runs import RunStatus
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.worker import heartbeat_checker
from jobsched.watch.heartbeat import HeartbeatChecker
from tests.aws.harness import Clock, Stack

MINUTE = timedelta(minutes=1)


@pytest.fixture
def checker(stack: Stack) -> HeartbeatChecker:
    return heartbeat_checker(stack.runs, stack.worker)


def failing(event: dict[str, Any]) -> Any:
    raise RuntimeError("database down")


def every_minute(stack: Stack, name: str, function: str, **extra: Any) -> None:
    stack.register(
        {
            "name": name,
            "team": "ops",
            "schedule": {"expression": "* * * * *"},
            "target": {"type": "lambda", "function": function},
            "retry": {"max_attempts": 1},
            "runbook_url": "https://wiki.example.com/runbooks/ops",
            **extra,
        }
    )


def test_a_silent_callback_run_times_out_retries_fails_and_pages_once_with_context(
    stack: Stack, clock: Clock, checker: HeartbeatChecker
) -> None:
    clock.set("2027-01-04T09:59:30Z")
    stack.register(
        {
            "name": "external",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "callback", "timeout": "1h"},
            "heartbeat_timeout": "1m",
            "retry": {"max_attempts": 2, "backoff": {"initial": "10s", "max": "10s", "jitter": "none"}},
            "runbook_url": "https://wiki.example.com/runbooks/external",
        }
    )
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    clock.set("2027-01-04T10:02:30Z")
    assert checker.check(clock()).retried == 1  # no heartbeat: TIMED_OUT attempt 1, retried
    clock.advance(timedelta(seconds=15))
    stack.pump()
    clock.advance(timedelta(minutes=3))
    assert checker.check(clock()).timed_out == 1  # attempt 2 silent too: the run is TIMED_OUT
    with pytest.raises(StaleAttempt):
        stack.worker.ends.complete(AttemptRef("ops/external", "20270104T100000Z", 1), Reported(succeeded=True))

    stack.handle_escalations()
    [page] = stack.pages()
    assert page["topic"] == stack.default_topic  # the job names no channel: the deployment's topic
    assert page["subject"] == "[jobsched] ops/external: run timed out"
    text = page["message"]
    for expected in (
        "team: ops",
        "job: ops/external",
        "run: 20270104T100000Z",
        "scheduled for: 2027-01-04T10:00:00Z",
        "attempt: 2",
        "error: no heartbeat for 1m: the attempt is taken as failed",  # #46: in the words of what happened
        "runbook: https://wiki.example.com/runbooks/external",
        "run: https://api.example.com/prod/teams/ops/jobs/external/runs/20270104T100000Z",
        # The run's lines: run ids repeat across jobs (they are the instant), so the job is filtered too.
        "filter job = 'ops/external' and (run_id = '20270104T100000Z'",
        "logs_insights: https://us-east-1.console.aws.amazon.com/cloudwatch/home",
    ):
        assert expected in text, (expected, text)
    assert page["attributes"] == {"notice": "opened", "kind": "run_timed_out", "team": "ops", "role": "primary"}


def test_a_hundred_failures_make_one_page_and_a_success_one_resolve_notice(stack: Stack, clock: Clock) -> None:
    oncall = stack.topic("ops-oncall", team="ops")
    stack.lambdas.functions["flaky-db"] = failing
    stack.worker.breaker_failures = 1000  # this test is about incidents: keep the target's circuit closed
    every_minute(stack, "report", "flaky-db", escalation={"sns_topic": oncall})
    stack.minutes(100)
    runs = stack.run_list("ops/report")
    assert len(runs) == 100 and {run.status for run in runs} == {RunStatus.FAILED}
    handled = stack.handle_escalations()
    assert len(handled) == 100
    [page] = stack.pages()
    assert page["topic"] == oncall and page["attributes"]["notice"] == "opened"
    assert stack.jobs.open_incidents("ops/report") == {"failing"}

    stack.lambdas.functions["flaky-db"] = lambda event: {"ok": True}
    stack.minutes(3)
    stack.handle_escalations()
    [resolved] = stack.pages()
    assert resolved["subject"].startswith("[jobsched, resolved] ops/report")
    assert "100 event(s)" in resolved["message"]
    assert stack.jobs.open_incidents("ops/report") == set()
    stack.minutes(2)
    assert stack.escalations() == [], "a healthy job sends no events"


def test_a_redelivered_event_pages_nothing_more(stack: Stack, clock: Clock) -> None:
    stack.lambdas.functions["down"] = failing
    every_minute(stack, "once", "down")
    stack.minutes(1)
    [event] = stack.escalations()
    from jobsched.paging.escalation_events import EscalationEvent

    for _ in range(3):  # SQS delivers the same event three times
        stack.escalator.handle(EscalationEvent.model_validate(event))
    assert len(stack.pages()) == 1
    [incident] = stack.jobs.incidents("ops/once")
    assert incident.values["failures"] == 1


def test_the_chain_reaches_the_secondary_contact_and_auto_pause_stops_the_job(stack: Stack, clock: Clock) -> None:
    primary, secondary = stack.topic("ops-primary", team="ops"), stack.topic("ops-secondary", team="ops")
    stack.lambdas.functions["down"] = failing
    stack.worker.breaker_failures = 1000
    escalation = {
        "sns_topic": primary,
        "after_failures": 2,
        "secondary": {"sns_topic": secondary, "after": 2},
        "auto_pause_after": 6,
    }
    every_minute(stack, "chain", "down", escalation=escalation)
    stack.minutes(1)
    stack.handle_escalations()
    assert stack.pages() == [], "after_failures 2: one failure pages nobody"
    stack.minutes(1)
    stack.handle_escalations()
    assert [(p["topic"], p["attributes"]["notice"]) for p in stack.pages()] == [(primary, "opened")]
    stack.minutes(2)
    stack.handle_escalations()
    [escalated] = stack.pages()
    assert (escalated["topic"], escalated["attributes"]["role"]) == (secondary, "secondary")
    assert escalated["subject"] == "[jobsched, escalated] ops/chain: run failed (4 in a row)"

    stack.minutes(2)
    handled = stack.handle_escalations()
    assert [h.paused for h in handled] == [False, True]
    [paused] = stack.pages()
    assert paused["topic"] == primary and paused["attributes"]["notice"] == "paused"
    from tests.aws.api_client import ApiClient

    view = ApiClient(stack).call("GET", "/teams/ops/jobs/chain").body
    assert view["state"] == "PAUSED" and view["paused_reason"].startswith("auto-paused after 6")
    [incident] = view["open_incidents"]
    assert incident["incident_class"] == "failing" and incident["events"] == 6 and incident["auto_paused"]
    assert incident["paged"] == ["primary", "secondary"] and "database down" in incident["last_error"]
    stored = stack.jobs.get("ops/chain")
    assert stored is not None and stored.state == "PAUSED"
    assert stored.paused_reason is not None and stored.paused_reason.startswith("auto-paused after 6 consecutive")
    assert stored.paused_by == "jobsched:escalation"
    calls = len(stack.lambdas.calls)
    stack.minutes(3)
    assert len(stack.lambdas.calls) == calls, "a paused job does not run"
    later = stack.run_list("ops/chain")[6:]  # instants sent before the pause are recorded with its reason
    assert later and all(r.status is RunStatus.SKIPPED and "auto-paused" in (r.reason or "") for r in later)


def test_webhooks_get_the_page_as_json_and_a_failed_delivery_is_sent_later(stack: Stack, clock: Clock) -> None:
    stack.lambdas.functions["down"] = failing
    every_minute(stack, "hooked", "down", escalation={"webhook": "https://hooks.example.com/oncall"})
    stack.webhooks.fail = True
    stack.minutes(1)
    stack.handle_escalations()  # the incident is stored and its page queued whatever the webhook does
    assert stack.webhooks.posts == [] and "HTTP 503" in stack.page_failures[0]
    [incident] = stack.jobs.incidents("ops/hooked")
    assert not incident.unsent, "the page left the outbox for the pages queue"

    stack.webhooks.fail = False
    clock.advance(timedelta(seconds=30))
    assert stack.deliver_pages() == ["sent"]  # the pages handler's next try, after its backoff
    [(url, document)] = stack.webhooks.posts
    assert url == "https://hooks.example.com/oncall"
    assert document["notice"] == "opened" and document["event"]["job"] == "ops/hooked"
    assert document["links"]["runbook"] == "https://wiki.example.com/runbooks/ops"
    assert document["incident"]["failures"] == 1  # as it was when the page was decided
    assert stack.deliver_pages() == [], "delivered once"


def test_a_webhook_that_keeps_failing_hands_its_page_to_the_deployment_topic(stack: Stack, clock: Clock) -> None:
    from jobsched.paging.delivery import FALLBACK_AFTER

    stack.lambdas.functions["down"] = failing
    every_minute(stack, "hooked", "down", escalation={"webhook": "https://hooks.example.com/oncall"})
    stack.webhooks.fail = True
    stack.minutes(1)
    stack.handle_escalations()
    for _ in range(FALLBACK_AFTER - 2):
        clock.advance(timedelta(seconds=30))
        assert stack.deliver_pages() == []
    clock.advance(timedelta(seconds=30))
    assert stack.deliver_pages() == ["fallback"]
    [page] = stack.pages()
    assert page["topic"] == stack.default_topic and page["attributes"]["notice"] == "opened"
    assert f"webhook failed {FALLBACK_AFTER} times" in page["message"] and "HTTP 503" in page["message"]
    assert len(stack.page_failures) == FALLBACK_AFTER - 1


def test_pages_wait_in_the_outbox_while_the_pages_queue_refuses_them(stack: Stack, clock: Clock) -> None:
    stack.lambdas.functions["down"] = failing
    every_minute(stack, "queued", "down")
    stack.minutes(1)
    [event] = stack.escalations()
    from jobsched.paging.escalation_events import EscalationEvent

    real = stack.page_queue.send
    stack.page_queue.send = lambda bodies: (_ for _ in ()).throw(RuntimeError("SQS unavailable"))  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="SQS unavailable"):
        stack.escalator.handle(EscalationEvent.model_validate(event))
    assert stack.jobs.incidents("ops/queued")[0].unsent, "kept for the redelivery"
    stack.page_queue.send = real  # type: ignore[method-assign]
    stack.escalator.handle(EscalationEvent.model_validate(event))  # SQS redelivers the event
    assert len(stack.pages()) == 1 and not stack.jobs.incidents("ops/queued")[0].unsent


def test_a_dispatcher_outage_is_paged_caught_up_within_the_window_and_missed_beyond_it(
    stack: Stack, clock: Clock, checker: HeartbeatChecker
) -> None:
    every_minute(
        stack,
        "ticker",
        "echo",
        schedule={"expression": "* * * * *", "catchup": {"policy": "all", "window": "10m", "max_runs": 10}},
    )
    stack.minutes(15)  # 08:59..09:14: the dispatcher sends up to 14 minutes ahead
    assert {run.status for run in stack.run_list("ops/ticker")} == {RunStatus.SUCCEEDED}
    last_run = stack.run_list("ops/ticker")[-1].run_id

    # The dispatcher stops. The worker runs what was already sent; then nothing new is sent.
    for _ in range(35):
        clock.advance(MINUTE)
        stack.pump()
        checker.check(clock())
    stack.handle_escalations()
    [stalled] = stack.pages()
    assert stalled["subject"] == "[jobsched] SYSTEM: dispatcher stalled"
    assert "1 job(s) overdue" in stalled["message"]
    outage_started = stack.run_list("ops/ticker")[-1].run_id
    assert outage_started > last_run

    stack.tick()  # back, 20+ minutes after the last instant it sent
    stack.pump()
    clock.advance(MINUTE)
    stack.pump()
    runs = {run.run_id: run for run in stack.run_list("ops/ticker")}
    late = [run for run in runs.values() if run.run_id > outage_started]
    missed = [run for run in late if run.status is RunStatus.MISSED]
    caught_up = [run for run in late if run.status is RunStatus.SUCCEEDED]
    assert missed and caught_up
    assert all("window" in (run.reason or "") for run in missed)
    assert max(run.scheduled_at for run in missed) < min(run.scheduled_at for run in caught_up)
    assert len(caught_up) >= 10, "the 10 minutes inside the window ran, late"

    checker.check(clock())
    stack.handle_escalations()
    pages = stack.pages()
    kinds = sorted(page["attributes"]["kind"] for page in pages)
    assert kinds == ["dispatcher_recovered", "missed_schedule"]
    [missed_page] = [page for page in pages if page["attributes"]["kind"] == "missed_schedule"]
    assert f"instants missed: {len(missed)}" in missed_page["message"]
    assert stack.jobs.get_incident("SYSTEM", "dispatcher") is None


def test_a_slow_success_misses_its_deadline_once(stack: Stack, clock: Clock, checker: HeartbeatChecker) -> None:
    def slow(event: dict[str, Any]) -> Any:
        clock.advance(timedelta(minutes=3))  # the target takes three minutes
        return {"ok": True}

    stack.lambdas.functions["slow"] = slow
    every_minute(stack, "sla", "slow", schedule={"expression": "0 * * * *"}, deadline="2m")
    stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    stack.pump()
    run = stack.runs.get("ops/sla", "20270104T090000Z")
    assert run is not None and run.status is RunStatus.SUCCEEDED
    checker.check(clock())  # the worker already reported it: the checker adds nothing
    stack.handle_escalations()
    [page] = stack.pages()
    assert page["attributes"]["kind"] == "deadline_missed"
    assert "not SUCCEEDED within its deadline of 0:02:00" in page["message"]
    assert "lateness (s): 60.0" in page["message"]


def test_a_run_still_running_at_its_deadline_is_paged_by_the_checker_once(
    stack: Stack, clock: Clock, checker: HeartbeatChecker
) -> None:
    stack.register(
        {
            "name": "batch",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "callback", "timeout": "2h"},
            "deadline": "30m",
        }
    )
    stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    stack.pump()
    clock.set("2027-01-04T09:29:00Z")
    assert checker.check(clock()).deadline_misses == 0
    clock.set("2027-01-04T09:31:00Z")
    assert checker.check(clock()).deadline_misses == 1
    assert checker.check(clock() + MINUTE).deadline_misses == 0, "reported once"
    stack.worker.ends.complete(AttemptRef("ops/batch", "20270104T090000Z", 1), Reported(succeeded=True))  # late success
    stack.handle_escalations()
    [page] = stack.pages()
    assert page["attributes"]["kind"] == "deadline_missed" and "status RUNNING" in page["message"]
    assert stack.jobs.open_incidents("ops/batch") == {"late"}, "a late success does not resolve lateness"


def test_an_acknowledged_incident_names_who_is_on_it_and_wakes_no_secondary(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#46: incidents could not be acknowledged. Whoever acknowledges is named on the incident and in the job's
    history; the secondary contact is not paged however many failures follow; the first success still resolves."""
    from tests.aws.api_client import ApiClient, cli_as, team_role

    primary, secondary = stack.topic("ops-primary", team="ops"), stack.topic("ops-secondary", team="ops")
    stack.lambdas.functions["down"] = failing
    stack.worker.breaker_failures = 1000
    every_minute(
        stack, "acked", "down", escalation={"sns_topic": primary, "secondary": {"sns_topic": secondary, "after": 2}}
    )
    api = ApiClient(stack)
    path = "/teams/ops/jobs/acked/incidents/failing/acknowledge"
    assert api.call("POST", path, {"comment": "x"}, principal=team_role("ops")).status == 404  # nothing open yet
    stack.minutes(1)
    stack.handle_escalations()
    assert [p["topic"] for p in stack.pages()] == [primary]
    code, output = cli_as(api, team_role("ops"), monkeypatch)("ack", "ops/acked", "--comment", "restarting the db")
    assert code == 0 and f"ops/acked failing: acknowledged by {team_role('ops')} at " in output, output
    assert api.call("POST", path, principal=team_role("billing")).status == 403
    stack.minutes(4)
    stack.handle_escalations()
    assert [p["topic"] for p in stack.pages()] == [], "acknowledged: the secondary is not woken"
    [incident] = api.call("GET", "/teams/ops/jobs/acked").body["open_incidents"]
    assert incident["acknowledged_by"] == team_role("ops") and incident["events"] == 5
    assert incident["paged"] == ["primary"]
    history = api.call("GET", "/teams/ops/jobs/acked/history").body["entries"]
    [entry] = [e for e in history if e["action"] == "acknowledge"]
    assert entry["details"] == {"incident_class": "failing", "comment": "restarting the db"}
    stack.lambdas.functions["down"] = lambda event: {"ok": True}
    stack.minutes(1)
    stack.handle_escalations()
    assert [p["attributes"]["notice"] for p in stack.pages()] == ["resolved"]


def test_deleting_a_job_drops_its_open_incident(stack: Stack, clock: Clock) -> None:
    from jobsched.registry.jobs import delete_job

    stack.lambdas.functions["down"] = failing
    every_minute(stack, "gone", "down")
    stack.minutes(1)
    stack.handle_escalations()
    assert len(stack.jobs.incidents("ops/gone")) == 1
    stored = stack.jobs.get("ops/gone")
    assert stored is not None
    delete_job(stack.jobs, stored, now=clock(), principal="test", dags=stack.dags)
    assert stack.jobs.incidents("ops/gone") == []
    stack.pages()
    every_minute(stack, "gone", "down")  # registered again and failing again: a new incident pages again
    stack.minutes(1)
    stack.handle_escalations()
    assert [page["attributes"]["notice"] for page in stack.pages()] == ["opened"]


def test_a_signed_webhook_can_be_verified_and_a_slack_webhook_gets_text(stack: Stack, clock: Clock) -> None:
    import time

    import boto3

    from jobsched.paging.signing import SIGNATURE_HEADER, verify

    boto3.client("secretsmanager", region_name="us-east-1").create_secret(
        Name="ops-hook-key", SecretString="s3cret-signing-key", Tags=[{"Key": "jobsched-team", "Value": "ops"}]
    )
    stack.lambdas.functions["down"] = failing
    hook = "https://hooks.example.com/oncall"
    every_minute(stack, "signed", "down", escalation={"webhook": hook, "webhook_secret": "secretsmanager:ops-hook-key"})
    every_minute(stack, "chatty", "down", escalation={"webhook": hook, "webhook_format": "slack"})
    stack.minutes(1)
    stack.handle_escalations()
    by_job = {}
    for (_, document), (headers, body) in zip(stack.webhooks.posts, stack.webhooks.sent, strict=True):
        by_job["chatty" if "text" in document else "signed"] = (document, headers, body)
    document, headers, body = by_job["signed"]
    assert verify("s3cret-signing-key", headers, body, now=time.time())
    assert not verify("another-key", headers, body, now=time.time())
    assert not verify("s3cret-signing-key", headers, body, now=time.time() + 3600), "a replay an hour later"
    assert not verify("s3cret-signing-key", headers, body + b" ", now=time.time()), "a changed body"
    assert document["event"]["job"] == "ops/signed"
    slack, slack_headers, _ = by_job["chatty"]
    assert set(slack) == {"text"} and "ops/chatty" in slack["text"] and SIGNATURE_HEADER not in slack_headers


def test_another_teams_signing_secret_is_refused_and_the_page_still_goes_out(stack: Stack, clock: Clock) -> None:
    import boto3

    boto3.client("secretsmanager", region_name="us-east-1").create_secret(
        Name="billing-hook-key", SecretString="theirs", Tags=[{"Key": "jobsched-team", "Value": "billing"}]
    )
    stack.lambdas.functions["down"] = failing
    escalation = {"webhook": "https://hooks.example.com/oncall", "webhook_secret": "secretsmanager:billing-hook-key"}
    every_minute(stack, "borrowing", "down", escalation=escalation)  # stored past PUT's check
    stack.minutes(1)
    stack.handle_escalations()
    assert stack.webhooks.posts == [], "nothing signed with (or sent beside) another team's secret"
    [page] = stack.pages()
    assert page["topic"] == stack.default_topic and "billing-hook-key" in page["message"]


def test_tiers_route_failures_critical_pages_at_once_and_best_effort_opens_a_ticket_and_pages_nobody(
    stack: Stack, clock: Clock
) -> None:
    primary = stack.topic("ops-tiers", team="ops")
    stack.lambdas.functions["down"] = failing
    stack.worker.breaker_failures = 1000
    escalation = {"sns_topic": primary, "after_failures": 3}
    every_minute(stack, "vital", "down", tier="critical", escalation=escalation)
    every_minute(stack, "nice", "down", tier="best-effort", escalation=escalation)
    stack.minutes(1)
    stack.handle_escalations()
    # Critical: paged at its first failure, whatever after_failures says; best-effort: nobody.
    pages = stack.pages()
    assert [(p["topic"], p["attributes"]["notice"]) for p in pages] == [(primary, "opened")]
    assert "ops/vital" in pages[0]["subject"] and "severity: critical" in pages[0]["message"]
    stack.minutes(5)
    stack.handle_escalations()
    assert stack.pages() == [], "a best-effort job never pages, however often it fails"
    from tests.aws.api_client import ApiClient

    view = ApiClient(stack).call("GET", "/teams/ops/jobs/nice").body
    [ticket] = view["open_incidents"]
    assert ticket["severity"] == "ticket" and ticket["paged"] == [] and ticket["events"] >= 6
    [critical] = ApiClient(stack).call("GET", "/teams/ops/jobs/vital").body["open_incidents"]
    assert critical["severity"] is None and critical["paged"] == ["primary"]


def test_a_snoozed_incident_pages_nobody_until_its_end_and_one_resolved_by_hand_tells_who_was_paged(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from jobsched.cli import app as cli_app
    from jobsched.cli import cli
    from jobsched.cli import remote as cli_remote
    from tests.aws.api_client import ApiClient, InProcess, team_role

    primary = stack.topic("ops-snooze", team="ops")
    stack.lambdas.functions["down"] = failing
    stack.worker.breaker_failures = 1000
    escalation = {"sns_topic": primary, "after_failures": 2}
    every_minute(stack, "flaky", "down", escalation=escalation)
    stack.minutes(1)
    stack.handle_escalations()
    assert stack.pages() == []  # one failure of two
    api = ApiClient(stack)
    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))
    monkeypatch.setattr(cli_app, "clock", clock)  # "10m" from the stack's now
    snoozed = CliRunner().invoke(cli, ["snooze", "ops/flaky", "--until", "10m", "--reason", "db maintenance"])
    assert snoozed.exit_code == 0, snoozed.output
    assert "snoozed until 2027-01-04T" in snoozed.output
    stack.minutes(5)
    stack.handle_escalations()
    assert stack.pages() == [], "snoozed: failures counted, nobody paged"
    stack.minutes(6)  # past its end: the next failure pages
    stack.handle_escalations()
    [opened] = stack.pages()
    assert opened["attributes"]["notice"] == "opened"
    resolved = CliRunner().invoke(cli, ["resolve", "ops/flaky", "--reason", "fixed the database"])
    assert resolved.exit_code == 0, resolved.output
    stack.handle_escalations()
    [notice] = stack.pages()
    assert (
        notice["attributes"]["notice"] == "resolved" and "fixed the database" in notice["subject"] + notice["message"]
    )
    assert stack.jobs.open_incidents("ops/flaky") == set()
    history = api.call("GET", "/teams/ops/jobs/flaky/history", principal=team_role("ops")).body
    actions = [entry["action"] for entry in history["entries"]]
    assert "snooze" in actions and "resolve" in actions
    gone = api.call(
        "POST", "/teams/ops/jobs/flaky/incidents/failing/resolve", {"reason": "again"}, principal=team_role("ops")
    )
    assert gone.status == 404 and gone.body["error"]["code"] == "no_open_incident"
    too_far = api.call(
        "POST",
        "/teams/ops/jobs/flaky/incidents/failing/snooze",
        {"until": "2027-02-04T00:00:00Z", "reason": "x"},
        principal=team_role("ops"),
    )
    assert too_far.status in (404, 422)


def test_a_run_that_never_ends_is_paged_at_its_deadline_while_it_runs(
    stack: Stack, clock: Clock, checker: HeartbeatChecker
) -> None:
    """#48: the page comes at the deadline, not after the run ends (this one never does)."""
    stack.register(
        {
            "name": "stuck",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "callback", "timeout": "12h"},
            "deadline": "20m",
        }
    )
    stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    stack.pump()
    clock.set("2027-01-04T09:21:00Z")
    assert checker.check(clock()).deadline_misses == 1
    stack.handle_escalations()
    [page] = stack.pages()
    assert page["attributes"]["kind"] == "deadline_missed" and "status RUNNING" in page["message"]
    run = stack.runs.get("ops/stuck", "20270104T090000Z")
    assert run is not None and run.status is RunStatus.RUNNING  # still running: paged while it runs
    for minutes in (30, 60, 120):
        clock.set(f"2027-01-04T{9 + minutes // 60:02d}:{minutes % 60:02d}:00Z")
        assert checker.check(clock()).deadline_misses == 0, "paged once, however long it runs"
