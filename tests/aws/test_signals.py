"""Signals that provably fire (#14): every jobsched metric an alarm or a dashboard widget queries, metric
math and SEARCH expressions included, is one the handlers really print, with the same dimension set.

The handlers run as deployed: sample events, moto, and each function's environment from the synthesized
template (``POWERTOOLS_SERVICE_NAME`` included, which is what made Powertools add a ``service`` dimension
the alarms did not query).
"""

from __future__ import annotations

import io
import json
import re
import socket
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from jobsched import wiring
from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.core.names import LOCAL_STAGE, Env
from jobsched.core.runs import instant_text
from jobsched.pipeline.lifecycle import Change, StateChange
from jobsched.pipeline.worker import heartbeat_checker
from tests.aws.harness import EVENTS, FakeContext, Stack, sqs_event
from tests.infra.conftest import synthesize

Metric = tuple[str, str, frozenset[str]]  # namespace, name, dimension names
OURS = "jobsched"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("signals")
    yield synthesize(folder, stage="dev", account="123456789012", region="us-east-1", dashboards="true")[0]


def function_environment(template: dict[str, Any], handler: str) -> dict[str, str]:
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function" and props.get("Handler") == handler:
            variables = props.get("Environment", {}).get("Variables", {})
            return {k: v for k, v in variables.items() if isinstance(v, str) and k.startswith("POWERTOOLS_")}
    raise AssertionError(f"no function with handler {handler}")


def emitted(output: str) -> set[Metric]:
    found = set()
    for line in output.splitlines():
        if not line.startswith('{"_aws"'):
            continue
        document = json.loads(line)
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                for dimensions in directive["Dimensions"]:
                    found.add((directive["Namespace"], metric["Name"], frozenset(dimensions)))
    return found


SEARCH = re.compile(r"\{([^}]*)\}\s*MetricName=\\?\"(\w+)\\?\"")


def _from_expression(expression: str) -> Iterator[Metric]:
    for schema, name in SEARCH.findall(expression):
        namespace, *dimensions = [part.strip() for part in schema.split(",")]
        yield namespace, name, frozenset(dimensions)


def _from_widget_metric(entry: list[Any]) -> Iterator[Metric]:
    if entry and isinstance(entry[0], dict):  # [{"expression": ..., "id": ...}]
        yield from _from_expression(entry[0].get("expression", ""))
        return
    names = [part for part in entry if not isinstance(part, dict)]
    namespace, name, rest = names[0], names[1], names[2:]
    yield namespace, name, frozenset(rest[0::2])


def _dashboard_body(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and "Fn::Join" in value:
        parts = value["Fn::Join"][1]
        text = "".join(part if isinstance(part, str) else "TOKEN" for part in parts)
        body: dict[str, Any] = json.loads(text)
        return body
    plain: dict[str, Any] = json.loads(value)
    return plain


def queried(template: dict[str, Any]) -> dict[Metric, list[str]]:
    """Every metric in our namespace that an alarm or widget reads -> who reads it."""
    found: dict[Metric, list[str]] = {}
    for logical, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        readers: list[tuple[Metric, str]] = []
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            readers = [(metric, f"alarm {logical}") for metric in _alarm_metrics(props)]
        if resource["Type"] == "AWS::CloudWatch::Dashboard":
            readers = _dashboard_metrics(logical, props)
        for metric, reader in readers:
            if metric[0] == OURS:
                found.setdefault(metric, []).append(reader)
    return found


def _alarm_metrics(props: dict[str, Any]) -> list[Metric]:
    metrics: list[Metric] = []
    if "MetricName" in props:
        dimensions = frozenset(d["Name"] for d in props.get("Dimensions", []))
        metrics.append((props["Namespace"], props["MetricName"], dimensions))
    for query in props.get("Metrics", []):
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            dimensions = frozenset(d["Name"] for d in metric.get("Dimensions", []))
            metrics.append((metric["Namespace"], metric["MetricName"], dimensions))
        metrics += _from_expression(query.get("Expression", ""))
    return metrics


def _dashboard_metrics(logical: str, props: dict[str, Any]) -> list[tuple[Metric, str]]:
    found = []
    for widget in _dashboard_body(props["DashboardBody"])["widgets"]:
        title = widget.get("properties", {}).get("title", "?")
        for entry in widget.get("properties", {}).get("metrics", []):
            found += [(metric, f"dashboard {logical}: {title}") for metric in _from_widget_metric(entry)]
    return found


def register_refused_http_job(deployed: Stack, name: str, *, max_attempts: int) -> None:
    """A job of team ops whose http target is a closed port on loopback: every attempt fails (retryably)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}/"
    deployed.register(
        {
            "name": name,
            "team": "ops",
            "target": {"type": "http", "url": refused, "timeout": "2s"},
            "retry": {"max_attempts": max_attempts},
        }
    )


def sample_run_message(now: datetime) -> dict[str, Any]:
    """The sample worker event's run message, due ``now``."""
    body: dict[str, Any] = json.loads(json.loads((EVENTS / "worker_sqs_batch.json").read_text())["Records"][0]["body"])
    return body | {"scheduled_at": instant_text(now), "fire_at": instant_text(now)}


def throttle(*args: Any, **kwargs: Any) -> None:
    raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "UpdateItem")


