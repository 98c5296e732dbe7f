"""End to end through the local runtime: HTTP API -> dispatcher tick -> SQS (moto server) -> worker -> targets.

One runtime per module (deploying the template takes seconds), a 1-second tick, real time. Tests wait on
conditions, never for fixed times, and no assertion depends on how fast the machine is: a deadline only bounds how
long a broken test takes to fail, and is ``PATIENCE`` times what a quiet machine needs (CI's machine is sometimes
busy with other work: #46 measured the suite beside two CPU-bound processes).
"""

from __future__ import annotations

import html
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import pytest
import urllib3

from infra.local.examples import EXAMPLE_INVENTORY_ROWS
from infra.local.runtime import LocalRuntime
from infra.local.stack import DEFAULT_ADMIN, TEAM_PATTERN
from jobsched.core.runs import parse_instant
from tests.e2e import running_stack
from tests.helpers import chromium, rendered_text, screenshot

HTTP = urllib3.PoolManager()


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    yield from running_stack(tmp_path_factory.mktemp("local"), tick_seconds=1.0, examples=True)


def call(
    runtime: LocalRuntime, method: str, path: str, body: Any = None, team: str | None = "e2e", token: str | None = None
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", **({"X-Jobsched-Token": token} if token else {})}
    if team:
        headers["X-Jobsched-Principal"] = TEAM_PATTERN.format(team=team)
    response = HTTP.request(
        method, runtime.api_url + path, body=json.dumps(body) if body is not None else None, headers=headers
    )
    return response.status, json.loads(response.data) if response.data else None


PATIENCE = 4.0  # deadlines are this many times what a quiet machine needs


def wait_for(check: Callable[[], Any], seconds: float = 30.0) -> Any:
    """``check``'s first truthy answer, polled; fails after ``seconds`` on a quiet machine (times PATIENCE)."""
    seconds *= PATIENCE
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"not within {seconds} s")


def run_of(runtime: LocalRuntime, job: str, run_id: str, team: str = "e2e") -> dict[str, Any]:
    """The run, or {"status": None} while it does not exist yet."""
    status, body = call(runtime, "GET", f"/teams/{team}/jobs/{job}/runs/{run_id}", team=team)
    return body if status == 200 else {"status": None}


def finished(runtime: LocalRuntime, job: str, run_id: str, team: str = "e2e") -> Callable[[], Any]:
    def check() -> Any:
        run = run_of(runtime, job, run_id, team)
        return run if run["status"] in ("SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED") else None

    return check


def test_a_scheduled_run_fires_on_time_through_the_whole_stack(runtime: LocalRuntime) -> None:
    at = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    body = {
        "schedule": {"expression": f"at({at:%Y-%m-%dT%H:%M:%S})"},
        "target": {"type": "lambda", "function": "jobsched-example-echo", "payload": {"n": 1}},
    }
    status, job = call(runtime, "PUT", "/teams/e2e/jobs/once", body)
    assert status == 201 and job["next_fire_times"] == [f"{at:%Y-%m-%dT%H:%M:%SZ}"]
    run = wait_for(finished(runtime, "once", f"{at:%Y%m%dT%H%M%SZ}"))
    assert run["status"] == "SUCCEEDED" and '"n": 1' in run["output"]
    # Never before its instant. How late is a figure for scripts/bench_lateness.py, not a timed test (a busy
    # machine makes it later); the run id says it ran for this instant.
    assert run["lateness_seconds"] >= 0


def test_a_flaky_job_is_retried_to_success(runtime: LocalRuntime) -> None:
    body = {
        "target": {"type": "lambda", "function": "jobsched-example-flaky", "payload": {"fail_times": 2}},
        "retry": {"max_attempts": 3, "backoff": {"initial": "1s", "multiplier": 1, "max": "1s", "jitter": "none"}},
    }
    call(runtime, "PUT", "/teams/e2e/jobs/flaky", body)
    status, run = call(runtime, "POST", "/teams/e2e/jobs/flaky/trigger")
    assert status == 202
    done = wait_for(finished(runtime, "flaky", run["run_id"]))
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 3


def test_the_example_pipelines_checks_warn_and_page_once_and_its_load_reads_the_extracts_output(
    runtime: LocalRuntime,
) -> None:
    base = "/teams/examples/jobs/pipeline"
    started = call(runtime, "POST", f"{base}/trigger", {}, team="examples")[1]
    found = wait_for(
        lambda: (
            (run := run_of(runtime, "pipeline", started["run_id"], "examples"))["status"] not in (None, "SCHEDULED")
            and run
        )
    )
    if found["status"] == "SKIPPED":  # its schedule's run held the slot (overlap: skip): watch that one
        # It may have ended since: the newest run not skipped, running or ended (runs are listed newest first).
        runs = call(runtime, "GET", f"{base}/runs", team="examples")[1]["runs"]
        started = next(run for run in runs if run["status"] not in ("SKIPPED", "SCHEDULED"))
    done = wait_for(finished(runtime, "pipeline", started["run_id"], "examples"), 90)
    assert done["status"] == "SUCCEEDED"  # a warning check does not fail the run
    extract = next(task for task in done["tasks"] if task["name"] == "extract")
    assert extract["checks"] == [
        {"name": "named-step", "severity": "error", "passed": True, "message": None},
        {
            "name": "has-rows",
            "severity": "warn",
            "passed": False,
            "message": "output.echo.payload.rows is missing",
        },
    ]
    assert [c["name"] for c in done["checks"]] == ["extract: has-rows"]
    load = next(task for task in done["tasks"] if task["name"] == "load")
    assert json.loads(load["output"])["echo"]["payload"] == {"from_extract": {"step": "extract"}}  # by reference
    pages = wait_for(lambda: [p for p in runtime.escalations if "examples/pipeline" in p["subject"]], 20)
    assert pages[0]["subject"].startswith("[jobsched, warning] examples/pipeline: warning check failed")


