"""The console's functions in the template: the page only reads, the buttons act only through a team's alias, and
the trail says who pressed."""

from __future__ import annotations

import json

from jobsched.core.names import Env
from tests.infra.templates import (
    Template,
    function_by_handler,
    resources,
    role_actions,
)


def test_the_console_function_only_reads(dev: Template) -> None:
    _, console = function_by_handler(dev[0], "functions.console.handler.handler")
    assert console["Architectures"] == ["arm64"]
    actions = role_actions(dev[0], console)
    assert actions and all(a.split(":")[0] in ("dynamodb", "kms", "xray") for a in actions), actions
    writes = {
        a for a in actions if a.startswith("dynamodb:") and any(w in a for w in ("Put", "Update", "Delete", "Write"))
    }
    assert not writes, writes


def test_console_actions_act_only_through_a_team_alias_that_iam_grants_by_the_callers_team_tag(dev: Template) -> None:
    template = dev[0]
    name, actions_fn = function_by_handler(template, "functions.console_actions.handler.handler")
    assert actions_fn["Architectures"] == ["arm64"]
    # What an action may touch: the two tables, the work queues (trigger, rerun) and the escalation queue, the runs
    # bus (a cancelled run's Run Finished), an approval task's token (approve, reject), a drill's test page (the
    # deployment's topic; a team's own through its session of the targets role), and nothing else.
    services = {a.split(":")[0] for a in role_actions(template, actions_fn)}
    assert services <= {"dynamodb", "kms", "sqs", "xray", "events", "states", "sns", "sts"}
    assert {a for a in role_actions(template, actions_fn) if a.startswith("sns:")} == {"sns:Publish"}
    assert {a for a in role_actions(template, actions_fn) if a.startswith("sts:")} == {
        "sts:AssumeRole",
        "sts:TagSession",
    }
    assert {a for a in role_actions(template, actions_fn) if a.startswith("events:")} == {"events:PutEvents"}
    assert {a for a in role_actions(template, actions_fn) if a.startswith("states:")} == {
        "states:SendTaskSuccess",
        "states:SendTaskFailure",
    }
    aliases = resources(template, "AWS::Lambda::Alias")
    assert {a["Name"] for a in aliases.values() if name in json.dumps(a["FunctionName"])} == {
        "team-payments",
        "team-search",
    }
    # Nobody is granted an unqualified function: only aliases, and the alias is the caller's own team tag.
    policies = {  # (a role's grants past the inline size go to unnamed overflow policies CDK makes)
        p["ManagedPolicyName"]: p
        for p in resources(template, "AWS::IAM::ManagedPolicy").values()
        if "console" in json.dumps(p.get("ManagedPolicyName", ""))
    }
    user = [json.dumps(p) for n, p in policies.items() if "console-user" in json.dumps(n)]
    oncall = [json.dumps(p) for n, p in policies.items() if "console-oncall" in json.dumps(n)]
    assert len(user) == len(oncall) == 1
    widget_name, _ = function_by_handler(template, "functions.console.handler.handler")
    [statement] = json.loads(user[0])["PolicyDocument"]["Statement"]
    invoked = [json.dumps(resource) for resource in statement["Resource"]]
    assert statement["Action"] == "lambda:InvokeFunction" and len(invoked) == 3
    assert all(":team-${aws:PrincipalTag/jobsched-team}" in r or ":team-CONSOLE_TEAM" in r for r in invoked)
    assert sum(widget_name in r for r in invoked) == 2 and sum(name in r for r in invoked) == 1
    assert widget_name in oncall[0] and ":oncall" in oncall[0] and "PrincipalTag" not in oncall[0]
    widget_aliases = {a["Name"] for a in aliases.values() if widget_name in json.dumps(a["FunctionName"])}
    assert widget_aliases == {"team-payments", "team-search", "team-CONSOLE_TEAM", "oncall"}
    # The widget knows the actions function and which teams have an alias (their buttons act).
    _, console = function_by_handler(template, "functions.console.handler.handler")
    env = console["Environment"]["Variables"]
    assert env[Env.CONSOLE_TEAMS] == "payments,search" and name in json.dumps(env[Env.CONSOLE_ACTIONS])


def test_who_pressed_a_console_button_reaches_the_audit_function_from_the_stages_trail(dev: Template) -> None:
    template = dev[0]
    actions_name, _ = function_by_handler(template, "functions.console_actions.handler.handler")
    audit_name, audit_fn = function_by_handler(template, "functions.console_audit.handler.handler")
    # The trail logs only the actions function's invocations (data events), no management events.
    [trail] = resources(template, "AWS::CloudTrail::Trail").values()
    [selector] = trail["EventSelectors"]
    assert selector["IncludeManagementEvents"] is False
    [data] = selector["DataResources"]
    assert data["Type"] == "AWS::Lambda::Function" and actions_name in json.dumps(data["Values"])
    # CloudTrail's record of an Invoke of that function (by ARN or name) goes to the audit function.
    [rule] = [
        p
        for p in resources(template, "AWS::Events::Rule").values()
        if p.get("EventPattern", {}).get("source") == ["aws.lambda"]
    ]
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.lambda"] and pattern["detail"]["eventName"] == ["Invoke"]
    assert json.dumps(pattern["detail"]["requestParameters"]["functionName"]).count(actions_name) == 2
    [target] = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [audit_name, "Arn"]} and target["RetryPolicy"]["MaximumRetryAttempts"] == 8
    # It writes one thing: the name on the job's audit entry.
    assert {a.split(":")[0] for a in role_actions(template, audit_fn)} <= {"dynamodb", "kms", "xray"}
