"""Runs started by events through EventBridge (moto, delivering as AWS does: infra/local/moto_patches.py).

The trigger's rule matches (EventBridge's own matching), its input transformer wraps the event in the
envelope, the intake queue holds it, and the intake makes it one run. The hard cases: redelivery, two
identical objects in one second, another team's bucket, a pattern EventBridge would refuse.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from functions.events import handler as events_handler
from jobsched.adapters.aws.run_events import DETAIL_TYPE, SOURCE
from jobsched.core.events import job_rule_prefix
from jobsched.core.runs import RunStatus
from jobsched.tenancy.ownership import TeamGrants
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import REGION, FakeContext, Stack

ORDERS = {"source": ["com.acme.orders"], "detail-type": ["OrderBatchReady"]}


def job(triggers: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"target": {"type": "lambda", "function": "echo"}, "triggers": triggers, **extra}


def put_event(
    stack: Stack, detail: dict[str, Any], *, source: str = "com.acme.orders", detail_type: str = "OrderBatchReady"
) -> None:
    entry = {"Source": source, "DetailType": detail_type, "Detail": json.dumps(detail), "Time": stack.clock()}
    response = boto3.client("events", region_name=REGION).put_events(Entries=[entry])
    assert response["FailedEntryCount"] == 0


def landing_bucket(stack: Stack, team: str, name: str = "acme-landing") -> Any:
    """A team's bucket sending its events to EventBridge; the clock at real time (S3 stamps events with it)."""
    stack.clock.now = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=name)
    s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": "jobsched-team", "Value": team}]})
    s3.put_bucket_notification_configuration(Bucket=name, NotificationConfiguration={"EventBridgeConfiguration": {}})
    return s3


def test_a_put_event_reaches_the_matching_job_once_however_often_it_is_delivered(stack: Stack) -> None:
    api = ApiClient(stack)
    created = api.call("PUT", "/teams/data/jobs/load-orders", job([{"event": {"pattern": ORDERS}}]))
    assert created.status == 201, created.body
    put_event(stack, {"batch": 7})
    put_event(stack, {"batch": 8}, detail_type="SomethingElse")  # EventBridge does not match it: never delivered
    received = stack.deliver_events(deliveries=3)
    assert [r.action for r in received] == ["started", "resent", "resent"]
    (run,) = stack.run_list("data/load-orders")
    assert run.trigger == "event" and run.trigger_detail is not None
    assert run.trigger_detail["source"] == "com.acme.orders" and run.trigger_detail["event_id"]
    outcomes = stack.pump()
    assert [o.action for o in outcomes].count("succeeded") == 1
    ((_, event),) = [(name, event) for name, event in stack.lambdas.calls if name == "echo"]
    assert event["payload"]["event"]["detail"] == {"batch": 7}
    assert event["payload"]["trigger"]["kind"] == "event" and event["jobsched"]["trigger"] == "event"
    (run,) = stack.run_list("data/load-orders")
    assert run.status is RunStatus.SUCCEEDED


def test_an_event_too_large_for_the_payload_reaches_the_target_by_reference(stack: Stack) -> None:
    api = ApiClient(stack)
    assert api.call("PUT", "/teams/data/jobs/load-orders", job([{"event": {"pattern": ORDERS}}])).status == 201
    rows = [{"order": i, "sku": f"SKU-{i:06d}", "note": "x" * 40} for i in range(800)]  # about 60 KB
    put_event(stack, {"rows": rows})
    (received,) = stack.deliver_events()
    assert received.action == "started"
    stack.pump()
    ((_, event),) = [(name, event) for name, event in stack.lambdas.calls if name == "echo"]
    payload = event["payload"]
    assert "jobsched_omitted" in payload["event"]["detail"] and payload["trigger"]["source"] == "com.acme.orders"
    path = payload["events_ref"]
    assert path == f"/teams/data/jobs/load-orders/runs/{received.run_id}/events"
    whole = api.call("GET", path)
    assert whole.status == 200 and whole.body["events"][0]["detail"] == {"rows": rows}
    # Only the team reads it; a run not started by an event has no events.
    assert api.call("GET", path, principal=team_role("payments")).status == 403
    assert api.call("PUT", "/teams/data/jobs/nightly", {"target": {"type": "callback"}}).status == 201
    started = api.call("POST", "/teams/data/jobs/nightly/trigger", {})
    assert started.status in (200, 201, 202), started.body
    none = api.call("GET", f"/teams/data/jobs/nightly/runs/{started.body['run_id']}/events")
    assert none.status == 404 and none.body["error"]["code"] == "no_events"


