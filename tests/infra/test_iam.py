"""The template's permissions, judged by a real IAM evaluator (infra/iam: @cloud-copilot/iam-simulate in its own
Node process). moto enforces no IAM; these prove the grants the code relies on and the walls between teams against
the synthesized template itself. `make iam` does the same for every call the end-to-end suites record."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from infra.iam.check import Report, judge_into, write_report
from infra.iam.evaluate import Asked, judge
from infra.iam.probes import ADAPTER_WALLS, resource_kind_probes
from infra.iam.requests import IamRequest
from infra.iam.template import Policies, physical_from_names, policies
from jobsched.core.names import RunsKeys

ACCOUNT, REGION = "123456789012", "us-east-1"
Template = tuple[dict[str, Any], Path]


def judged(template: dict[str, Any], asked: list[Asked]) -> Report:
    report = Report()
    judge_into(report, asked, found(template))
    return report


def found(template: dict[str, Any]) -> Policies:
    return policies(
        template, physical_from_names(template, account=ACCOUNT, region=REGION), account=ACCOUNT, region=REGION
    )


def role(template: dict[str, Any], prefix: str) -> str:
    [arn] = [r.arn for r in found(template).roles.values() if r.logical.startswith(prefix)]
    return arn


def table(template: dict[str, Any], suffix: str) -> str:
    [name] = [
        r["Properties"]["TableName"]
        for r in template["Resources"].values()
        if r["Type"] in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")
        and r["Properties"]["TableName"].endswith(suffix)
    ]
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def test_a_grant_the_code_relies_on_is_allowed_and_removing_it_fails_naming_the_call(
    dev: Template, tmp_path: Path
) -> None:
    template = dev[0]
    worker = role(template, "FunctionsWorkerServiceRole")
    update = Asked(worker, (), IamRequest("dynamodb:UpdateItem", table(template, "-Runs")), why="dynamodb:UpdateItem")
    report = judged(template, [update])
    [allowed] = report.allowed
    assert allowed.allowed_by and allowed.allowed_by[0].startswith("identity:"), allowed
    # Drop the statement that decided: the same call is now denied, and the report names it.
    statement_id = allowed.allowed_by[0].split("#", 1)[1]
    logical, _, index = statement_id.rpartition(".")
    broken = copy.deepcopy(template)
    statements = broken["Resources"][logical]["Properties"]["PolicyDocument"]["Statement"]
    del statements[int(index)]
    report = judged(broken, [update])
    assert not report.allowed and len(report.denied) == 1 and report.unexplained == 1
    write_report(report, tmp_path / "report.txt")
    text = (tmp_path / "report.txt").read_text()
    assert f"dynamodb:UpdateItem on {table(template, '-Runs')}" in text and "ImplicitlyDenied" in text


def test_while_a_stage_moves_its_functions_may_write_both_generations_of_tables_and_their_indexes(
    dev: Template,
) -> None:
    """#51: a key moves on first touch (a mark in the previous table, a copy in the global one), and a listing reads
    both tables' indexes: every function that reaches a table reaches both generations."""
    template = dev[0]
    asked = [
        Asked(role(template, prefix), (), IamRequest(action, resource))
        for prefix in ("FunctionsWorkerServiceRole", "FunctionsDispatcherServiceRole", "FunctionsApiServiceRole")
        for suffix in ("-Runs", "-RunsV2", "-Jobs", "-JobsV2")
        for action, resource in (
            ("dynamodb:UpdateItem", table(template, suffix)),
            ("dynamodb:Query", f"{table(template, suffix)}/index/{RunsKeys.WAKE_INDEX}"),
        )
    ]
    report = judged(template, asked)
    assert len(report.allowed) == len(asked), [(v.asked.request, v.result) for v in report.denied]


def test_a_kubernetes_run_may_read_its_teams_cluster_and_start_the_machine_and_nothing_else(dev: Template) -> None:
    """Found by evaluating, not by moto: the template granted no eks:DescribeCluster, so every kubernetes run would
    have failed in AWS."""
    template = dev[0]
    targets, worker = role(template, "FunctionsTargetsRole"), role(template, "FunctionsWorkerServiceRole")
    cluster = f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/data-eks"
    machine = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:jobsched-dev-kubernetes-jobs"
    data = (("jobsched-team", "data"),)
    asked = [
        Asked(targets, data, IamRequest("eks:DescribeCluster", cluster), data),
        Asked(targets, data, IamRequest("eks:DescribeCluster", cluster), (("jobsched-shared", "true"),)),
        Asked(worker, (), IamRequest("states:StartExecution", machine)),
        Asked(targets, data, IamRequest("eks:DescribeCluster", cluster), (("jobsched-team", "beta"),), False),
        Asked(targets, data, IamRequest("eks:DescribeCluster", cluster), (), False),  # untagged: nobody's
    ]
    report = judged(template, asked)
    assert len(report.allowed) == 3 and len(report.probes_denied) == 2, [
        (v.asked.request.action, v.result, v.errors) for v in report.denied + report.probes_allowed
    ]


