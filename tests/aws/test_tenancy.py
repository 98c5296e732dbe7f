"""Tenant isolation where runs execute: a team's runs reach only that team's resources (and shared targets).

Every test names the cross-team path it closes. "Nothing is called" is checked on the resource itself
(no message, no execution, no event, no page, no request) and on the run (FAILED, not retried, an error
naming the resource and the team).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from jobsched.adapters.aws.ownership import AwsTagReader, TeamSessions
from jobsched.core.names import OWNER_TAG, SHARED_TAG
from jobsched.core.runs import RunStatus
from jobsched.tenancy.ownership import OwnershipGuard, ResourceKind, ResourceRef
from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import ACCOUNT, REGION, Clock, Stack
from tests.helpers import RecordingServer, recording_server

A, B = "alpha", "bravo"


def owned(team: str) -> dict[str, str]:
    return {OWNER_TAG: team}


def tag_list(team: str, key: str = "Key", value: str = "Value") -> list[dict[str, str]]:
    return [{key: OWNER_TAG, value: team}]


def run_once(stack: Stack, clock: Clock, target: dict[str, Any], *, team: str = A, name: str = "job") -> Any:
    clock.set("2027-01-04T09:59:30Z")
    stack.register({"name": name, "team": team, "schedule": {"expression": "0 * * * *"}, "target": target})
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    [run] = stack.run_list(f"{team}/{name}")
    return run


def assert_refused(run: Any, resource: str, team: str = A) -> None:
    assert run.status is RunStatus.FAILED and run.attempt == 1, run
    assert run.error.startswith("not allowed: ") and resource in run.error and f"team '{team}'" in run.error, run.error


# ---------------------------------------------------------------------------- every target type


def test_a_team_cannot_invoke_another_teams_function(stack: Stack, clock: Clock) -> None:
    stack.function("bravo-billing", owned(B))
    stack.lambdas.functions["bravo-billing"] = lambda event: {"ran": True}
    run = run_once(stack, clock, {"type": "lambda", "function": "bravo-billing"})
    assert_refused(run, "Lambda function 'bravo-billing'")
    assert "belongs to another team" in run.error
    assert stack.lambdas.calls == [], "the function was not invoked"


def test_a_team_invokes_its_own_and_shared_functions(stack: Stack, clock: Clock) -> None:
    arn = stack.function("alpha-report", owned(A))
    stack.lambdas.functions["alpha-report"] = lambda event: {"ok": 1}
    assert run_once(stack, clock, {"type": "lambda", "function": arn}).status is RunStatus.SUCCEEDED
    assert run_once(stack, clock, {"type": "lambda", "function": "echo"}, name="shared").status is RunStatus.SUCCEEDED


def test_a_function_tagged_for_no_team_is_refused(stack: Stack, clock: Clock) -> None:
    stack.function("untagged", {"jobsched-target": "true"})  # the old, global tag opens nothing now
    stack.lambdas.functions["untagged"] = lambda event: {}
    run = run_once(stack, clock, {"type": "lambda", "function": "untagged"})
    assert_refused(run, "'untagged' is not tagged jobsched-team=alpha or jobsched-shared=true")
    assert stack.lambdas.calls == []


def test_a_team_cannot_send_to_another_teams_queue(stack: Stack, clock: Clock) -> None:
    url = stack.sqs.create_queue(QueueName="bravo-inbox", tags=owned(B))["QueueUrl"]
    run = run_once(stack, clock, {"type": "sqs", "queue_url": url})
    assert_refused(run, f"SQS queue '{url}'")
    assert stack.sqs.receive_message(QueueUrl=url).get("Messages", []) == []


def test_a_team_uses_a_shared_queue(stack: Stack, clock: Clock) -> None:
    url = stack.sqs.create_queue(QueueName="platform-inbox", tags={SHARED_TAG: "true"})["QueueUrl"]
    assert run_once(stack, clock, {"type": "sqs", "queue_url": url}).status is RunStatus.SUCCEEDED
    assert len(stack.sqs.receive_message(QueueUrl=url)["Messages"]) == 1


def test_a_team_cannot_start_another_teams_state_machine(stack: Stack, clock: Clock) -> None:
    states = boto3.client("stepfunctions", region_name=REGION)
    role = boto3.client("iam", region_name=REGION).create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
    arn = states.create_state_machine(
        name="bravo-etl", definition=definition, roleArn=role["Role"]["Arn"], tags=tag_list(B, "key", "value")
    )["stateMachineArn"]
    run = run_once(stack, clock, {"type": "stepfunctions", "state_machine_arn": arn})
    assert_refused(run, f"state machine '{arn}'")
    assert states.list_executions(stateMachineArn=arn)["executions"] == []


def test_a_team_cannot_put_events_on_another_teams_bus(stack: Stack, clock: Clock) -> None:
    events = boto3.client("events", region_name=REGION)
    events.create_event_bus(Name="bravo-bus", Tags=tag_list(B))
    inbox = stack.sqs.create_queue(QueueName="bravo-events")["QueueUrl"]
    inbox_arn = stack.sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="all", EventBusName="bravo-bus", EventPattern=json.dumps({"source": [{"prefix": ""}]}))
    events.put_targets(Rule="all", EventBusName="bravo-bus", Targets=[{"Id": "q", "Arn": inbox_arn}])
    run = run_once(stack, clock, {"type": "eventbridge", "bus": "bravo-bus"})
    assert_refused(run, "event bus 'bravo-bus'")
    assert stack.sqs.receive_message(QueueUrl=inbox).get("Messages", []) == []


def test_the_default_bus_is_usable_only_when_the_platform_shares_it(stack: Stack, clock: Clock) -> None:
    events = boto3.client("events", region_name=REGION)
    run = run_once(stack, clock, {"type": "eventbridge"}, name="before")
    assert_refused(run, "event bus 'default'")
    default_arn = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"
    events.tag_resource(ResourceARN=default_arn, Tags=[{"Key": SHARED_TAG, "Value": "true"}])
    assert run_once(stack, clock, {"type": "eventbridge"}, name="after").status is RunStatus.SUCCEEDED


# ------------------------------------------------------------------------ secrets and parameters


@pytest.fixture
def attacker_url() -> Iterator[RecordingServer]:
    with recording_server() as server:
        yield server


def test_another_teams_secret_never_reaches_a_url_the_job_names(
    stack: Stack, clock: Clock, attacker_url: RecordingServer
) -> None:
    url, seen = attacker_url.url, attacker_url.seen
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secrets.create_secret(Name="bravo/api-key", SecretString="bravo-s3cret", Tags=tag_list(B))
    target = {"type": "http", "url": url, "secret_headers": {"X-Token": "secretsmanager:bravo/api-key"}}
    run = run_once(stack, clock, target)
    assert_refused(run, "secret 'bravo/api-key'")
    assert seen == [], "no request was made"
    assert "bravo-s3cret" not in json.dumps(stack.dynamodb.scan(TableName=stack.runs_table)["Items"])


def test_a_shared_tag_never_shares_a_secret_or_a_parameter(
    stack: Stack, clock: Clock, attacker_url: RecordingServer
) -> None:
    url, seen = attacker_url.url, attacker_url.seen
    boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name="platform/key", SecretString="x", Tags=[{"Key": SHARED_TAG, "Value": "true"}]
    )
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name="/bravo/token", Value="bravo-param", Type="SecureString", Tags=tag_list(B)
    )
    run = run_once(
        stack, clock, {"type": "http", "url": url, "secret_headers": {"X-Key": "secretsmanager:platform/key"}}
    )
    assert_refused(run, "secret 'platform/key' is not tagged jobsched-team=alpha;")
    run = run_once(
        stack, clock, {"type": "http", "url": url, "secret_headers": {"X-Key": "ssm:/bravo/token"}}, name="p"
    )
    assert_refused(run, "SSM parameter '/bravo/token'")
    assert seen == []


def test_a_team_reads_its_own_parameter(stack: Stack, clock: Clock, attacker_url: RecordingServer) -> None:
    url, seen = attacker_url.url, attacker_url.seen
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name="/alpha/token", Value="alpha-param", Type="SecureString", Tags=tag_list(A)
    )
    run = run_once(stack, clock, {"type": "http", "url": url, "secret_headers": {"X-Key": "ssm:/alpha/token"}})
    assert run.status is RunStatus.SUCCEEDED and seen[-1]["headers"]["X-Key"] == "alpha-param"


# ------------------------------------------------------------------------ jobsched's own resources


def test_jobscheds_own_queues_topics_and_state_machines_are_never_targets(stack: Stack, clock: Clock) -> None:
    own_queue = stack.queue_urls["normal"]
    stack.sqs.tag_queue(QueueUrl=own_queue, Tags=owned(A))  # even tagged for the team
    run = run_once(stack, clock, {"type": "sqs", "queue_url": own_queue})
    assert_refused(run, "is one of jobsched's own resources")
    assert stack.pending() == [], "nothing was sent to the work queue"

    machine = stack.workflows.machine_arn("bravo/nightly")
    run = run_once(stack, clock, {"type": "stepfunctions", "state_machine_arn": machine}, name="dag")
    assert_refused(run, f"state machine '{machine}' is one of jobsched's own resources")


# -------------------------------------------------------------------------------- escalation topics


def test_a_page_never_reaches_another_teams_topic(stack: Stack, clock: Clock) -> None:
    bravo_topic = stack.topic("bravo-oncall", team=B)
    stack.lambdas.functions["broken"] = lambda event: 1 / 0
    clock.set("2027-01-04T09:59:30Z")
    stack.register(
        {
            "name": "noisy",
            "team": A,
            "schedule": {"expression": "0 * * * *"},
            "retry": {"max_attempts": 1},
            "target": {"type": "lambda", "function": "broken"},
            "escalation": {"sns_topic": bravo_topic},
        }
    )
    stack.tick()
    clock.set("2027-01-04T10:00:00Z")
    stack.pump()
    stack.handle_escalations()
    [page] = stack.pages()
    assert page["topic"] == stack.default_topic, "the page went to the deployment's own topic instead"
    assert "Not sent to the job's own channel" in page["message"] and "bravo-oncall" in page["message"]


# ------------------------------------------------------------------------ registration (PUT) answers


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


@pytest.mark.parametrize(
    ("make_target", "field"),
    [
        (lambda s: {"type": "lambda", "function": s.function("bravo-fn", owned(B))}, "target.function"),
        (
            lambda s: {"type": "sqs", "queue_url": s.sqs.create_queue(QueueName="bq", tags=owned(B))["QueueUrl"]},
            "target.queue_url",
        ),
        (lambda s: {"type": "sqs", "queue_url": s.queue_urls["high"]}, "target.queue_url"),
        (
            lambda s: {"type": "stepfunctions", "state_machine_arn": s.workflows.machine_arn("bravo/x")},
            "target.state_machine_arn",
        ),
        (
            lambda s: {
                "type": "http",
                "url": "https://example.com/hook",
                "secret_headers": {
                    "X-Token": "secretsmanager:"
                    + boto3.client("secretsmanager", region_name=REGION).create_secret(
                        Name="bravo/tok", SecretString="v", Tags=tag_list(B)
                    )["Name"]
                },
            },
            "target.secret_headers.X-Token",
        ),
    ],
)
def test_put_refuses_a_job_naming_another_teams_or_jobscheds_resource(
    api: ApiClient, stack: Stack, make_target: Any, field: str
) -> None:
    body = {"schedule": {"expression": "0 * * * *"}, "target": make_target(stack)}
    response = api.call("PUT", f"/teams/{A}/jobs/sneaky", body, principal=team_role(A))
    assert response.status == 422, response.body
    assert response.body["error"]["field"] == field
    assert response.body["error"]["errors"][0]["code"] == "resource_not_owned"
    assert f"team '{A}' may not use it" in response.body["error"]["message"]
    assert stack.jobs.get(f"{A}/sneaky") is None, "nothing was stored"


def test_put_refuses_another_teams_escalation_topic_and_accepts_a_resource_not_yet_created(
    api: ApiClient, stack: Stack
) -> None:
    topic = stack.topic("bravo-pages", team=B)
    body = {
        "schedule": {"expression": "0 * * * *"},
        "target": {"type": "lambda", "function": "created-later"},
        "escalation": {"sns_topic": topic},
    }
    response = api.call("PUT", f"/teams/{A}/jobs/pager", body, principal=team_role(A))
    assert response.status == 422 and response.body["error"]["field"] == "escalation.sns_topic"
    body["escalation"] = {"sns_topic": stack.default_topic}  # jobsched's own topic
    response = api.call("PUT", f"/teams/{A}/jobs/pager", body, principal=team_role(A))
    assert response.status == 422 and "is one of jobsched's own resources" in response.body["error"]["message"]
    boto3.client("secretsmanager", region_name="us-east-1").create_secret(
        Name="bravo-hook-key", SecretString="x", Tags=[{"Key": OWNER_TAG, "Value": B}]
    )
    body["escalation"] = {"webhook": "https://hooks.example.com/a", "webhook_secret": "secretsmanager:bravo-hook-key"}
    response = api.call("PUT", f"/teams/{A}/jobs/pager", body, principal=team_role(A))
    assert response.status == 422 and response.body["error"]["field"] == "escalation.webhook_secret"
    body.pop("escalation")
    assert api.call("PUT", f"/teams/{A}/jobs/pager", body, principal=team_role(A)).status == 201


def test_a_dag_task_naming_another_teams_queue_is_refused_at_put(api: ApiClient, stack: Stack) -> None:
    url = stack.sqs.create_queue(QueueName="bravo-q", tags=owned(B))["QueueUrl"]
    body = {
        "schedule": {"expression": "0 * * * *"},
        "dag": {
            "tasks": [
                {"name": "a", "target": {"type": "lambda", "function": "echo"}},
                {"name": "b", "target": {"type": "sqs", "queue_url": url}},
            ]
        },
    }
    response = api.call("PUT", f"/teams/{A}/jobs/dag", body, principal=team_role(A))
    assert response.status == 422 and response.body["error"]["field"] == "dag.tasks[1].target.queue_url"


# --------------------------------------------------------------------------------- the tag cache


def test_tags_are_cached_briefly_then_read_again(stack: Stack) -> None:
    url = stack.sqs.create_queue(QueueName="moving", tags=owned(A))["QueueUrl"]
    now = [0.0]
    guard = OwnershipGuard(AwsTagReader(TeamSessions(None)), (), ttl=60, monotonic=lambda: now[0])
    queue = ResourceRef(ResourceKind.QUEUE, url)
    guard.check(queue, A)
    stack.sqs.tag_queue(QueueUrl=url, Tags=owned(B))  # handed to another team
    now[0] = 59
    guard.check(queue, A)  # within a minute the cached tags still hold
    now[0] = 61
    with pytest.raises(Exception, match="belongs to another team"):
        guard.check(queue, A)


# --------------------------------------------------------------------------- SSRF answers at PUT


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("https://169.254.169.254/latest/meta-data/", "address_not_allowed"),
        ("https://[fd00:ec2::254]/", "address_not_allowed"),
        ("https://10.0.0.5/hook", "address_not_allowed"),
        ("https://100.64.1.1/hook", "address_not_allowed"),
        ("http://0.0.0.0:18080\\@localhost/../health", "invalid_url"),
        ("https://ops@internal.example/", "invalid_url"),
    ],
)
def test_put_refuses_urls_this_stage_may_not_reach(api: ApiClient, url: str, code: str) -> None:
    body = {"schedule": {"expression": "0 * * * *"}, "target": {"type": "http", "url": url}}
    response = api.call("PUT", f"/teams/{A}/jobs/ssrf", body, principal=team_role(A))
    assert response.status == 422, response.body
    assert response.body["error"]["field"] == "target.url" and response.body["error"]["errors"][0]["code"] == code
    webhook = {"schedule": {"expression": "0 * * * *"}, "target": {"type": "callback"}, "escalation": {"webhook": url}}
    response = api.call("PUT", f"/teams/{A}/jobs/ssrf", webhook, principal=team_role(A))
    assert response.status == 422 and response.body["error"]["field"] == "escalation.webhook"
