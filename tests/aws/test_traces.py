"""#50: one trace per run, W3C Trace Context. An HTTP target receives `traceparent` and `tracestate` naming the run's
trace and the attempt's span, a Lambda target finds the same in its payload's envelope, the run's view names the
trace (and X-Ray's form of it); a retry is another span of the same trace; a DAG run's tasks are spans nested under
its run; every critical-tier run and every retry is sampled, a stable tenth of the others."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from jobsched.cli.harness import Harness, JobTest
from jobsched.core.runs import RunStatus, instant_text
from jobsched.core.traces import attempt_span_id, run_span_id, sampled, trace_id, xray_trace_id
from jobsched.registry.jobfile import load_job_file
from jobsched.watch.trace_spans import run_spans
from tests.aws.api_client import ApiClient
from tests.aws.harness import Clock, Stack
from tests.helpers import RecordingServer, recording_server

ROOT = Path(__file__).resolve().parents[2]
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$")


@pytest.fixture
def webhook() -> Iterator[RecordingServer]:
    with recording_server() as server:
        yield server


def test_an_http_target_and_a_lambda_target_receive_the_runs_trace(
    stack: Stack, clock: Clock, webhook: RecordingServer
) -> None:
    clock.set("2027-01-04T09:59:30Z")
    hourly = {"schedule": {"expression": "0 * * * *"}, "retry": {"max_attempts": 2,
              "backoff": {"initial": "10s", "max": "10s", "jitter": "none"}}}  # fmt: skip
    stack.register({"name": "hook", "team": "ops", "tier": "critical", **hourly,
                    "target": {"type": "http", "url": webhook.url}})  # fmt: skip
    stack.register({"name": "fn", "team": "ops", **hourly, "target": {"type": "lambda", "function": "echo"}})
    webhook.statuses[:] = [500, 500, 500, 500]  # the first attempt fails (5xx retried within it, then given up)
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    clock.set("2027-01-04T10:00:20Z")
    stack.pump()  # the retry, ten seconds later
    run = stack.runs.get("ops/hook", "20270104T100000Z")
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.attempt == 2
    trace = trace_id("ops/hook", run.run_id, "2027-01-04T10:00:00Z")
    assert trace.startswith(f"{int(run.scheduled_at.timestamp()):08x}")  # X-Ray's epoch prefix
    spans = set()
    for request in webhook.seen:
        found = TRACEPARENT.match(request["headers"]["traceparent"])
        assert found is not None and found.group(1) == trace
        assert request["headers"]["tracestate"].startswith("jobsched=20270104T100000Z:")
        assert request["headers"]["traceparent"].endswith("-01")  # a critical-tier run: always sampled
        spans.add(found.group(2))
    assert spans == {attempt_span_id("ops/hook", run.run_id, 1), attempt_span_id("ops/hook", run.run_id, 2)}

    [event] = [event for name, event in stack.lambdas.calls if name == "echo"]
    lambda_trace = TRACEPARENT.match(event["jobsched"]["traceparent"])
    assert lambda_trace is not None and lambda_trace.group(1) == trace_id("ops/fn", "20270104T100000Z",
                                                                           "2027-01-04T10:00:00Z")  # fmt: skip

    shown = ApiClient(stack).call("GET", "/teams/ops/jobs/hook/runs/20270104T100000Z").body
    assert shown["trace_id"] == trace and shown["xray_trace_id"] == xray_trace_id(trace) == f"1-{trace[:8]}-{trace[8:]}"


def test_a_dag_runs_tasks_are_spans_nested_under_its_run() -> None:
    spec = load_job_file(ROOT / "examples" / "jobs" / "nightly-etl.yaml")
    test = JobTest.model_validate(
        {
            "job": "nightly-etl.yaml",
            "window": {"from": "2027-07-02T00:00:00Z", "to": "2027-07-03T00:00:00Z"},
            "stubs": {"extract": {"output": {"rows": 3, "files": ["s3://lake/a.csv"]}}, "load": {"output": {}}},
            "expect": {},
        }
    )
    harness = Harness(spec, test)
    harness.run()
    [run] = harness.store.history(spec.key, limit=10)
    tasks = harness.store.tasks(spec.key, run.run_id)
    spans = run_spans(run, tasks)
    root = run_span_id(spec.key, run.run_id)
    assert spans[0].span_id == root and spans[0].parent_id is None
    task_spans = [span for span in spans if span.name.startswith("task ")]
    assert {span.name.removeprefix("task ") for span in task_spans} == set(tasks)
    for span in task_spans:
        assert span.parent_id == root and span.start >= run.fire_at
        name = span.name.removeprefix("task ")
        assert span.span_id == attempt_span_id(spec.key, run.run_id, tasks[name].attempt, name)


def test_every_critical_run_and_every_retry_is_sampled_and_a_tenth_of_the_rest() -> None:
    ids: list[Any] = [f"2027010{day}T{hour:02d}0000Z" for day in range(1, 10) for hour in range(24)] * 5
    ids = [f"{run_id}-{index}" for index, run_id in enumerate(ids)]
    assert all(sampled(run_id, 1, critical=True) for run_id in ids)
    assert all(sampled(run_id, 2, critical=False) for run_id in ids)
    share = sum(sampled(run_id, 1, critical=False) for run_id in ids) / len(ids)
    assert 0.06 < share < 0.14, share
    assert sampled(ids[0], 1, critical=False) == sampled(ids[0], 1, critical=False)  # stable per run


def test_the_workers_subsegment_is_annotated_with_the_runs_trace() -> None:
    from jobsched.core.runs import RunMessage
    from jobsched.core.tz import UTC
    from jobsched.watch.observability import trace_annotations

    at = datetime(2027, 1, 4, 10, tzinfo=UTC)
    message = RunMessage.scheduled(job="ops/hook", team="ops", at=at, fire_at=at, spec_version=1)
    assert trace_annotations(message) == {
        "jobsched_trace": trace_id("ops/hook", "20270104T100000Z", "2027-01-04T10:00:00Z"),
        "job": "ops/hook",
        "run_id": "20270104T100000Z",
    }


def test_the_run_page_links_the_trace_to_xray_where_the_region_is_known(stack: Stack, clock: Clock) -> None:
    from infra.local.console import _links
    from jobsched.console import views

    run_id = stack.register_and_trigger({"name": "fn", "team": "ops", "target": {"type": "lambda", "function": "echo"}})
    run = stack.runs.get("ops/fn", run_id)
    assert run is not None
    trace = trace_id("ops/fn", run_id, instant_text(run.scheduled_at))
    linked = views.run(stack.jobs, stack.runs, "ops/fn", run_id, now=clock(), links=_links, region="eu-west-1").body
    assert (
        f"https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1#xray:traces/{xray_trace_id(trace)}"
        in linked
    )
    plain = views.run(stack.jobs, stack.runs, "ops/fn", run_id, now=clock(), links=_links).body
    assert "console.aws.amazon.com" not in plain and f"annotation.jobsched_trace = &quot;{trace}&quot;" in plain