def drive_every_handler(
    deployed: Stack, template: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> set[Metric]:
    """Each scheduled or queue-driven handler once, as deployed, with what it prints captured."""
    from functions.dispatcher.handler import handler as dispatcher
    from functions.escalation.handler import handler as escalation
    from functions.heartbeat.handler import handler as heartbeat
    from functions.pages.handler import handler as pages
    from functions.worker.handler import handler as worker

    def as_deployed(module: str) -> None:
        for name, value in function_environment(template, f"functions.{module}.handler.handler").items():
            monkeypatch.setenv(name, value)

    monkeypatch.setenv(Env.STAGE, LOCAL_STAGE)  # the failing target below is a closed port on loopback
    now = wiring.utc_now()
    deployed.clock.now = now
    inbox = deployed.sqs.create_queue(QueueName="signals-inbox", tags={"jobsched-team": "ops"})["QueueUrl"]
    deployed.register(
        {"name": "live", "team": "ops", "schedule": {"expression": "* * * * *"}, "target": {"type": "callback"}}
    )
    deployed.register({"name": "nightly", "team": "ops", "target": {"type": "sqs", "queue_url": inbox}})
    tick = json.loads((EVENTS / "dispatcher_tick.json").read_text())

    as_deployed("dispatcher")
    dispatcher(tick, FakeContext(function_name="jobsched-dev-Dispatcher"))
    as_deployed("heartbeat")
    heartbeat(tick, FakeContext(function_name="jobsched-dev-Heartbeat"))

    as_deployed("worker")
    register_refused_http_job(deployed, "flaky", max_attempts=3)
    body = sample_run_message(now)
    retried = body | {"job": "ops/flaky"}
    deployed.sqs.purge_queue(QueueUrl=deployed.queue_urls["normal"])
    for message in (body, retried):
        deployed.sqs.send_message(QueueUrl=deployed.queue_urls["normal"], MessageBody=json.dumps(message))
    messages = deployed.sqs.receive_message(QueueUrl=deployed.queue_urls["normal"], MaxNumberOfMessages=10)["Messages"]
    with monkeypatch.context() as throttled:  # a usage write throttled: UsageUnrecorded, the runs unharmed
        throttled.setattr(JobsStore, "add_usage", throttle)
        worker(sqs_event(deployed, messages), FakeContext())

    as_deployed("escalation")
    deployed.register({"name": "nightly", "team": "ops", "target": {"type": "callback"}})
    escalation(json.loads((EVENTS / "escalation_sqs_batch.json").read_text()), FakeContext())
    as_deployed("pages")
    raw = deployed.sqs.receive_message(
        QueueUrl=deployed.page_deliveries_url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", [])
    sample = json.loads((EVENTS / "pages_sqs_batch.json").read_text())["Records"][0]
    records = [
        sample | {"body": m["Body"], "receiptHandle": m["ReceiptHandle"], "messageId": m["MessageId"]} for m in raw
    ]
    pages({"Records": records}, FakeContext())
    drive_the_events_handler(deployed, as_deployed, monkeypatch)
    drive_a_wait_for_data(deployed, now)
    return emitted(capsys.readouterr().out)


def drive_a_wait_for_data(deployed: Stack, now: datetime) -> None:
    """A run that begins waiting for its object, and one whose wait (begun two minutes ago) times out."""
    import boto3

    from functions.worker.handler import handler as worker
    from jobsched.core.records import Waiting
    from jobsched.core.runs import RunMessage

    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="signals-landing")
    s3.put_bucket_tagging(Bucket="signals-landing", Tagging={"TagSet": [{"Key": "jobsched-team", "Value": "ops"}]})
    deployed.register(
        {
            "name": "waits",
            "team": "ops",
            "target": {"type": "callback"},
            "wait_for": [{"s3": "s3://signals-landing/ready"}],
            "wait": {"timeout": "1m"},
        }
    )
    late, fresh = (
        RunMessage.scheduled(job="ops/waits", team="ops", at=now - timedelta(minutes=m), fire_at=now, spec_version=1)
        for m in (2, 1)
    )
    since = now - timedelta(minutes=2)
    deployed.runs.wait(
        late,
        Waiting("waiting", ["s3://signals-landing/ready"], since, since + timedelta(minutes=1)),
        now=since,
        retention=timedelta(days=1),
        deadline=None,
    )
    url = deployed.queue_urls["normal"]
    for message in (late, fresh):
        deployed.sqs.send_message(QueueUrl=url, MessageBody=message.model_dump_json())
        [delivery] = deployed.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
        worker(sqs_event(deployed, [delivery]), FakeContext())


def drive_the_events_handler(deployed: Stack, as_deployed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Events a trigger rule delivered: one started (then run by the worker), one redelivered, one rate-limited,
    and a Run Finished the bus refuses (a bus that does not exist)."""
    from functions.events.handler import handler as events_handler
    from functions.worker.handler import handler as worker

    as_deployed("events")
    outbox = deployed.sqs.create_queue(QueueName="signals-outbox", tags={"jobsched-team": "ops"})["QueueUrl"]
    deployed.register(
        {
            "name": "on-event",
            "team": "ops",
            "triggers": [{"event": {"pattern": {"source": ["ops.signals"]}}}],
            "target": {"type": "sqs", "queue_url": outbox},
            "concurrency": {"max_runs_per_minute": 1},
        }
    )
    for n in (1, 2):
        deployed.events.put_events(
            Entries=[
                {
                    "Source": "ops.signals",
                    "DetailType": "X",
                    "Detail": json.dumps({"n": n}),
                    "Time": deployed.clock(),
                }
            ]
        )
    raw = deployed.intake_messages()
    template = json.loads((EVENTS / "worker_sqs_batch.json").read_text())["Records"][0]
    records = [
        template | {"body": m["Body"], "receiptHandle": m["ReceiptHandle"], "messageId": m["MessageId"]} for m in raw
    ]
    again = records[0] | {
        "messageId": "again",
        "attributes": records[0]["attributes"] | {"ApproximateReceiveCount": "2"},
    }
    events_handler({"Records": [*records, again]}, FakeContext())
    as_deployed("worker")
    monkeypatch.setenv(Env.EVENT_BUS, "jobsched-nowhere")
    from jobsched import wiring as services

    services.reset()
    started = deployed.sqs.receive_message(QueueUrl=deployed.queue_urls["normal"], MaxNumberOfMessages=10)["Messages"]
    # One invocation per delivery: the run, then its redelivery (concurrent deliveries of one run are
    # tests/aws/test_handler_reentrancy.py's; here each metric must come out whichever thread wins).
    for delivery in started:
        worker(sqs_event(deployed, [delivery]), FakeContext())


def test_every_metric_an_alarm_or_a_widget_queries_is_published_with_that_dimension_set(
    deployed: Stack, template: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    published = drive_every_handler(deployed, template, monkeypatch, capsys)
    readers = queried(template)
    assert readers, "the template queries our metrics"
    missing = {metric: who for metric, who in readers.items() if metric not in published}
    ours = sorted((name, sorted(dims)) for namespace, name, dims in published if namespace == OURS)
    assert not missing, "\n".join(
        [
            f"{name}{sorted(dims)} read by {who}, never published with that dimension set"
            for (_, name, dims), who in missing.items()
        ]
        + [f"published: {ours}"]
    )


def test_the_catalog_is_what_the_handlers_print(
    deployed: Stack, template: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobsched.watch.signals import CATALOG

    published = {
        (name, dims)
        for namespace, name, dims in drive_every_handler(deployed, template, monkeypatch, capsys)
        if namespace == OURS
    }
    declared = {(d.name, frozenset(d.dimensions)) for d in CATALOG.values()}
    assert published <= declared, f"published but not in the catalog: {sorted(published - declared, key=str)}"


def test_search_expressions_are_parsed() -> None:
    assert list(_from_expression("SUM(SEARCH('{jobsched,outcome} MetricName=\"Pages\"', 'Sum', 300))")) == [
        ("jobsched", "Pages", frozenset({"outcome"}))
    ]
    assert Path(EVENTS / "dispatcher_tick.json").exists()


def test_every_run_that_ends_is_counted_once_wherever_it_ends(stack: Stack, clock: Any) -> None:
    """M1 counts every terminal outcome: the worker's, a callback result through the API, a heartbeat
    time-out, a cancel and the dispatcher's MISSED records; a redelivered message counts nothing more."""

    from tests.aws.api_client import ApiClient, team_role

    ended: list[str] = []
    retried: list[str] = []

    @stack.lifecycle.subscribe
    def heard(change: StateChange) -> None:
        if change.run is not None and change.change is Change.FINISHED:
            ended.append(f"{change.job}:{change.status}")
        elif change.run is not None and change.change is Change.RETRYING:
            retried.append(change.job)

    api = ApiClient(stack)
    clock.set("2027-01-04T09:59:30Z")
    hourly = {"expression": "0 * * * *"}
    stack.register(
        {"name": "echo", "team": "ops", "schedule": hourly, "target": {"type": "lambda", "function": "echo"}}
    )
    stack.register({"name": "reported", "team": "ops", "schedule": hourly, "target": {"type": "callback"}})
    stack.register(
        {
            "name": "silent",
            "team": "ops",
            "schedule": hourly,
            "target": {"type": "callback", "timeout": "1h"},
            "heartbeat_timeout": "1m",
            "retry": {"max_attempts": 2, "backoff": {"initial": "10s", "max": "10s", "jitter": "none"}},
        }
    )
    stack.register({"name": "stopped", "team": "ops", "schedule": hourly, "target": {"type": "callback"}})
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump(deliveries=2)  # every message delivered twice
    run_id = "20270104T100000Z"
    assert ended == ["ops/echo:SUCCEEDED"]

    run = stack.runs.get("ops/reported", run_id)
    assert run is not None
    token = api.tokens.issue("ops/reported", run_id, run.attempt, expires_at=clock() + timedelta(hours=2))
    assert api.callback("complete", token, {"status": "succeeded"}).status == 200
    assert api.call("POST", f"/teams/ops/jobs/stopped/runs/{run_id}/cancel", principal=team_role("ops")).status == 200

    checker = heartbeat_checker(stack.runs, stack.worker)
    clock.set("2027-01-04T10:02:30Z")
    checker.check(clock())  # attempt 1 silent: retried
    clock.advance(timedelta(seconds=15))
    stack.pump()
    clock.advance(timedelta(minutes=3))
    checker.check(clock())  # attempt 2 silent too: TIMED_OUT
    assert retried == ["ops/silent"]

    clock.advance(timedelta(hours=8))  # the dispatcher was away: past the catch-up window, instants are MISSED
    stack.tick()
    missed = [entry for entry in ended if entry.endswith(":MISSED")]
    assert len(missed) >= 4, "each job's instants the outage pushed past the window"
    assert sorted(e for e in ended if not e.endswith(":MISSED")) == [
        "ops/echo:SUCCEEDED",
        "ops/reported:SUCCEEDED",
        "ops/silent:TIMED_OUT",
        "ops/stopped:CANCELLED",
    ]


def test_the_oncall_log_queries_read_fields_the_worker_really_logs(
    deployed: Stack, template: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "Top failing jobs" and "latest failures" are Logs Insights widgets over the worker's log group: the
    fields they filter and show are in the worker's "run message" line of a failed run."""
    from functions.worker.handler import handler as worker
    from infra.components.observability import LATEST_FAILURES, TOP_FAILING_JOBS

    bodies = [
        r["Properties"]["DashboardBody"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Dashboard"
    ]
    oncall = next(_dashboard_body(b) for b in bodies if "Latest failures" in json.dumps(b))
    queries = [w["properties"] for w in oncall["widgets"] if w.get("type") == "log"]
    assert [q["title"] for q in queries] == ["Top failing jobs (last period)", "Latest failures"]
    assert all("/aws/lambda/jobsched-dev-Worker" in q["query"] for q in queries)
    assert "\n| ".join(TOP_FAILING_JOBS) in queries[0]["query"]
    assert "\n| ".join(LATEST_FAILURES) in queries[1]["query"]

    monkeypatch.setenv(Env.STAGE, LOCAL_STAGE)
    for name, value in function_environment(template, "functions.worker.handler.handler").items():
        monkeypatch.setenv(name, value)
    now = wiring.utc_now()
    deployed.clock.now = now
    register_refused_http_job(deployed, "broken", max_attempts=1)
    body = sample_run_message(now) | {"job": "ops/broken"}
    deployed.sqs.send_message(QueueUrl=deployed.queue_urls["normal"], MessageBody=json.dumps(body))
    messages = deployed.sqs.receive_message(QueueUrl=deployed.queue_urls["normal"])["Messages"]
    from functions.worker import handler as worker_module

    written = io.StringIO()  # the logger's own stream (it may still point at an earlier test's capture)
    monkeypatch.setattr(worker_module.logger.registered_handler, "stream", written)
    worker(sqs_event(deployed, messages), FakeContext())
    lines = [json.loads(line) for line in written.getvalue().splitlines() if line.startswith('{"level"')]
    [failed] = [line for line in lines if line.get("message") == "run message" and line.get("outcome") == "failed"]
    for field in ("job", "team", "run_id", "attempt", "detail", "outcome"):
        assert field in failed, field
    assert failed["job"] == "ops/broken" and failed["team"] == "ops"