def test_two_identical_objects_written_in_the_same_second_start_two_runs(stack: Stack) -> None:
    s3 = landing_bucket(stack, "data")
    api = ApiClient(stack)
    body = job([{"s3": {"bucket": "acme-landing", "prefix": "exports/", "suffix": ".csv"}}])
    assert api.call("PUT", "/teams/data/jobs/load-exports", body).status == 201
    for key in ("exports/a.csv", "exports/a.csv", "exports/a.json", "other/a.csv"):
        s3.put_object(Bucket="acme-landing", Key=key, Body=b"id,total\n1,10\n")
    received = stack.deliver_events(deliveries=2)
    assert sorted(r.action for r in received) == ["resent", "resent", "started", "started"]
    runs = stack.run_list("data/load-exports")
    assert len(runs) == 2
    assert {run.trigger_detail["key"] for run in runs if run.trigger_detail} == {"exports/a.csv"}
    assert all(run.trigger_detail and run.trigger_detail["etag"] and run.trigger_detail["size"] for run in runs)


def test_a_batched_trigger_hands_one_run_the_list_of_its_windows_objects(stack: Stack) -> None:
    s3 = landing_bucket(stack, "data")
    api = ApiClient(stack)
    trigger = {"s3": {"bucket": "acme-landing", "prefix": "exports/"}, "batch": {"window": "1m", "max_events": 50}}
    assert api.call("PUT", "/teams/data/jobs/load-exports", job([trigger])).status == 201
    for key in ("exports/a.csv", "exports/b.csv", "exports/c.csv"):
        s3.put_object(Bucket="acme-landing", Key=key, Body=b"id,total\n1,10\n")
    received = stack.deliver_events(deliveries=2)
    assert sorted(r.action for r in received) == ["batched"] * 3 + ["duplicate"] * 3
    (run,) = stack.run_list("data/load-exports")
    assert run.status is RunStatus.SCHEDULED and run.trigger_detail is not None
    stack.pump()
    assert not [name for name, _ in stack.lambdas.calls if name == "echo"]  # the window is still open
    stack.clock.now += timedelta(minutes=1, seconds=1)
    outcomes = stack.pump(deliveries=2)
    assert [o.action for o in outcomes].count("succeeded") == 1
    ((_, event),) = [(name, event) for name, event in stack.lambdas.calls if name == "echo"]
    payload = event["payload"]
    assert payload["trigger"]["count"] == 3 and payload["trigger"]["batch"]["number"] == 1
    assert sorted(e["key"] for e in payload["events"]) == ["exports/a.csv", "exports/b.csv", "exports/c.csv"]
    shown = api.call("GET", f"/teams/data/jobs/load-exports/runs/{run.run_id}")
    assert shown.status == 200 and shown.body["trigger_detail"]["batch"]["number"] == 1, shown.body
    listed = api.call("GET", f"/teams/data/jobs/load-exports/runs/{run.run_id}/events")
    assert listed.status == 200 and sorted(e["key"] for e in listed.body["events"]) == [
        "exports/a.csv",
        "exports/b.csv",
        "exports/c.csv",
    ]
    # The next object opens the next batch: the first one's list is closed.
    s3.put_object(Bucket="acme-landing", Key="exports/d.csv", Body=b"x")
    (late,) = stack.deliver_events()
    assert late.action == "batched" and late.run_id != run.run_id


def test_another_teams_bucket_is_refused_at_put_and_again_when_its_events_arrive(stack: Stack) -> None:
    s3 = landing_bucket(stack, "payments", "payments-landing")
    api = ApiClient(stack)
    refused = api.call(
        "PUT", "/teams/data/jobs/steal", job([{"s3": {"bucket": "payments-landing"}}]), principal=team_role("data")
    )
    assert refused.status == 422
    assert refused.body["error"]["errors"][0]["field"] == "triggers[0].s3.bucket"
    assert refused.body["error"]["errors"][0]["code"] == "resource_not_owned"
    assert stack.events.list_rules(NamePrefix=job_rule_prefix("test", "data/steal"))["Rules"] == []
    # A bucket that is the team's when the job is stored and changes hands later: its events are refused.
    landing_bucket(stack, "data", "data-landing")
    assert api.call("PUT", "/teams/data/jobs/load", job([{"s3": {"bucket": "data-landing"}}])).status == 201
    s3.put_bucket_tagging(Bucket="data-landing", Tagging={"TagSet": [{"Key": "jobsched-team", "Value": "payments"}]})
    s3.put_object(Bucket="data-landing", Key="x.csv", Body=b"x")
    (received,) = stack.deliver_events()
    assert (received.action, received.reason) == ("dropped", "not_owned")
    assert stack.run_list("data/load") == []


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ({"source": "com.acme"}, "triggers[0].event.pattern.source"),
        (
            {"source": ["com.acme"], "detail": {"n": [{"numeric": ["<", 1, ">", 5]}]}},
            "triggers[0].event.pattern.detail.n[0].numeric",
        ),
        ({"detail-type": ["X"]}, "triggers[0].event.pattern.source"),
        ({"source": ["aws.s3"]}, "triggers[0].event.pattern.source[0]"),
    ],
)
def test_a_pattern_eventbridge_or_the_shared_bus_would_refuse_is_a_422_on_its_field(
    stack: Stack, pattern: dict[str, Any], path: str
) -> None:
    response = ApiClient(stack).call("PUT", "/teams/data/jobs/bad", job([{"event": {"pattern": pattern}}]))
    assert response.status == 422, response.body
    assert path in [error["field"] for error in response.body["error"]["errors"]]
    assert stack.jobs.get("data/bad") is None