def test_the_example_pipeline_checks_fans_out_waits_for_approval_and_deletes_with_the_approver(
    runtime: LocalRuntime,
) -> None:
    """examples/jobs/cost-cleanup.yaml under make run: every DAG feature in one run, approved with the CLI."""
    base = "/teams/examples/jobs/cost-cleanup"
    started = call(runtime, "POST", f"{base}/trigger", {}, team="examples")[1]
    run_id = started["run_id"]

    def task(name: str) -> dict[str, Any]:
        tasks = run_of(runtime, "cost-cleanup", run_id, "examples").get("tasks") or []
        return next((t for t in tasks if t["name"] == name), {"status": None})

    wait_for(lambda: task("approve-deletion")["status"] == "RUNNING", seconds=60)
    sized = task("size-each-account")
    assert sized["status"] == "SUCCEEDED" and sized["items"] == {"total": 3, "succeeded": 3, "failed": 0, "running": 0}
    checked = task("check-each-snapshot")  # a distributed map over the CSV inventory the runtime wrote to S3
    assert checked["status"] == "SUCCEEDED"
    assert checked["items"] == {
        "total": EXAMPLE_INVENTORY_ROWS,
        "succeeded": EXAMPLE_INVENTORY_ROWS,
        "failed": 0,
        "running": 0,
    }
    assert [c["passed"] for c in task("find-idle")["checks"]] == [True, True]
    typed = ["approve", "examples/cost-cleanup", run_id, "approve-deletion", "--comment", "checked"]
    command = [str(Path(sys.executable).with_name("jobsched")), *typed, "--api", runtime.api_url]
    approved = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert approved.returncode == 0, approved.stderr
    done = wait_for(finished(runtime, "cost-cleanup", run_id, "examples"), 60)
    assert done["status"] == "SUCCEEDED"
    deleted = json.loads(task("delete")["output"])["echo"]["payload"]
    assert deleted == {"snapshots": ["snap-0a1", "snap-0b2"], "approved_by": DEFAULT_ADMIN}  # the CLI's principal


def test_a_job_that_keeps_failing_ends_failed_with_one_escalation(runtime: LocalRuntime) -> None:
    body = {
        "target": {"type": "lambda", "function": "jobsched-example-flaky", "payload": {"fail_times": 9}},
        "retry": {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}},
    }
    call(runtime, "PUT", "/teams/e2e/jobs/doomed", body)
    run = call(runtime, "POST", "/teams/e2e/jobs/doomed/trigger")[1]
    done = wait_for(finished(runtime, "doomed", run["run_id"]))
    assert done["status"] == "FAILED" and done["attempt"] == 2 and "fails on purpose" in done["error"]
    pages = wait_for(lambda: [p for p in runtime.escalations if "e2e/doomed" in p["subject"]], 20)
    time.sleep(2)  # a second page would arrive within this
    pages = [p for p in runtime.escalations if "e2e/doomed" in p["subject"]]
    assert len(pages) == 1 and pages[0]["kind"] == "run_failed" and pages[0]["notice"] == "opened"
    assert f"run: {run['run_id']}" in pages[0]["message"] and "fails on purpose" in pages[0]["message"]
    assert f"{runtime.api_url}/teams/e2e/jobs/doomed/runs/{run['run_id']}" in pages[0]["message"]


def test_an_unknown_function_fails_clearly(runtime: LocalRuntime) -> None:
    body = {"target": {"type": "lambda", "function": "not-deployed"}, "retry": {"max_attempts": 1}}
    call(runtime, "PUT", "/teams/e2e/jobs/missing", body)
    run = call(runtime, "POST", "/teams/e2e/jobs/missing/trigger")[1]
    done = wait_for(finished(runtime, "missing", run["run_id"]))
    assert done["status"] == "FAILED" and "Lambda function 'not-deployed' does not exist" in done["error"]


def test_a_callback_run_heartbeats_and_completes(runtime: LocalRuntime) -> None:
    call(
        runtime,
        "PUT",
        "/teams/e2e/jobs/external",
        {"target": {"type": "callback", "timeout": "10m"}, "heartbeat_timeout": "1m"},
    )
    run = call(runtime, "POST", "/teams/e2e/jobs/external/trigger")[1]
    running = wait_for(lambda: (r := run_of(runtime, "external", run["run_id"]))["status"] == "RUNNING" and r)
    token = running["callback_token"]
    assert call(runtime, "POST", "/callbacks/heartbeat", team=None, token=token)[0] == 200
    done_body = {"status": "succeeded", "output": "ok"}
    status, done = call(runtime, "POST", "/callbacks/complete", done_body, team=None, token=token)
    assert status == 200 and done["status"] == "SUCCEEDED"


def test_team_isolation_through_the_gateway(runtime: LocalRuntime) -> None:
    call(runtime, "PUT", "/teams/e2e/jobs/private", {"target": {"type": "callback"}})
    status, body = call(runtime, "GET", "/teams/e2e/jobs/private", team="intruders")
    assert status == 403 and body["error"]["code"] == "forbidden"
    assert call(runtime, "GET", "/teams/e2e/jobs/private")[0] == 200


def test_the_example_jobs_are_registered(runtime: LocalRuntime) -> None:
    status, page = call(runtime, "GET", "/teams/examples/jobs", team="examples")
    assert status == 200 and {j["name"] for j in page["jobs"]} == {
        "hello",
        "flaky",
        "callback",
        "pipeline",
        "failing",
        "orders-ready",
        "landing-exports",
        "landing-batches",
        "nightly-waits-for-file",
        "nightly-export",
        "failing-export",
        "slow-export",
        "resumable-export",
        "reindex-shards",
        "failing-reindex",
        "cost-cleanup",
    }


def test_a_dag_runs_end_to_end_on_its_state_machine(runtime: LocalRuntime) -> None:
    flaky = {"type": "lambda", "function": "jobsched-example-flaky", "payload": {"fail_times": 1}}
    echo = {"type": "lambda", "function": "jobsched-example-echo"}
    body = {
        "retry": {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}},
        "dag": {
            "tasks": [
                {"name": "a", "target": echo},
                {"name": "b", "depends_on": ["a"], "target": flaky},
                {"name": "c", "depends_on": ["a"], "target": echo},
                {"name": "d", "depends_on": ["b", "c"], "target": echo},
            ]
        },
    }
    assert call(runtime, "PUT", "/teams/e2e/jobs/diamond", body)[0] == 201
    run = call(runtime, "POST", "/teams/e2e/jobs/diamond/trigger")[1]
    try:
        done = wait_for(finished(runtime, "diamond", run["run_id"]), 60)
    except AssertionError as stuck:  # say where it stands: which task waits, and what the execution did
        raise AssertionError(f"{stuck}: {dag_state(runtime, 'diamond', run['run_id'])}") from None
    assert done["status"] == "SUCCEEDED", done
    tasks = {task["name"]: task for task in done["tasks"]}
    assert {name: task["status"] for name, task in tasks.items()} == dict.fromkeys("abcd", "SUCCEEDED")
    assert tasks["b"]["attempt"] == 2  # failed once, retried by the state machine
    assert tasks["d"]["started_at"] >= max(tasks["b"]["finished_at"], tasks["c"]["finished_at"])


