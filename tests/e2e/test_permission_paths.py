"""The paths a team reaches that the examples do not, through the local runtime as a team would: targets the team
owns and the platform shares (queues, state machines, buses), secrets and parameters in an HTTP target's headers, a
page to the team's own topic, each priority class, and a DAG created, changed, cancelled and deleted.

Each test proves its path works; with ``make iam`` (and ``make test``) every AWS call they cause is also judged
against the template (infra/iam): these are the calls that prove the grants the examples never use.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import urlencode

import boto3
import pytest

from infra.local.runtime import LocalRuntime
from infra.local.stack import TEAM_PATTERN
from jobsched.core.names import OWNER_TAG, SHARED_TAG
from tests.e2e import running_stack
from tests.e2e.test_local_runtime import HTTP, call, finished, run_of, wait_for

TEAM = "perm"
ECHO = {"type": "lambda", "function": "jobsched-example-echo"}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    yield from running_stack(tmp_path_factory.mktemp("paths"), tick_seconds=1.0, examples=True)


def aws(runtime: LocalRuntime, service: str) -> Any:
    return boto3.client(service, endpoint_url=runtime.endpoint, region_name="us-east-1")


def put_and_trigger(runtime: LocalRuntime, job: str, body: dict[str, Any], team: str = TEAM) -> str:
    status, answer = call(runtime, "PUT", f"/teams/{team}/jobs/{job}", body, team=team)
    assert status in (200, 201), answer
    status, run = call(runtime, "POST", f"/teams/{team}/jobs/{job}/trigger", {}, team=team)
    assert status in (200, 201, 202), run
    return str(run["run_id"])


def started(runtime: LocalRuntime, job: str, run_id: str, team: str = TEAM) -> dict[str, Any]:
    """The run once its target has been reached (a state machine's run goes on after that)."""

    def reached() -> Any:
        run = run_of(runtime, job, run_id, team)
        return run if run["status"] in ("RUNNING", "SUCCEEDED") else None

    found: dict[str, Any] = wait_for(reached, 60)
    return found


def test_targets_the_team_owns_and_the_platform_shares_are_reached_as_the_team(runtime: LocalRuntime) -> None:
    sqs, states, events = aws(runtime, "sqs"), aws(runtime, "stepfunctions"), aws(runtime, "events")
    machine = json.dumps({"StartAt": "done", "States": {"done": {"Type": "Pass", "End": True}}})
    targets: dict[str, dict[str, Any]] = {}
    for owner, tag in (("own", {OWNER_TAG: TEAM}), ("shared", {SHARED_TAG: "true"})):
        queue = sqs.create_queue(QueueName=f"perm-{owner}", tags=tag)["QueueUrl"]
        arn = states.create_state_machine(
            name=f"perm-{owner}",
            definition=machine,
            roleArn="arn:aws:iam::123456789012:role/perm-machine",
            tags=[{"key": k, "value": v} for k, v in tag.items()],
        )["stateMachineArn"]
        events.create_event_bus(Name=f"perm-{owner}", Tags=[{"Key": k, "Value": v} for k, v in tag.items()])
        targets[f"queue-{owner}"] = {"type": "sqs", "queue_url": queue, "payload": {"to": owner}}
        targets[f"machine-{owner}"] = {"type": "stepfunctions", "state_machine_arn": arn, "timeout": "5m"}
        targets[f"bus-{owner}"] = {"type": "eventbridge", "bus": f"perm-{owner}", "source": "perm.jobs"}
    runs = {job: put_and_trigger(runtime, job, {"target": target}) for job, target in targets.items()}
    for job, run_id in runs.items():
        run = started(runtime, job, run_id)
        assert run["attempt"] == 1 and not run.get("error"), run
    for owner in ("own", "shared"):
        url = sqs.get_queue_url(QueueName=f"perm-{owner}")["QueueUrl"]
        body = json.loads(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"][0]["Body"])
        assert body["payload"] == {"to": owner}, body


class Recorded(BaseHTTPRequestHandler):
    headers_seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        self.headers_seen.append(dict(self.headers))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"ok": true}')

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_an_http_targets_secret_headers_are_read_as_the_team(runtime: LocalRuntime) -> None:
    aws(runtime, "secretsmanager").create_secret(
        Name="perm/api-key", SecretString=json.dumps({"key": "s3cr3t"}), Tags=[{"Key": OWNER_TAG, "Value": TEAM}]
    )
    aws(runtime, "ssm").put_parameter(
        Name="/perm/tenant", Value="tenant-7", Type="String", Tags=[{"Key": OWNER_TAG, "Value": TEAM}]
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        target = {
            "type": "http",
            "url": f"http://127.0.0.1:{server.server_address[1]}/hook",
            "secret_headers": {"X-Api-Key": "secretsmanager:perm/api-key#key", "X-Tenant": "ssm:/perm/tenant"},
        }
        run_id = put_and_trigger(runtime, "hook", {"target": target, "retry": {"max_attempts": 1}})
        done = wait_for(finished(runtime, "hook", run_id, TEAM), 60)
    finally:
        server.shutdown()
    assert done["status"] == "SUCCEEDED", done
    assert {"X-Api-Key": "s3cr3t", "X-Tenant": "tenant-7"}.items() <= Recorded.headers_seen[-1].items()


def test_a_page_to_the_teams_own_topic_is_published_as_the_team(runtime: LocalRuntime) -> None:
    sns, sqs = aws(runtime, "sns"), aws(runtime, "sqs")
    topic = sns.create_topic(Name="perm-oncall", Tags=[{"Key": OWNER_TAG, "Value": TEAM}])["TopicArn"]
    inbox = sqs.create_queue(QueueName="perm-oncall-inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn)
    body = {
        "target": {"type": "lambda", "function": "perm-not-deployed"},
        "retry": {"max_attempts": 1},
        "escalation": {"sns_topic": topic, "after_failures": 1},
    }
    run_id = put_and_trigger(runtime, "paged", body)
    assert wait_for(finished(runtime, "paged", run_id, TEAM), 60)["status"] == "FAILED"

    def paged() -> Any:
        return sqs.receive_message(QueueUrl=inbox, WaitTimeSeconds=1).get("Messages")

    message = json.loads(wait_for(paged, 60)[0]["Body"])
    assert "paged" in message["Message"], message
    # The console's drill button: a marked test page to the same topic, published as the team by the actions
    # function (its session of the targets role), and the deployment's topic for a job that names none.
    status, page = press(runtime, {"action": "page_test", "job": f"{TEAM}/paged"})
    assert status == 200 and "Test page delivered for perm/paged" in page and "delivered" in page, page
    drilled = json.loads(wait_for(paged, 60)[0]["Body"])
    assert drilled["Subject"].startswith("[jobsched, TEST]"), drilled
    assert call(runtime, "PUT", f"/teams/{TEAM}/jobs/unpaged", {"target": ECHO}, team=TEAM)[0] in (200, 201)
    status, page = press(runtime, {"action": "page_test", "job": f"{TEAM}/unpaged"})
    assert status == 200 and "delivered" in page, page


def test_each_priority_class_goes_through_its_own_queue(runtime: LocalRuntime) -> None:
    """High (granted to payments locally) and low, scheduled and triggered, failed once and retried: the
    dispatcher's, the API's and the worker's sends to each class's queue."""
    at = (datetime.now(UTC) + timedelta(seconds=5)).replace(microsecond=0)
    runs = {}
    for priority in ("high", "low"):  # both registered before their instant, each with a job after it
        body = {
            "schedule": {"expression": f"at({at:%Y-%m-%dT%H:%M:%S})"},
            "target": {"type": "lambda", "function": "jobsched-example-flaky", "payload": {"fail_times": 1}},
            "retry": {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}},
            "priority": priority,
        }
        runs[priority] = put_and_trigger(runtime, f"at-{priority}", body, team="payments")
        after = {"triggers": [{"after": {"job": f"payments/at-{priority}"}}], "target": ECHO, "priority": priority}
        assert call(runtime, "PUT", f"/teams/payments/jobs/after-{priority}", after, team="payments")[0] == 201
    for priority, triggered in runs.items():
        for run_id in (triggered, f"{at:%Y%m%dT%H%M%SZ}"):
            done = wait_for(finished(runtime, f"at-{priority}", run_id, "payments"), 60)
            assert done["status"] == "SUCCEEDED" and done["attempt"] == 2, done  # the retry in the same class
        job = call(runtime, "GET", f"/teams/payments/jobs/at-{priority}", team="payments")[1]
        assert job["spec"]["priority"] == priority, job

        def followed(priority: str = priority) -> Any:
            path = f"/teams/payments/jobs/after-{priority}/runs?status=SUCCEEDED"
            return len(call(runtime, "GET", path, team="payments")[1]["runs"]) >= 2

        wait_for(followed, 60)  # once after each of its upstream's two runs


def test_a_dag_is_created_changed_cancelled_and_deleted_with_its_state_machine(runtime: LocalRuntime) -> None:
    waits = {"type": "callback", "timeout": "5m"}  # holds no worker while it waits
    body: dict[str, Any] = {"dag": {"tasks": [{"name": "first", "target": ECHO}]}}
    assert call(runtime, "PUT", f"/teams/{TEAM}/jobs/flow", body, team=TEAM)[0] == 201
    body["dag"]["tasks"].append({"name": "slow", "depends_on": ["first"], "target": waits})
    status, changed = call(runtime, "PUT", f"/teams/{TEAM}/jobs/flow", body, team=TEAM)
    assert status == 200, changed
    run_id = call(runtime, "POST", f"/teams/{TEAM}/jobs/flow/trigger", {}, team=TEAM)[1]["run_id"]

    def slow_running() -> Any:
        tasks = {task["name"]: task["status"] for task in run_of(runtime, "flow", run_id, TEAM).get("tasks") or []}
        return tasks.get("slow") == "RUNNING"

    wait_for(slow_running, 60)
    status, cancelled = call(runtime, "POST", f"/teams/{TEAM}/jobs/flow/runs/{run_id}/cancel", {}, team=TEAM)
    assert status in (200, 202), cancelled
    assert wait_for(finished(runtime, "flow", run_id, TEAM), 60)["status"] == "CANCELLED"
    assert call(runtime, "DELETE", f"/teams/{TEAM}/jobs/flow", team=TEAM)[0] in (200, 204)
    machines = aws(runtime, "stepfunctions").list_state_machines()["stateMachines"]
    assert not [m for m in machines if TEAM in m["name"] and "flow" in m["name"]], machines


def press(runtime: LocalRuntime, fields: dict[str, str], team: str = TEAM) -> tuple[int, str]:
    """A console button's form, posted as the team's browser posts it."""
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Jobsched-Principal": TEAM_PATTERN.format(team=team),
        "Origin": runtime.api_url,
    }
    response = HTTP.request("POST", runtime.api_url + "/console/act", body=urlencode(fields), headers=headers)
    return response.status, response.data.decode()


def test_the_consoles_trigger_and_approval_act_through_the_actions_function(runtime: LocalRuntime) -> None:
    body = {
        "dag": {
            "tasks": [
                {"name": "ask", "target": {"type": "approval", "timeout": "10m", "message": "ship it?"}},
                {"name": "ship", "depends_on": ["ask"], "target": ECHO},
            ]
        }
    }
    assert call(runtime, "PUT", f"/teams/{TEAM}/jobs/gated", body, team=TEAM)[0] in (200, 201)
    status, page = press(runtime, {"action": "trigger", "job": f"{TEAM}/gated"})
    assert status == 202 and "Triggered perm/gated" in page, page

    def asking() -> Any:
        runs = call(runtime, "GET", f"/teams/{TEAM}/jobs/gated/runs", team=TEAM)[1]["runs"]
        for run in runs:
            tasks = {t["name"]: t["status"] for t in run_of(runtime, "gated", run["run_id"], TEAM).get("tasks") or []}
            if tasks.get("ask") == "RUNNING":
                return run["run_id"]
        return None

    run_id = wait_for(asking, 60)
    status, page = press(runtime, {"action": "approve", "job": f"{TEAM}/gated", "run_id": run_id, "task": "ask"})
    assert status in (200, 202) and "Approved" in page, page
    done = wait_for(finished(runtime, "gated", run_id, TEAM), 60)
    assert done["status"] == "SUCCEEDED", done


def test_the_dead_letter_queues_are_listed_and_redriven_by_the_api(runtime: LocalRuntime) -> None:
    """jobsched dlq: the API reads a dead-letter queue and sends its messages back (#49)."""
    from infra.local.stack import DEFAULT_ADMIN
    from jobsched.core.runs import RunMessage, parse_instant

    assert call(runtime, "PUT", f"/teams/{TEAM}/jobs/dead", {"target": ECHO}, team=TEAM)[0] in (200, 201)
    sqs = aws(runtime, "sqs")
    [dead_queue] = [url for url in sqs.list_queues()["QueueUrls"] if url.endswith("WorkNormal-dlq")]
    at = parse_instant("2027-01-04T10:00:00Z")
    message = RunMessage.scheduled(job=f"{TEAM}/dead", team=TEAM, at=at, fire_at=at, spec_version=1)
    sqs.send_message(QueueUrl=dead_queue, MessageBody=message.model_dump_json(exclude_none=True))
    sqs.send_message(QueueUrl=dead_queue, MessageBody="not a message")
    admin = {"Content-Type": "application/json", "X-Jobsched-Principal": DEFAULT_ADMIN}
    listed = HTTP.request("GET", runtime.api_url + "/dlq", headers=admin)
    assert listed.status == 200, listed.data
    normal = next(queue for queue in json.loads(listed.data) if queue["queue"] == "work-normal")
    assert normal["by_team"] == {TEAM: 1, "": 1}
    redriven = HTTP.request("POST", runtime.api_url + "/dlq/work-normal/redrive", body=b"{}", headers=admin)
    assert redriven.status == 200 and json.loads(redriven.data) == {"queue": "work-normal", "moved": 1, "left": 1}