def test_on_the_shared_bus_a_team_listens_only_to_its_own_sources(stack: Stack) -> None:
    """Sources on the default bus are not authenticated, and any team could listen to another's events: a source
    is the team's when it is TEAM.* or the platform grants it (membership "event_sources"), never another's."""
    api = ApiClient(stack)
    stack.team_grants = TeamGrants.from_config(
        {"event_sources": {"data": ["com.acme.orders"], "payments": ["com.payments.billing"]}}
    )
    for source in ("payments.billing", "com.payments.billing", "data-eng.orders", "com.acme.billing"):
        pattern = {"$or": [{"source": ["data.ok"]}, {"source": ["data.also", source]}]}
        refused = api.call("PUT", "/teams/data/jobs/load", job([{"event": {"pattern": pattern}}]))
        assert refused.status == 422, (source, refused.body)
        [why] = refused.body["error"]["errors"]
        assert why["code"] == "source_not_owned" and why["field"] == "triggers[0].event.pattern.$or[1].source[1]"
    for source in ("data.billing", "com.acme.orders"):
        exact = {"source": [source], "detail-type": ["OrderBatchReady"]}
        stored = api.call("PUT", "/teams/data/jobs/load", job([{"event": {"pattern": exact}}]))
        assert stored.status in (200, 201), stored.body
    # A grant taken back: the stored trigger's events are dropped on arrival, named.
    stack.team_grants = TeamGrants()
    put_event(stack, {"batch": 7})
    [received] = stack.deliver_events()
    assert received.action == "dropped" and received.reason == "not_owned" and "com.acme.orders" in received.detail


def test_changing_or_deleting_a_job_removes_its_rules(stack: Stack) -> None:
    api = ApiClient(stack)
    assert api.call("PUT", "/teams/data/jobs/load", job([{"event": {"pattern": ORDERS}}])).status == 201
    prefix = job_rule_prefix("test", "data/load")
    (first,) = stack.events.list_rules(NamePrefix=prefix)["Rules"]
    changed = job([{"event": {"pattern": {"source": ["com.acme.billing"]}}}])
    assert api.call("PUT", "/teams/data/jobs/load", changed).status == 200
    (second,) = stack.events.list_rules(NamePrefix=prefix)["Rules"]
    assert second["Name"] != first["Name"] and json.loads(second["EventPattern"]) == {"source": ["com.acme.billing"]}
    tags = stack.events.list_tags_for_resource(ResourceARN=second["Arn"])["Tags"]
    assert {"Key": "jobsched-team", "Value": "data"} in tags
    assert api.call("DELETE", "/teams/data/jobs/load").status == 204
    assert stack.events.list_rules(NamePrefix=prefix)["Rules"] == []


def test_the_events_handler_makes_runs_and_counts_what_it_dropped(
    deployed: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    api = ApiClient(deployed)
    assert api.call("PUT", "/teams/data/jobs/load", job([{"event": {"pattern": ORDERS}}])).status == 201
    put_event(deployed, {"batch": 1})
    messages = deployed.intake_messages()
    records = [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": {},
            "messageAttributes": {},
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": deployed.intake_arn,
            "awsRegion": REGION,
        }
        for m in messages
    ]
    records.append(dict(records[0], messageId="malformed", body="{not json"))
    capsys.readouterr()
    response = events_handler.handler({"Records": [*records, dict(records[0], messageId="again")]}, FakeContext())
    assert response == {"batchItemFailures": []}
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    counted = [(m["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"], m.get("reason")) for m in metrics]
    assert counted.count(("EventsReceived", None)) == 3
    assert ("EventsDropped", "malformed") in counted
    assert counted.count(("EventsDeduplicated", None)) == 1
    assert len(deployed.run_list("data/load")) == 1


