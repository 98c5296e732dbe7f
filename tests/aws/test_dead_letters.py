"""#49: `jobsched dlq list|redrive`. A member sees and redrives only their team's dead letters, an admin every one;
a redriven run message runs once (and a second redrive of it, after its run ended, runs nothing again); a message
naming no team stays for an admin."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from jobsched.adapters.aws.dead_letters import DeadLetterQueues
from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.pipeline.dead_letters import DeadLetters, team_of
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack


def dead(stack: Stack, job: str, team: str, at: str) -> RunMessage:
    instant = parse_instant(at)
    message = RunMessage.scheduled(job=job, team=team, at=instant, fire_at=instant, spec_version=1)
    stack.sqs.send_message(QueueUrl=stack.dlq_urls["normal"], MessageBody=message.model_dump_json(exclude_none=True))
    return message


def test_a_teams_dead_letters_listed_and_redriven_once_and_another_teams_left(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.set("2027-01-04T10:20:00Z")
    for name, team in (("report", "ops"), ("load", "data")):
        stack.register(
            {
                "name": name,
                "team": team,
                "schedule": {"expression": "0 * * * *"},
                "target": {"type": "lambda", "function": "echo"},
            }
        )
    escalations_dlq = stack.sqs.create_queue(QueueName="jobsched-test-escalations-dlq")["QueueUrl"]
    api = ApiClient(stack)
    urls = {"work-high": stack.dlq_urls["high"], "work-normal": stack.dlq_urls["normal"]}
    urls |= {"work-low": stack.dlq_urls["low"], "escalations": escalations_dlq}
    api.services.dead_letters = DeadLetters(DeadLetterQueues(urls, stack.sqs), stack.queues, stack.escalation_queue)
    ours = dead(stack, "ops/report", "ops", "2027-01-04T10:00:00Z")
    dead(stack, "data/load", "data", "2027-01-04T10:00:00Z")
    stack.sqs.send_message(QueueUrl=stack.dlq_urls["normal"], MessageBody="not json at all")

    listed = api.call("GET", "/dlq?team=ops", principal=team_role("ops"))
    assert listed.status == 200
    normal = next(queue for queue in listed.body if queue["queue"] == "work-normal")
    assert normal["approximate"] == 3 and normal["by_team"] == {"ops": 1}
    assert [sample["team"] for sample in normal["samples"]] == ["ops"] and "ops/report" in normal["samples"][0]["body"]
    assert api.call("GET", "/dlq", principal=team_role("ops")).status == 403  # every team's: an admin's
    assert api.call("GET", "/dlq?team=data", principal=team_role("ops")).status == 403
    every = next(queue for queue in api.call("GET", "/dlq").body if queue["queue"] == "work-normal")
    assert every["by_team"] == {"ops": 1, "data": 1, "": 1}

    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))
    shown = CliRunner().invoke(cli, ["dlq", "list", "--team", "ops"])
    assert shown.exit_code == 0 and "work-normal: 3 message(s); read 3; by team: ops: 1" in shown.output
    moved = CliRunner().invoke(cli, ["dlq", "redrive", "work-normal", "--team", "ops"])
    assert moved.exit_code == 0 and "1 redriven, 2 left" in moved.output, moved.output
    stack.pump()
    run = stack.runs.get("ops/report", ours.run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED
    assert stack.jobs.get("data/load") is not None and stack.runs.get("data/load", ours.run_id) is None  # left

    # The same message dead-lettered again and redriven after its run ended: nothing runs twice.
    dead(stack, "ops/report", "ops", "2027-01-04T10:00:00Z")
    again = api.call("POST", "/dlq/work-normal/redrive", {"team": "ops"}, principal=team_role("ops"))
    assert again.status == 200 and again.body == {"queue": "work-normal", "moved": 1, "left": 2}
    stack.pump()
    executed = [run_id for _, run_id, _ in stack.lambdas.executions("echo") if run_id == ours.run_id]
    assert len(executed) == 1
    refused = api.call("POST", "/dlq/work-normal/redrive", {"team": "data"}, principal=team_role("ops"))
    assert refused.status == 403
    assert api.call("POST", "/dlq/nowhere/redrive", {}).status == 404
    everything = api.call("POST", "/dlq/work-normal/redrive", {})  # an admin: the rest, whoever they name
    assert everything.status == 200 and everything.body == {
        "queue": "work-normal",
        "moved": 1,
        "left": 1,
    }  # not JSON: stays


def test_a_message_names_its_team_or_its_jobs_owner_or_none() -> None:
    assert team_of(json.dumps({"team": "ops", "job": "data/x"})) == "ops"
    assert team_of(json.dumps({"job": "data/x"})) == "data"
    for nameless in ("[1, 2]", "not json", json.dumps({"job": 3})):
        assert team_of(nameless) is None
