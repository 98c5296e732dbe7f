"""Paging drills: a marked test page through a job's real chain, reported per destination (delivered, failed with
the reason, refused), each destination's last verification kept, and the team's destinations never verified or
failing listed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner

from jobsched.cli import cli
from jobsched.cli import remote as cli_remote
from jobsched.console.actions import ActionStores, handle_action
from jobsched.core.names import OWNER_TAG
from jobsched.core.spec import Escalation
from jobsched.paging.drills import drill
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack


def test_a_drill_reports_each_destination_and_the_team_sees_what_was_never_verified(
    stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    primary = stack.topic("ops-primary", team="ops")
    secondary = stack.topic("ops-secondary", team="ops")
    stack.register(
        {
            "name": "drilled",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "echo"},
            "escalation": {
                "sns_topic": primary,
                "webhook": "https://hooks.example.com/ops",
                "secondary": {"sns_topic": secondary, "after": 2},
            },
        }
    )
    stack.register(
        {
            "name": "untested",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "echo"},
        }
    )
    # Since the job was stored, its secondary topic was handed to another team, and the webhook went down.
    stack.sns.tag_resource(ResourceArn=secondary, Tags=[{"Key": OWNER_TAG, "Value": "data"}])
    stack.webhooks.fail = True
    api = ApiClient(stack)
    answer = api.call("POST", "/teams/ops/jobs/drilled/page-test", principal=team_role("ops"))
    assert answer.status == 200, answer.body
    outcomes = {(r["role"], r["destination"]): (r["outcome"], r["reason"]) for r in answer.body["results"]}
    assert outcomes[("primary", "topic")] == ("delivered", None)
    assert outcomes[("primary", "webhook")][0] == "failed" and "503" in outcomes[("primary", "webhook")][1]
    assert outcomes[("secondary", "topic")][0] == "refused"
    [test_page] = stack.pages()
    assert test_page["topic"] == primary and test_page["subject"].startswith("[jobsched, TEST]")
    assert "nothing is wrong" in test_page["subject"] and test_page["attributes"]["test"] == "true"

    listed = api.call("GET", "/teams/ops/destinations", principal=team_role("ops")).body
    by_address = {d["address"]: d for d in listed["destinations"]}
    assert by_address[primary]["last_outcome"] == "delivered" and by_address[primary]["jobs"] == ["ops/drilled"]
    assert by_address[secondary]["last_outcome"] == "refused"
    assert by_address[stack.default_topic]["last_outcome"] is None  # "untested" pages the deployment's topic
    assert (listed["never_verified"], listed["failing"]) == (1, 2)
    assert api.call("POST", "/teams/ops/jobs/drilled/page-test", principal=team_role("data")).status == 403

    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, team_role("ops")))
    stack.webhooks.fail = False
    everyone = CliRunner().invoke(cli, ["page", "test", "--all", "ops"])
    assert everyone.exit_code == 1, everyone.output  # the secondary is still another team's
    assert "refused" in everyone.output and "delivered" in everyone.output
    after = api.call("GET", "/teams/ops/destinations", principal=team_role("ops")).body
    assert (after["never_verified"], after["failing"]) == (0, 1)
    shown = CliRunner().invoke(cli, ["page", "destinations", "ops"])
    assert shown.exit_code == 0 and "0 never verified, 1 failing" in shown.output


def test_the_consoles_button_drills_the_jobs_chain_delivered_to_one_destination_refused_by_another(
    stack: Stack, clock: Clock
) -> None:
    primary = stack.topic("ops-oncall", team="ops")
    elsewhere = stack.topic("data-oncall", team="data")  # another team's topic, named as the secondary
    stack.register(
        {
            "name": "drilled",
            "team": "ops",
            "schedule": {"expression": "0 * * * *"},
            "target": {"type": "lambda", "function": "echo"},
            "escalation": {"sns_topic": primary},
        }
    )
    spec = stack.jobs.get("ops/drilled")
    assert spec is not None
    # Stored before the secondary was handed over: the console's drill finds it refused, as the API's does.
    stack.sns.tag_resource(ResourceArn=primary, Tags=[{"Key": OWNER_TAG, "Value": "ops"}])
    escalation = {"sns_topic": primary, "secondary": {"sns_topic": elsewhere, "after": 2}}
    stored = replace(spec, spec=spec.spec.model_copy(update={"escalation": Escalation.model_validate(escalation)}))
    stores = ActionStores(
        stack.jobs,
        stack.runs,
        stack.queues,
        drill=lambda job: drill(stack.page_sender.notifier, stored, stack.default_topic),
    )
    event = {"action": "page_test", "job": "ops/drilled"}
    arn = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-test-ConsoleActions:team-ops"
    result = handle_action(event, invoked_function_arn=arn, request_id="req-9", stores=stores, now=clock())
    assert not result.ok and result.title == "Test page not delivered everywhere for ops/drilled"
    assert f"primary topic {primary}: delivered" in result.message
    assert f"secondary topic {elsewhere}: refused" in result.message
    [page] = stack.pages()
    assert page["topic"] == primary and page["subject"].startswith("[jobsched, TEST]")
    kept = stack.jobs.drills("ops")
    assert kept[primary]["outcome"] == "delivered" and kept[elsewhere]["outcome"] == "refused"
    # Another team's alias may not drill this job.
    other = arn.replace("team-ops", "team-data")
    refused = handle_action(event, invoked_function_arn=other, request_id="req-10", stores=stores, now=clock())
    assert refused.status == 403