def test_every_kind_of_resource_a_team_names_is_walled_by_iam_or_said_why_not(dev: Template) -> None:
    template = dev[0]
    probes = resource_kind_probes(found(template), physical_from_names(template, account=ACCOUNT, region=REGION))
    kinds = {p.request.action for p in probes}
    assert {"lambda:InvokeFunction", "sqs:SendMessage", "ecs:RunTask", "eks:DescribeCluster", "s3:GetObject"} <= kinds
    report = judged(template, probes)
    assert report.probes_allowed == [], [
        (v.asked.request.action, v.asked.request.resource) for v in report.probes_allowed
    ]
    held_by_adapters = {v.asked.request.action for v, _ in report.adapter_walls}
    assert held_by_adapters == {"s3:GetObject"}, held_by_adapters  # S3 has no bucket-tag condition for reads
    assert all(action in ADAPTER_WALLS for action in held_by_adapters)
    # The intake queues, the runs bus and the stack key refuse a team's broad role by their own policies.
    forged = [v for v in report.probes_denied if v.asked.identity]
    assert sorted(v.asked.request.action for v in forged) == [
        "events:PutEvents",
        "kms:Decrypt",
        "kms:GenerateDataKey",
        "sqs:SendMessage",
        "sqs:SendMessage",
    ]


def test_the_walls_around_the_intake_and_the_runs_bus_are_what_denies_a_broad_role(dev: Template) -> None:
    """Without the resource policies' Deny, a team role with sqs:* and events:* could forge an intake envelope
    or a Run Finished event: the probe is not vacuous."""
    template = copy.deepcopy(dev[0])
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::SQS::QueuePolicy":
            props["PolicyDocument"]["Statement"] = [
                s for s in props["PolicyDocument"]["Statement"] if s.get("Sid") != "OnlyRulesAndJobschedSend"
            ]
        if resource["Type"] == "AWS::Events::EventBusPolicy":
            props["Statement"]["Effect"] = "Allow"
            props["Statement"]["Principal"] = {"AWS": "arn:aws:iam::123456789012:role/nobody"}
        if resource["Type"] == "AWS::KMS::Key":
            statements = props["KeyPolicy"]["Statement"]
            kept = [s for s in statements if s.get("Sid") != "OnlyJobschedUsesTheKeyDirectly"]
            props["KeyPolicy"]["Statement"] = kept
    probes = resource_kind_probes(found(template), physical_from_names(template, account=ACCOUNT, region=REGION))
    report = judged(template, [p for p in probes if p.identity])
    assert len(report.probes_allowed) == 5, json.dumps([v.result for v in report.probes_denied])


def test_the_stack_key_serves_jobscheds_roles_and_every_service_but_no_other_direct_caller(dev: Template) -> None:
    """The key's Deny stops a team's broad role calling KMS itself, and leaves alone what the services do for any
    caller (their own permission decides) and what jobsched's own roles do."""
    template = dev[0]
    policies = found(template)
    [key] = set(policies.encrypted_by.values())
    broad = json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "kms:*", "Resource": "*"}]}
    )
    team = "arn:aws:iam::123456789012:role/team-alpha-admin"
    via_sqs = (("aws:ViaAWSService", "true"), ("kms:ViaService", f"sqs.{REGION}.amazonaws.com"))
    worker = role(template, "FunctionsWorkerServiceRole")
    asked = [
        Asked(team, (), IamRequest("kms:Decrypt", key), expect_allowed=False, identity=broad, why="direct"),
        Asked(team, (), IamRequest("kms:Decrypt", key, via_sqs), expect_allowed=True, identity=broad, why="via SQS"),
        Asked(worker, (), IamRequest("kms:Decrypt", key, via_sqs), expect_allowed=True, why="the worker via SQS"),
    ]
    verdicts = judge(asked, policies)
    assert [v.result for v in verdicts] == ["ExplicitlyDenied", "Allowed", "Allowed"], verdicts


@pytest.mark.parametrize("action", ["ecs:DescribeTasks", "ecs:StopTask"])
def test_a_team_may_read_and_stop_only_its_own_tasks(dev: Template, action: str) -> None:
    template = dev[0]
    targets = role(template, "FunctionsTargetsRole")
    task = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/shared/0123"
    context = (("ecs:cluster", f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/shared"),)
    data = (("jobsched-team", "data"),)
    asked = [
        Asked(targets, data, IamRequest(action, task, context), data),
        Asked(targets, data, IamRequest(action, task, context), (("jobsched-team", "beta"),), False),
    ]
    report = judged(template, asked)
    assert len(report.allowed) == 1 and len(report.probes_denied) == 1


def test_work_started_with_tags_is_also_tagged_and_only_with_the_sessions_team(dev: Template) -> None:
    """RunTask and SubmitJob with tags are also TagResource on the new task or job: allowed with the session's
    team as the tag, and never with another team's (the call the adapters make, mapped by infra/iam/requests)."""
    from infra.iam.requests import iam_requests

    template = dev[0]
    targets = role(template, "FunctionsTargetsRole")
    data = (("jobsched-team", "data"),)
    for team, allowed in (("data", True), ("beta", False)):
        run_task = iam_requests(
            "ecs",
            "RunTask",
            {"cluster": "data", "taskDefinition": "etl:3", "tags": [{"key": "jobsched-team", "value": team}]},
            region=REGION,
        )
        submit = iam_requests(
            "batch",
            "SubmitJob",
            {"jobQueue": "q", "jobDefinition": "d:1", "jobName": "j", "tags": {"jobsched-team": team}},
            region=REGION,
        )
        tagging = [r for r in run_task + submit if r.action.endswith(":TagResource")]
        assert {r.action for r in tagging} == {"ecs:TagResource", "batch:TagResource"}
        report = judged(template, [Asked(targets, data, r, (), allowed) for r in tagging])
        assert len(report.allowed if allowed else report.probes_denied) == 2, (
            team,
            report.denied,
            report.probes_allowed,
        )