def dag_state(runtime: LocalRuntime, job: str, run_id: str) -> dict[str, Any]:
    """The run's tasks as recorded, and the last events of its execution (for a test that gave up waiting)."""
    import boto3

    run = run_of(runtime, job, run_id)
    state: dict[str, Any] = {"run": run.get("status"), "tasks": run.get("tasks")}
    stepfunctions = boto3.client("stepfunctions", endpoint_url=runtime.endpoint, region_name="us-east-1")
    for machine in stepfunctions.list_state_machines()["stateMachines"]:
        for execution in stepfunctions.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"]:
            if execution["name"].startswith(run_id):
                events = stepfunctions.get_execution_history(executionArn=execution["executionArn"])["events"]
                state["execution"] = execution["status"]
                state["events"] = [(e["type"], e.get("previousEventId")) for e in events[-12:]]
    return state


def alarm_states(runtime: LocalRuntime) -> dict[str, str]:
    path = runtime.state_dir / "alarms.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    return {row["alarm"].removeprefix("jobsched-local-"): row["state"] for row in rows}


def test_a_stopped_dispatcher_and_a_poison_message_drive_their_alarms_and_page_the_ops_topic(
    runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The template's alarms, evaluated by the runtime from what the handlers emit and what it observes,
    with periods scaled to the 1 s tick (a 5-minute period lasts 5 s)."""
    import boto3

    from infra.local import pollers

    assert runtime.deployment is not None
    sqs = boto3.client("sqs", endpoint_url=runtime.endpoint, region_name="us-east-1")
    sns = boto3.client("sns", endpoint_url=runtime.endpoint, region_name="us-east-1")
    [ops_topic] = [t["TopicArn"] for t in sns.list_topics()["Topics"] if t["TopicArn"].endswith("ops-alarms")]
    inbox = sqs.create_queue(QueueName="e2e-ops-pager")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=ops_topic, Protocol="sqs", Endpoint=inbox_arn)

    wait_for(lambda: alarm_states(runtime).get("DispatcherMissedTicks") == "OK", 20)
    dispatcher = next(n for n, f in runtime.deployment.functions.items() if "dispatcher" in f["handler"])
    runtime.pause_rule(dispatcher)
    try:
        wait_for(lambda: alarm_states(runtime).get("DispatcherMissedTicks") == "ALARM", 20)
    finally:
        runtime.pause_rule(dispatcher, paused=False)

    def paged(name: str) -> bool:
        for message in sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", []):
            if json.loads(json.loads(message["Body"])["Message"])["AlarmName"] == f"jobsched-local-{name}":
                return True
        return False

    wait_for(lambda: paged("DispatcherMissedTicks"), 10)
    wait_for(lambda: alarm_states(runtime).get("DispatcherMissedTicks") == "OK", 20)

    monkeypatch.setattr(pollers, "LOCAL_FAILED_RECORD_RETRY", 1)  # a failed record comes back in 1 s
    normal = next(url for url in sqs.list_queues()["QueueUrls"] if url.endswith("WorkNormal"))
    sqs.send_message(QueueUrl=normal, MessageBody="this is not a run message")
    wait_for(lambda: alarm_states(runtime).get("DlqNormalNotEmpty") == "ALARM", 40)
    wait_for(lambda: paged("DlqNormalNotEmpty"), 10)


def test_a_job_failing_every_run_drives_the_fast_burn_alarm_and_successes_bring_it_back(
    runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SloFastBurn as synthesized (a 1-hour failure ratio over every run that ended). Its hour is scaled
    to 6 s here so the test takes seconds, not hours."""
    assert runtime.alarms is not None
    monkeypatch.setattr(runtime.alarms.board, "scale", 600.0)
    failing = {"target": {"type": "lambda", "function": "jobsched-example-flaky", "payload": {"fail_times": 99}}}
    healthy = {"target": {"type": "lambda", "function": "jobsched-example-echo"}}
    for name, body in (("burning", failing), ("steady", healthy)):
        assert call(runtime, "PUT", f"/teams/e2e/jobs/{name}", body | {"retry": {"max_attempts": 1}})[0] in (200, 201)
    for _ in range(3):
        assert call(runtime, "POST", "/teams/e2e/jobs/burning/trigger", {})[0] == 202
    wait_for(lambda: alarm_states(runtime).get("SloFastBurn") == "ALARM", 30)

    def succeed_once() -> bool:
        call(runtime, "POST", "/teams/e2e/jobs/steady/trigger", {})
        return alarm_states(runtime).get("SloFastBurn") == "OK"

    wait_for(succeed_once, 30)


def test_a_runs_logs_come_from_the_dispatcher_and_the_worker(runtime: LocalRuntime) -> None:
    at = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    body = {
        "schedule": {"expression": f"at({at:%Y-%m-%dT%H:%M:%S})"},
        "target": {"type": "lambda", "function": "jobsched-example-echo"},
    }
    call(runtime, "PUT", "/teams/e2e/jobs/logged", body)
    run_id = f"{at:%Y%m%dT%H%M%SZ}"
    wait_for(finished(runtime, "logged", run_id))

    def both_logged() -> dict[str, Any] | None:
        """The run's logs once the worker's line is in: it logs the message's outcome after the run's end is
        written and its lifecycle's subscribers have heard it, so a reader can see the end first."""
        status, found = call(runtime, "GET", f"/teams/e2e/jobs/logged/runs/{run_id}/logs")
        assert status == 200 and found["job"] == "e2e/logged" and f"run_id = '{run_id}'" in found["query"]
        components = {line["component"] for line in found["lines"]}
        return found if {"jobsched-dispatcher", "jobsched-worker"} <= components else None

    found = wait_for(both_logged, 10)
    sent = next(line for line in found["lines"] if line["message"] == "instants sent")
    assert run_id in sent["fields"]["run_ids"]
    worked = next(line for line in found["lines"] if line["message"] == "run message")
    assert worked["fields"]["outcome"] == "succeeded" and worked["fields"]["attempt"] == 1
    assert call(runtime, "GET", f"/teams/e2e/jobs/logged/runs/{run_id}/logs", team="other")[0] == 403


def page_of(runtime: LocalRuntime, path: str) -> tuple[int, str]:
    response = HTTP.request("GET", runtime.api_url + path)
    return response.status, response.data.decode()


def test_the_console_serves_linked_team_job_and_run_pages(runtime: LocalRuntime) -> None:
    at = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
    body = {
        "schedule": {"expression": f"at({at:%Y-%m-%dT%H:%M:%S})"},
        "target": {"type": "lambda", "function": "jobsched-example-echo"},
    }
    call(runtime, "PUT", "/teams/e2e/jobs/shown", body)
    run_id = f"{at:%Y%m%dT%H%M%SZ}"
    wait_for(finished(runtime, "shown", run_id))
    status, index = page_of(runtime, "/console")
    assert status == 200 and 'href="/console/teams/e2e"' in index
    status, team = page_of(runtime, "/console/teams/e2e")
    assert status == 200 and 'href="/console/teams/e2e/jobs/shown"' in team and "<script" not in team
    assert "#1a7f37" in team and "succeeded" in team, "the run in the strip: colour, symbol and title"
    assert 'href="/console/teams/e2e/timeline"' in team
    status, timeline = page_of(runtime, "/console/teams/e2e/timeline?days=1")
    assert status == 200 and 'href="/console/teams/e2e/jobs/shown"' in timeline and "<script" not in timeline
    assert f"{at:%Y-%m-%dT%H:%M:%SZ} succeeded" in timeline, "the run in its job's row, its time on hover"
    status, job = page_of(runtime, "/console/teams/e2e/jobs/shown?days=2")
    assert status == 200 and f'href="/console/teams/e2e/jobs/shown/runs/{run_id}"' in job and "<svg" in job
    status, run = page_of(runtime, f"/console/teams/e2e/jobs/shown/runs/{run_id}")
    assert status == 200 and "SUCCEEDED" in run and "<script" not in run
    assert page_of(runtime, "/console/teams/e2e/jobs/nope")[0] == 404
    status, incidents = page_of(runtime, "/console/incidents")
    assert status == 200 and "Open incidents" in incidents and "<script" not in incidents


def post_form(
    runtime: LocalRuntime, fields: dict[str, str], *, team: str, origin: str | None = None
) -> tuple[int, str]:
    """The confirmation form posted as a browser posts it: with its page's Origin (or the one given)."""
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Jobsched-Principal": TEAM_PATTERN.format(team=team),
        "Origin": origin or runtime.api_url,
    }
    response = HTTP.request("POST", runtime.api_url + "/console/act", body=urlencode(fields), headers=headers)
    return response.status, response.data.decode()