def test_every_finished_run_puts_run_finished_on_the_bus(deployed: Stack) -> None:
    events = boto3.client("events", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="run-finished")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="listen", EventPattern=json.dumps({"source": [SOURCE], "detail-type": [DETAIL_TYPE]}))
    events.put_targets(Rule="listen", Targets=[{"Id": "q", "Arn": arn}])
    from jobsched.core.settings import Settings
    from jobsched.wiring import metered_runs

    deployed.runs = deployed.worker.runs = metered_runs(Settings.from_env())  # as deployed: publishing
    deployed.register(
        {
            "name": "nightly",
            "team": "data",
            "schedule": {"expression": "* * * * *"},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    deployed.minutes(2)
    bodies = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    detail = bodies[0]["detail"]
    assert detail["team"] == "data" and detail["job"] == "nightly" and detail["status"] == "SUCCEEDED"
    assert {"run_id", "logical_instant", "attempt", "duration_seconds", "trigger", "output_ref"} <= set(detail)


def test_a_job_after_another_runs_once_its_upstream_has_finished(deployed: Stack) -> None:
    from jobsched.core.settings import Settings
    from jobsched.wiring import metered_runs

    deployed.runs = deployed.worker.runs = metered_runs(Settings.from_env())  # as deployed: publishing
    deployed.intake.runs = deployed.runs
    api = ApiClient(deployed)
    extract = {"schedule": {"expression": "* * * * *"}, "target": {"type": "lambda", "function": "echo"}}
    assert api.call("PUT", "/teams/data/jobs/extract", extract).status == 201
    report = {"target": {"type": "lambda", "function": "echo"}, "triggers": [{"after": {"job": "data/extract"}}]}
    assert api.call("PUT", "/teams/data/jobs/report", report).status == 201
    deployed.minutes(1)
    (upstream,) = [r for r in deployed.run_list("data/extract") if r.status is RunStatus.SUCCEEDED]
    received = deployed.deliver_events(deliveries=2)  # Run Finished, through the after trigger's rule
    assert [r.action for r in received] == ["started", "resent"]
    deployed.pump()
    (run,) = deployed.run_list("data/report")
    assert run.status is RunStatus.SUCCEEDED and run.scheduled_at == upstream.scheduled_at
    assert run.trigger_detail is not None and run.trigger_detail["upstreams"] == [
        {"job": "data/extract", "run_id": upstream.run_id, "status": "SUCCEEDED"}
    ]
    shown = api.call("GET", f"/teams/data/jobs/report/runs/{run.run_id}")
    assert shown.status == 200 and shown.body["trigger_detail"]["upstreams"][0]["job"] == "data/extract"


def test_a_trigger_or_topic_that_cannot_work_yet_is_stored_with_a_warning_apply_prints(
    stack: Stack, tmp_path: Any, monkeypatch: Any
) -> None:
    """#46: an s3 trigger on a bucket that does not exist, or does not send its events to EventBridge, was accepted
    and never fired; a missing escalation topic silently fell back. Each may be created later, so the job is stored,
    and PUT's answer (and `jobsched apply`) says what does not work yet."""
    import yaml

    from tests.aws.api_client import cli_as

    api = ApiClient(stack)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="quiet-landing")
    s3.put_bucket_tagging(Bucket="quiet-landing", Tagging={"TagSet": [{"Key": "jobsched-team", "Value": "data"}]})
    landing_bucket(stack, "data")
    missing_topic = "arn:aws:sns:us-east-1:123456789012:data-pages"
    body = job(
        [
            {"s3": {"bucket": "nowhere-landing"}},
            {"s3": {"bucket": "quiet-landing"}},
            {"s3": {"bucket": "acme-landing"}},
        ],
        escalation={"sns_topic": missing_topic},
    )
    stored = api.call("PUT", "/teams/data/jobs/load", body)
    assert stored.status == 201, stored.body
    warned = {(w["field"], w["code"]) for w in stored.body["warnings"]}
    assert warned == {
        ("triggers[0].s3.bucket", "bucket_not_found"),
        ("triggers[1].s3.bucket", "bucket_events_off"),
        ("escalation.sns_topic", "topic_not_found"),
    }
    [off] = [w for w in stored.body["warnings"] if w["code"] == "bucket_events_off"]
    assert "the trigger never fires" in off["message"] and "EventBridgeConfiguration" in off["message"]
    clean = api.call("PUT", "/teams/data/jobs/clean", job([{"s3": {"bucket": "acme-landing"}}]))
    assert clean.status == 201 and clean.body["warnings"] is None

    (tmp_path / "load.yaml").write_text(yaml.safe_dump(body | {"name": "again", "team": "data"}))
    code, output = cli_as(api, team_role("data"), monkeypatch)("apply", "-f", str(tmp_path))
    assert code == 0, output
    assert "data/again: created" in output
    assert "  warning: triggers[1].s3.bucket: bucket quiet-landing does not send its events to EventBridge" in output