def test_the_consoles_buttons_confirm_then_act_as_the_caller_for_their_own_team_only(runtime: LocalRuntime) -> None:
    body = {"schedule": {"expression": "0 3 * * *"}, "target": {"type": "lambda", "function": "jobsched-example-echo"}}
    assert call(runtime, "PUT", "/teams/e2e/jobs/buttons", body)[0] in (200, 201)
    _, team = page_of(runtime, "/console/teams/e2e")
    [pause_link] = re.findall(r'href="(/console/act\?action=pause&amp;job=e2e%2Fbuttons)"', team)
    status, confirm = page_of(runtime, html.unescape(pause_link))
    assert status == 200 and '<form method="post" action="/console/act">' in confirm and 'name="reason"' in confirm
    assert "<script" not in confirm
    pause = {"action": "pause", "job": "e2e/buttons", "reason": "migrating the database"}
    # Another team's member, and another site's page, are refused; nothing changes.
    assert post_form(runtime, pause, team="other")[0] == 403
    assert post_form(runtime, pause, team="e2e", origin="https://evil.example")[0] == 403
    assert call(runtime, "GET", "/teams/e2e/jobs/buttons")[1]["state"] == "ACTIVE"
    status, done = post_form(runtime, pause, team="e2e")
    assert status == 200 and "Paused e2e/buttons" in done, done
    assert call(runtime, "GET", "/teams/e2e/jobs/buttons")[1]["state"] == "PAUSED"
    # A reason longer than the API allows: refused, the field named.
    status, refused = post_form(runtime, {"action": "resume", "job": "e2e/buttons", "reason": "x" * 501}, team="e2e")
    assert status == 422 and "reason" in refused
    # The job page now offers resume; the action is audited under the caller's ARN.
    assert "action=resume" in page_of(runtime, "/console/teams/e2e/jobs/buttons")[1]
    assert post_form(runtime, {"action": "resume", "job": "e2e/buttons"}, team="e2e")[0] == 200
    _, history = call(runtime, "GET", "/teams/e2e/jobs/buttons/history")
    pause_entry = next(e for e in history["entries"] if e["action"] == "pause")
    assert pause_entry["principal"] == TEAM_PATTERN.format(team="e2e") and pause_entry["reason"] == pause["reason"]


def seed_a_week_of_history(runtime: LocalRuntime, team: str) -> None:
    """A team whose pages look like a working week: four jobs, three days of runs of every outcome, written
    straight to the local runs table as the worker would have finished them (real time cannot wait days)."""
    from jobsched.adapters.aws.runs_store import RunsStore
    from jobsched.core.runs import RunMessage, RunStatus
    from jobsched.core.settings import Settings

    echo = {"type": "lambda", "function": "jobsched-example-echo"}
    now = datetime.now(UTC)
    dark = (now - timedelta(days=1)).replace(hour=1, minute=0, second=0, microsecond=0)  # yesterday 01:00-05:00
    blackout = {"start": f"{dark:%Y-%m-%dT%H:%M:%SZ}", "end": f"{dark + timedelta(hours=4):%Y-%m-%dT%H:%M:%SZ}"}
    # name: (schedule, share succeeded, share failed; the rest time out)
    jobs: dict[str, tuple[dict[str, Any], float, float]] = {
        "checkout-sync": ({"expression": "0 * * * *"}, 0.97, 0.02),
        "inventory-export": ({"expression": "30 * * * *", "blackouts": [blackout]}, 0.75, 0.2),
        "price-feed": ({"expression": "15 */2 * * *"}, 0.9, 0.05),
        "ledger-close": ({"expression": "45 */3 * * *"}, 0.5, 0.45),
    }
    runs = RunsStore(Settings.from_env().runs_table)
    rng = random.Random(18)
    for name, (schedule, ok, failed) in jobs.items():
        created, _ = call(
            runtime, "PUT", f"/teams/{team}/jobs/{name}", {"schedule": schedule, "target": echo}, team=team
        )
        assert created in (200, 201)
        stored = call(runtime, "GET", f"/teams/{team}/jobs/{name}", team=team)[1]
        minute, hours = schedule["expression"].split()[:2]
        every = int(hours[2:]) if hours.startswith("*/") else 1
        for hour in range(72, 1, -1):
            at = (now - timedelta(hours=hour)).replace(minute=int(minute), second=0, microsecond=0)
            if at.hour % every or (name == "inventory-export" and dark <= at < dark + timedelta(hours=4)):
                continue  # not an instant of the schedule, or in the blackout
            draw = rng.random()
            status = (
                RunStatus.SUCCEEDED if draw < ok else RunStatus.FAILED if draw < ok + failed else RunStatus.TIMED_OUT
            )
            attempt = 2 if status is RunStatus.SUCCEEDED and rng.random() < 0.08 else 1
            message = RunMessage.scheduled(
                job=f"{team}/{name}", team=team, at=at, fire_at=at, spec_version=stored["version"]
            ).model_copy(update={"attempt": attempt})
            late = timedelta(milliseconds=rng.choice([120, 300, 800, 2_500, 45_000, 95_000]))
            error = {RunStatus.FAILED: "HTTP 503 from the warehouse API", RunStatus.TIMED_OUT: "no answer in 300 s"}
            started = at + late
            runs.create(
                message, status=RunStatus.RUNNING, now=started, retention=timedelta(days=30), lease_until=started
            )
            took = timedelta(seconds=rng.randint(2, 90))
            key = f"{team}/{name}"
            runs.finish(
                key, message.run_id, attempt=attempt, status=status, now=started + took, error=error.get(status)
            )


def test_the_console_looks_right_in_a_browser(runtime: LocalRuntime, tmp_path: Path) -> None:
    """Screenshots in headless Chromium of the team, job and DAG run views. UPDATE_SCREENSHOTS=1 keeps them
    as the README's reference pictures (docs/console/)."""
    browser = chromium()
    flaky = {"type": "lambda", "function": "jobsched-example-flaky", "payload": {"fail_times": 1}}
    echo = {"type": "lambda", "function": "jobsched-example-echo"}
    body = {
        "retry": {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}},
        "dag": {
            "tasks": [
                {"name": "extract", "target": echo},
                {"name": "transform", "depends_on": ["extract"], "target": flaky},
                {"name": "enrich", "depends_on": ["extract"], "target": echo},
                {"name": "load", "depends_on": ["transform", "enrich"], "target": echo},
            ]
        },
    }
    call(runtime, "PUT", "/teams/e2e/jobs/pipeline", body)
    run = call(runtime, "POST", "/teams/e2e/jobs/pipeline/trigger")[1]
    wait_for(finished(runtime, "pipeline", run["run_id"]), 60)
    keep = Path(__file__).parents[2] / "docs" / "console" if os.environ.get("UPDATE_SCREENSHOTS") else tmp_path
    keep.mkdir(parents=True, exist_ok=True)
    seed_a_week_of_history(runtime, "shop")
    for name, path in (
        ("team", "/console/teams/shop"),
        ("job", "/console/teams/shop/jobs/inventory-export?days=3"),
        ("team-timeline", "/console/teams/shop/timeline?days=3"),
        ("dag-run", f"/console/teams/e2e/jobs/pipeline/runs/{run['run_id']}"),
    ):
        # The browser shows the console key, as the link make run prints does.
        keyed = f"{path}{'&' if '?' in path else '?'}key={runtime.gateway.console_key}"
        picture = screenshot(browser, runtime.api_url + keyed, keep / f"{name}.png")
        assert picture.startswith(b"\x89PNG") and len(picture) > 15_000, f"{name}: a page with content, not blank"


def test_each_console_page_answers_what_its_cli_twin_answers(runtime: LocalRuntime) -> None:
    """#46, read in Chromium: the job page has the spec, next fires, triggers and its runs' status, duration and
    trigger (`jobsched get job`, `jobsched runs`); the DAG run page every task by its whole name with its output
    or why it waits (`jobsched run`); incidents link the run they are about."""
    browser = chromium()
    echo = {"type": "lambda", "function": "jobsched-example-echo", "payload": {"says": "hello from extract"}}
    body = {
        "schedule": {"expression": "0 4 * * *", "timezone": "Europe/Berlin"},
        "triggers": [{"event": {"pattern": {"source": ["e2e.parity"]}}}],
        "dag": {
            "tasks": [
                {"name": "extract-the-whole-warehouse-nightly", "target": echo},
                {"name": "load", "depends_on": ["extract-the-whole-warehouse-nightly"], "target": echo},
            ]
        },
    }
    assert call(runtime, "PUT", "/teams/e2e/jobs/parity", body)[0] in (200, 201)
    run = call(runtime, "POST", "/teams/e2e/jobs/parity/trigger")[1]
    wait_for(finished(runtime, "parity", run["run_id"]), 60)
    key = f"key={runtime.gateway.console_key}"
    job_page = rendered_text(browser, f"{runtime.api_url}/console/teams/e2e/jobs/parity?{key}")
    cli = str(Path(sys.executable).with_name("jobsched"))
    shown = subprocess.run(
        [cli, "get", "job", "e2e/parity", "--api", runtime.api_url, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    twin = json.loads(shown.stdout)
    assert twin["next_fire_times"][0] in job_page, job_page[:2000]  # the same next fire
    assert "0 4 * * * (Europe/Berlin)" in job_page and "events on bus default" in job_page
    assert "Spec" in job_page and "extract-the-whole-warehouse-nightly" in job_page
    assert f"SUCCEEDED {run['run_id']} 1 manual" in job_page, job_page  # status word, run, attempt, trigger
    run_page = rendered_text(browser, f"{runtime.api_url}/console/teams/e2e/jobs/parity/runs/{run['run_id']}?{key}")
    listed = subprocess.run(
        [cli, "run", "e2e/parity", run["run_id"], "--api", runtime.api_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0 and "extract-the-whole-warehouse-nightly" in listed.stdout, listed.stdout
    assert "extract-the-whole-warehouse-nightly SUCCEEDED 1" in run_page, run_page  # the whole name
    assert "hello from extract" in run_page  # its output, as `jobsched run -o json` has it


# ------------------------------------------------------------------ what the local stack trusts (#26)
# Through the real local gateway: another website in the developer's browser, a DNS-rebinding name, and one
# team's member looking at another team's console pages. In this module, not one of its own: two local stacks
# in one test run starve moto's Step Functions interpreter of the DAG tests' task messages.

TRUST_HTTP = urllib3.PoolManager(retries=False)
FORM = "application/x-www-form-urlencoded"
NIGHTLY = {"schedule": {"expression": "0 3 * * *"}, "target": {"type": "lambda", "function": "jobsched-example-echo"}}


@pytest.fixture(scope="module")
def teams(runtime: LocalRuntime) -> LocalRuntime:
    """Teams alpha and beta with a job each; beta's paused with a reason only beta may read."""
    for team in ("alpha", "beta"):
        assert as_team(runtime, team, "PUT", f"/teams/{team}/jobs/nightly", NIGHTLY)[0] in (200, 201)
    paused = as_team(runtime, "beta", "POST", "/teams/beta/jobs/nightly/pause", {"reason": "beta's secret INC-9"})
    assert paused[0] == 200
    return runtime


def as_team(runtime: LocalRuntime, team: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", "X-Jobsched-Principal": TEAM_PATTERN.format(team=team)}
    response = TRUST_HTTP.request(
        method, runtime.api_url + path, body=json.dumps(body) if body else None, headers=headers
    )
    return response.status, json.loads(response.data) if response.data else None


def send(
    runtime: LocalRuntime, method: str, path: str, headers: dict[str, str], body: str = ""
) -> urllib3.BaseHTTPResponse:
    return TRUST_HTTP.request(method, runtime.api_url + path, body=body or None, headers=headers)


def alpha_history(runtime: LocalRuntime) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = as_team(runtime, "alpha", "GET", "/teams/alpha/jobs/nightly/history")[1]["entries"]
    return entries


@pytest.mark.usefixtures("teams")
@pytest.mark.parametrize("action", ["trigger", "resume", "pause"])
def test_another_websites_form_post_changes_nothing(runtime: LocalRuntime, action: str) -> None:
    """A cross-site form post with no fields: 202 and audited as platform-admin before."""
    before = alpha_history(runtime)
    evil = {"Origin": "http://evil.example", "Content-Type": FORM, "Sec-Fetch-Site": "cross-site"}
    response = send(runtime, "POST", f"/teams/alpha/jobs/nightly/{action}", evil)
    assert response.status == 403 and json.loads(response.data)["error"]["code"] == "cross_site"
    # The same post from a browser that sends no Origin (fetch metadata only): refused too.
    response = send(
        runtime, "POST", f"/teams/alpha/jobs/nightly/{action}", {"Content-Type": FORM, "Sec-Fetch-Site": "cross-site"}
    )
    assert response.status == 403
    assert alpha_history(runtime) == before
    assert all(entry["principal"] != DEFAULT_ADMIN for entry in alpha_history(runtime))


@pytest.mark.usefixtures("teams")
def test_a_dns_rebinding_name_is_refused_whatever_origin_it_brings(runtime: LocalRuntime) -> None:
    port = runtime.port
    rebound = {"Host": f"rebind.attacker.test:{port}", "Origin": f"http://rebind.attacker.test:{port}"}
    console = send(
        runtime,
        "POST",
        "/console/act",
        {**rebound, "Content-Type": FORM},
        urlencode({"action": "pause", "job": "alpha/nightly", "reason": "x"}),
    )
    assert console.status == 403 and b"Paused" not in console.data
    api = send(
        runtime,
        "POST",
        "/teams/alpha/jobs/nightly/pause",
        {**rebound, "Content-Type": "application/json"},
        '{"reason": "x"}',
    )
    assert api.status == 403 and json.loads(api.data)["error"]["code"] == "host_not_allowed"
    assert send(runtime, "GET", "/teams/alpha/jobs", {"Host": f"rebind.attacker.test:{port}"}).status == 403
    assert as_team(runtime, "alpha", "GET", "/teams/alpha/jobs/nightly")[1]["state"] == "ACTIVE"


@pytest.mark.usefixtures("teams")
def test_a_console_post_without_an_origin_is_refused(runtime: LocalRuntime) -> None:
    headers = {"Content-Type": FORM, "X-Jobsched-Principal": TEAM_PATTERN.format(team="alpha")}
    form = urlencode({"action": "pause", "job": "alpha/nightly", "reason": "no origin"})
    assert send(runtime, "POST", "/console/act", headers, form).status == 403
    assert send(runtime, "POST", "/console/act", {**headers, "Origin": runtime.api_url}, form).status == 200
    assert as_team(runtime, "alpha", "POST", "/teams/alpha/jobs/nightly/resume")[0] == 200


@pytest.mark.usefixtures("teams")
def test_a_browser_is_never_the_admin_by_default(runtime: LocalRuntime) -> None:
    browser = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}
    api = send(runtime, "GET", "/teams/beta/jobs", browser)
    assert api.status == 401
    page = send(runtime, "GET", "/console/teams/beta", browser)
    assert page.status == 401 and b"INC-9" not in page.data
    # The link make run prints carries the key; the page then keeps it in a SameSite=Strict cookie.
    keyed = send(runtime, "GET", f"/console/teams/beta?key={runtime.gateway.console_key}", browser)
    assert keyed.status == 200 and b"INC-9" in keyed.data
    cookie = keyed.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    again = send(runtime, "GET", "/console/teams/beta", {**browser, "Cookie": cookie.split(";", 1)[0]})
    assert again.status == 200 and b"INC-9" in again.data
    assert send(runtime, "GET", "/console/teams/beta?key=guessed", browser).status == 401
    assert (
        keyed.headers["X-Frame-Options"] == "DENY"
        and "frame-ancestors 'none'" in keyed.headers["Content-Security-Policy"]
    )


@pytest.mark.usefixtures("teams")
@pytest.mark.parametrize(
    "path",
    [
        "/console/teams/beta",
        "/console/teams/beta/timeline",
        "/console/teams/beta/jobs/nightly",
        "/console/teams/beta/jobs/nightly/runs/20270104T030000Z",
        "/console/act?action=resume&job=beta%2Fnightly",
    ],
)
def test_a_member_of_one_team_sees_no_console_page_of_another(runtime: LocalRuntime, path: str) -> None:
    alpha = {"X-Jobsched-Principal": TEAM_PATTERN.format(team="alpha")}
    page = send(runtime, "GET", path, alpha)
    assert (
        page.status == 403
        and b"INC-9" not in page.data
        and b"nightly" not in page.data.split(b"<body", 1)[-1].split(b"not a member", 1)[-1]
    )
    assert as_team(runtime, "alpha", "GET", "/teams/beta/jobs/nightly")[0] == 403  # as the API answers


@pytest.mark.usefixtures("teams")
def test_the_console_index_and_incidents_list_only_the_callers_teams(runtime: LocalRuntime) -> None:
    alpha = {"X-Jobsched-Principal": TEAM_PATTERN.format(team="alpha")}
    index = send(runtime, "GET", "/console", alpha).data.decode()
    assert "/console/teams/alpha" in index and "/console/teams/beta" not in index
    assert send(runtime, "GET", "/console/teams/alpha", alpha).status == 200
    admin = send(runtime, "GET", "/console", {"X-Jobsched-Principal": DEFAULT_ADMIN}).data.decode()
    assert "/console/teams/beta" in admin


@pytest.mark.usefixtures("teams")
@pytest.mark.parametrize("days", ["\u00b2", "9" * 5000, "-1", "1e9"])
def test_a_days_value_that_is_no_number_shows_the_default_range(runtime: LocalRuntime, days: str) -> None:
    alpha = {"X-Jobsched-Principal": TEAM_PATTERN.format(team="alpha")}
    page = send(runtime, "GET", f"/console/teams/alpha/timeline?{urlencode({'days': days})}", alpha)
    assert page.status == 200 and b"nightly" in page.data


def jobsched(runtime: LocalRuntime, *args: str) -> str:
    """The CLI as a user types it, against this runtime's state directory."""
    command = [str(Path(sys.executable).with_name("jobsched")), *args, "--state-dir", str(runtime.state_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def put_order_event(runtime: LocalRuntime, detail: dict[str, Any]) -> str:
    """``jobsched local put-event`` as typed, with the orders example's source and detail type."""
    return jobsched(
        runtime,
        "local",
        "put-event",
        "--source",
        "com.acme.orders",
        "--detail-type",
        "OrderBatchReady",
        "--detail",
        json.dumps(detail),
    )


def example_runs(runtime: LocalRuntime, job: str) -> list[dict[str, Any]]:
    status, body = call(runtime, "GET", f"/teams/examples/jobs/{job}/runs?limit=100", team="examples")
    assert status == 200, body
    return list(body["runs"])


def test_an_event_put_with_the_cli_and_an_object_landing_start_the_example_jobs(runtime: LocalRuntime) -> None:
    out = put_order_event(runtime, {"batch": 7})
    assert out.startswith("event ")
    put_order_event(runtime, {"batch": 0})  # the pattern wants batch > 0: EventBridge never delivers it
    ran = wait_for(lambda: [r for r in example_runs(runtime, "orders-ready") if r["status"] == "SUCCEEDED"])
    assert len(ran) == 1 and ran[0]["trigger"] == "event"
    assert ran[0]["trigger_detail"]["source"] == "com.acme.orders"
    for key in ("exports/2027-01-04.csv", "exports/2027-01-04.csv", "exports/readme.txt"):
        jobsched(runtime, "local", "put-object", "examples-landing", key, "--body", "id,total\n1,10\n")
    landed = wait_for(
        lambda: (
            len([r for r in example_runs(runtime, "landing-exports") if r["status"] == "SUCCEEDED"]) == 2
            and example_runs(runtime, "landing-exports")
        )
    )
    assert {r["trigger_detail"]["key"] for r in landed if r["trigger"] == "event"} == {"exports/2027-01-04.csv"}
    time.sleep(2)  # nothing more comes: the .txt object matched no rule, and no delivery made a second run
    assert len(example_runs(runtime, "orders-ready")) == 1
    assert len([r for r in example_runs(runtime, "landing-exports") if r["trigger"] == "event"]) == 2


def test_a_job_after_another_starts_when_the_upstream_run_finishes(runtime: LocalRuntime) -> None:
    echo = {"type": "lambda", "function": "jobsched-example-echo"}
    assert call(runtime, "PUT", "/teams/e2e/jobs/upstream", {"target": echo})[0] in (200, 201)
    after = {"target": echo, "triggers": [{"after": {"job": "e2e/upstream"}}]}
    assert call(runtime, "PUT", "/teams/e2e/jobs/downstream", after)[0] in (200, 201)
    status, started = call(runtime, "POST", "/teams/e2e/jobs/upstream/trigger", {})
    assert status in (200, 201, 202), started

    def downstream_runs() -> list[dict[str, Any]]:
        return list(call(runtime, "GET", "/teams/e2e/jobs/downstream/runs?limit=10")[1]["runs"])

    ran = wait_for(lambda: [r for r in downstream_runs() if r["status"] == "SUCCEEDED"], seconds=60)
    (run,) = ran
    assert run["trigger_detail"]["upstreams"][0]["run_id"] == started["run_id"]
    upstream = call(runtime, "GET", f"/teams/e2e/jobs/upstream/runs/{started['run_id']}")[1]
    assert run["scheduled_at"] == upstream["scheduled_at"]  # the upstream's logical instant
    time.sleep(2)
    assert len(downstream_runs()) == 1


def test_objects_landing_within_a_window_start_one_batched_run(runtime: LocalRuntime) -> None:
    """Three objects put within milliseconds of each other (boto3 against the stack's S3, as a team's uploader
    does; `jobsched local put-object` runs as typed in the test before), well within the trigger's 10 s window."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=runtime.endpoint, region_name="us-east-1")
    keys = [f"batches/part-{part}.csv" for part in (1, 2, 3)]
    for key in keys:
        s3.put_object(Bucket="examples-landing", Key=key, Body=b"id\n1\n")

    def batched() -> list[dict[str, Any]]:
        runs = [r for r in example_runs(runtime, "landing-batches") if r["status"] == "SUCCEEDED"]
        return runs if sum(len(batch_keys(run)) for run in runs) >= len(keys) else []

    def batch_keys(run: dict[str, Any]) -> list[str]:
        path = f"/teams/examples/jobs/landing-batches/runs/{run['run_id']}/events"
        status, listed = call(runtime, "GET", path, team="examples")
        assert status == 200, listed
        return [e["key"] for e in listed["events"]]

    ran = wait_for(batched, seconds=60)
    assert len(ran) == 1 and ran[0]["trigger_detail"]["batch"]["number"] >= 1
    assert sorted(batch_keys(ran[0])) == keys


def test_events_that_arrive_while_the_events_function_is_down_run_when_it_is_back(runtime: LocalRuntime) -> None:
    before = len(example_runs(runtime, "orders-ready"))
    runtime.pause_source("jobsched-local-Events")
    try:
        for batch in (11, 12, 13):
            put_order_event(runtime, {"batch": batch})
        time.sleep(3)
        assert len(example_runs(runtime, "orders-ready")) == before  # waiting on the intake queue, not lost
    finally:
        runtime.pause_source("jobsched-local-Events", paused=False)
    wait_for(
        lambda: len([r for r in example_runs(runtime, "orders-ready") if r["status"] == "SUCCEEDED"]) == before + 3
    )


def test_the_nightly_dag_waits_for_its_file_and_runs_when_it_lands(runtime: LocalRuntime) -> None:
    """The reference's example (examples/jobs/nightly-waits-for-file.yaml) under make run: its first task waits
    for the day's _SUCCESS marker, holding nothing, and the object landing wakes it through S3's event."""
    base = "/teams/examples/jobs/nightly-waits-for-file"
    status, started = call(runtime, "POST", f"{base}/trigger", {}, team="examples")
    assert status in (200, 201, 202), started
    run_path = f"{base}/runs/{started['run_id']}"
    # Its schedule (every 5 minutes under make run) may have started a run that still waits: the trigger is then
    # skipped (overlap: skip) and that run is the one to watch.
    found = wait_for(
        lambda: (run := call(runtime, "GET", run_path, team="examples")[1]).get("status") != "SCHEDULED" and run
    )
    if found["status"] == "SKIPPED":
        running = call(runtime, "GET", f"{base}/runs?status=RUNNING", team="examples")[1]["runs"]
        started = running[0]
        run_path = f"{base}/runs/{started['run_id']}"

    def first_task() -> dict[str, Any] | None:
        tasks = call(runtime, "GET", run_path, team="examples")[1].get("tasks") or []
        return next((task for task in tasks if task["name"] == "wait-for-file"), None)

    waiting = wait_for(lambda: (task := first_task()) is not None and task["status"] == "WAITING", seconds=60)
    assert waiting
    day = parse_instant(started["scheduled_at"]).astimezone(ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d")
    landed = time.monotonic()
    jobsched(runtime, "local", "put-object", "examples-landing", f"exports/{day}/_SUCCESS", "--body", "")
    done = wait_for(lambda: call(runtime, "GET", run_path, team="examples")[1]["status"] == "SUCCEEDED", seconds=90)
    assert done and time.monotonic() - landed < 60  # woken by the event, not by a poll minutes later
    tasks = call(runtime, "GET", run_path, team="examples")[1]["tasks"]
    assert [(task["name"], task["status"]) for task in tasks] == [
        ("wait-for-file", "SUCCEEDED"),
        ("load", "SUCCEEDED"),
        ("report", "SUCCEEDED"),
    ]


def test_container_jobs_run_their_command_locally_and_end_by_the_tasks_exit_code(runtime: LocalRuntime) -> None:
    """examples/containers: RunTask goes to moto, the runtime's container agent runs the command as a process,
    and the task's state change (through the deployment's rule and the intake) ends the run."""

    def trigger(name: str) -> str:
        status, run = call(runtime, "POST", f"/teams/examples/jobs/{name}/trigger", {}, team="examples")
        assert status in (200, 201, 202), run
        return f"/teams/examples/jobs/{name}/runs/{run['run_id']}"

    succeeded, failed = trigger("nightly-export"), trigger("failing-export")
    slow, resumable = trigger("slow-export"), trigger("resumable-export")
    shards, broken = trigger("reindex-shards"), trigger("failing-reindex")

    def ended(path: str) -> dict[str, Any] | None:
        run = call(runtime, "GET", path, team="examples")[1]
        return run if run.get("status") in ("SUCCEEDED", "FAILED", "TIMED_OUT") else None

    good = wait_for(lambda: ended(succeeded), seconds=60)
    bad = wait_for(lambda: ended(failed), seconds=60)
    assert good["status"] == "SUCCEEDED" and "export=0" in (good.get("output") or ""), good
    # Its container's own line (awslogs, played by the agent) among the scheduler's, in the run's logs.
    logs = call(runtime, "GET", f"{succeeded}/logs", team="examples")[1]["lines"]
    said = [line for line in logs if line["component"] == "container:export"]
    assert said and said[0]["message"].startswith("exporting "), logs
    assert bad["status"] == "FAILED" and "export exited 3" in (bad.get("error") or ""), bad
    # Batch: an array job of three children succeeds; a job exiting 2 fails with its code.
    reindexed = wait_for(lambda: ended(shards), seconds=60)
    assert reindexed["status"] == "SUCCEEDED" and reindexed["attempt"] == 1, json.dumps(reindexed)
    failed_job = wait_for(lambda: ended(broken), seconds=60)
    assert failed_job["status"] == "FAILED" and "job exited 2" in (failed_job.get("error") or ""), failed_job
    # Killed after its third partition, retried with the checkpoint, resumed at the fourth.
    resumed = wait_for(lambda: ended(resumable), seconds=60)
    assert resumed["status"] == "SUCCEEDED" and resumed["attempt"] == 2, json.dumps(resumed)
    assert resumed["progress"]["checkpoint"] == {"partition": 6}, resumed
    assert resumed["progress"]["message"] == "partition 6 of 6, resumed after 3 (attempt 2)", resumed
    # Past its 15 s timeout: TIMED_OUT, and its task stopped (the process got SIGTERM).
    timed_out = wait_for(lambda: ended(slow), seconds=60)
    assert timed_out["status"] == "TIMED_OUT", timed_out
    assert timed_out["error"] == "timed out after 15s: the task was stopped", timed_out  # not "attempt 1 lost"
    stopped = wait_for(
        lambda: runtime.container_agent.finished.get(("examples/slow-export", slow.rsplit("/", 1)[-1])), seconds=30
    )
    assert stopped == ("UserInitiated", 143), stopped


def test_the_container_examples_apply_as_written_and_a_team_makes_its_bucket_with_one_command(
    runtime: LocalRuntime,
) -> None:
    """#46: the container example files named subnets that existed only after `make run` rewrote them, and no
    command made a team's bucket (a missing one was a Python traceback)."""
    cli = str(Path(sys.executable).with_name("jobsched"))
    root = Path(__file__).resolve().parents[2]
    applied = subprocess.run(
        [cli, "apply", "-f", "examples/containers/", "--api", runtime.api_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=root,
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    lines = applied.stdout.splitlines()
    assert len(lines) == 6 and all(line.endswith(": unchanged") for line in lines), applied.stdout  # as registered
    made = jobsched(runtime, "local", "create-bucket", "e2e", "e2e-drops")
    assert made.strip() == "bucket e2e-drops: team e2e (jobsched-team=e2e), events to EventBridge on"
    body = {
        "triggers": [{"s3": {"bucket": "e2e-drops", "prefix": "in/"}}],
        "target": {"type": "lambda", "function": "jobsched-example-echo"},
    }
    status, stored = call(runtime, "PUT", "/teams/e2e/jobs/drops", body)
    assert status == 201 and stored["warnings"] is None, stored  # tagged, sending its events: nothing to warn of
    jobsched(runtime, "local", "put-object", "e2e-drops", "in/first.csv", "--body", "id\n1\n")
    wait_for(
        lambda: [r for r in call(runtime, "GET", "/teams/e2e/jobs/drops/runs")[1]["runs"] if r["status"] == "SUCCEEDED"]
    )
    command = [cli, "local", "put-object", "no-such-bucket", "x", "--state-dir", str(runtime.state_dir)]
    missing = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr, missing.stderr
    assert "create it with `jobsched local create-bucket TEAM no-such-bucket`" in missing.stderr
