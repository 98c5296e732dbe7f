"""The synthesized template: what matters for correctness, security and on-call, checked directly."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobsched.core.limits import TeamLimits
from jobsched.core.names import JOBS_TABLE, PRIORITIES, RUNS_TABLE, TABLE_GENERATION, WORK_QUEUES, Env

Template = tuple[dict[str, Any], Path]


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] | {"_r": r} for name, r in template["Resources"].items() if r["Type"] == kind}


TABLE_KINDS = ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")


def table(template: dict[str, Any], suffix: str) -> dict[str, Any]:
    [found] = [p for kind in TABLE_KINDS for p in resources(template, kind).values() if p["TableName"].endswith(suffix)]
    return found


def test_tables_match_the_one_definition(dev: Template) -> None:
    """The global tables (#51) and, kept while a stage deployed before moves onto them, the previous ones."""
    template, _ = dev
    for definition, generation in itertools.product((JOBS_TABLE, RUNS_TABLE), (TABLE_GENERATION, "")):
        props = table(template, f"-{definition.logical_name}{generation}")
        assert props["KeySchema"] == [
            {"AttributeName": definition.partition_key[0], "KeyType": "HASH"},
            {"AttributeName": definition.sort_key[0], "KeyType": "RANGE"},
        ]
        indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
        assert set(indexes) == {index.name for index in definition.indexes}
        for index in definition.indexes:
            keys = [k["AttributeName"] for k in indexes[index.name]["KeySchema"]]
            assert keys == [index.partition_key[0], index.sort_key[0]]
            assert indexes[index.name]["Projection"]["ProjectionType"] == index.projection
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert replica(props)["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
        assert props["SSESpecification"]["SSEEnabled"] is True and props["SSESpecification"]["SSEType"] == "KMS"
        key = replica(props).get("SSESpecification", props["SSESpecification"])["KMSMasterKeyId"]
        assert key["Fn::GetAtt"][0].startswith("Key")  # the stack's own key
        assert "TimeToLiveSpecification" not in props  # #51: the sweeper keeps retention (watch.retention)
    [global_jobs] = [p for p in resources(template, "AWS::DynamoDB::GlobalTable").values() if "Jobs" in p["TableName"]]
    assert [r["Region"] for r in global_jobs["Replicas"]] == [{"Ref": "AWS::Region"}]  # one replica, here (#51)


def replica(props: dict[str, Any]) -> dict[str, Any]:
    """A table's per-region settings: a global table's replica's, a table's own."""
    return props["Replicas"][0] if "Replicas" in props else props


def test_prod_retains_and_protects_tables_and_has_no_examples(dev: Template, prod: Template) -> None:
    for definition, generation in itertools.product((JOBS_TABLE, RUNS_TABLE), (TABLE_GENERATION, "")):
        name = f"-{definition.logical_name}{generation}"
        props = table(prod[0], name)
        assert replica(props)["DeletionProtectionEnabled"] is True
        assert props["_r"]["DeletionPolicy"] == "Retain"
        assert table(dev[0], name)["_r"]["DeletionPolicy"] == "Delete"

    def names(template: dict[str, Any]) -> set[str]:
        return {p.get("FunctionName", "") for p in resources(template, "AWS::Lambda::Function").values()}

    assert "jobsched-example-echo" in names(dev[0]) and "jobsched-example-echo" not in names(prod[0])


def test_a_stage_moved_onto_its_global_tables_drops_the_previous_ones_when_asked(dev: Template, tmp_path: Path) -> None:
    """Every function names the previous tables while the stage carries them (its move may be under way), and
    may reach both generations; `-c previous_tables=false` leaves them out (the release after the move)."""
    from tests.infra.conftest import synthesize

    functions = resources(dev[0], "AWS::Lambda::Function").values()
    variables = [
        f["Environment"]["Variables"]
        for f in functions
        if Env.JOBS_TABLE in f.get("Environment", {}).get("Variables", {})
    ]
    assert variables and all(Env.PREVIOUS_JOBS_TABLE in v and Env.PREVIOUS_RUNS_TABLE in v for v in variables)
    template, _ = synthesize(tmp_path, stage="dev", previous_tables="false")
    assert (
        not resources(template, "AWS::DynamoDB::Table") and len(resources(template, "AWS::DynamoDB::GlobalTable")) == 2
    )
    for function in resources(template, "AWS::Lambda::Function").values():
        assert Env.PREVIOUS_JOBS_TABLE not in function.get("Environment", {}).get("Variables", {})


def test_work_queues_redrive_to_dead_letter_queues_and_are_encrypted(dev: Template) -> None:
    queues = resources(dev[0], "AWS::SQS::Queue")
    for priority in PRIORITIES:
        definition = WORK_QUEUES[priority]
        [work] = [q for q in queues.values() if q["QueueName"] == f"jobsched-dev-{definition.logical_name}"]
        assert work["RedrivePolicy"]["maxReceiveCount"] == definition.max_receive_count
        assert work["VisibilityTimeout"] >= 6 * 900
        assert "KmsMasterKeyId" in work
    assert all("KmsMasterKeyId" in q for q in queues.values())


def test_worker_event_sources_report_batch_failures_with_maximum_concurrency(dev: Template) -> None:
    every = list(resources(dev[0], "AWS::Lambda::EventSourceMapping").values())
    mappings = [m for m in every if "Worker" in json.dumps(m["FunctionName"])]
    [escalation] = [m for m in every if "Escalation" in json.dumps(m["FunctionName"])]
    assert escalation["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert "QueuesEscalations" in json.dumps(escalation["EventSourceArn"])
    [pages] = [m for m in every if "FunctionsPages" in json.dumps(m["FunctionName"])]
    assert pages["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert "QueuesPages" in json.dumps(pages["EventSourceArn"])
    assert len(mappings) == len(PRIORITIES)
    assert all(m["FunctionResponseTypes"] == ["ReportBatchItemFailures"] and m["BatchSize"] == 10 for m in mappings)
    assert sorted(m["ScalingConfig"]["MaximumConcurrency"] for m in mappings) == sorted(
        q.max_concurrency for q in WORK_QUEUES.values()
    )


def test_functions_arm64_python313_traced_with_json_logs_and_env_from_names(dev: Template) -> None:
    functions = [
        p for p in resources(dev[0], "AWS::Lambda::Function").values() if p["FunctionName"].startswith("jobsched-dev-")
    ]
    assert {p["FunctionName"] for p in functions} == {
        "jobsched-dev-Dispatcher",
        "jobsched-dev-Worker",
        "jobsched-dev-Api",
        "jobsched-dev-Heartbeat",
        "jobsched-dev-Escalation",
        "jobsched-dev-Pages",
        "jobsched-dev-Rotation",
        "jobsched-dev-Console",
        "jobsched-dev-ConsoleActions",
        "jobsched-dev-ConsoleAudit",
        "jobsched-dev-Events",
    }
    for props in functions:
        assert props["Architectures"] == ["arm64"] and props["Runtime"] == "python3.13"
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        if props["FunctionName"] == "jobsched-dev-Rotation":
            continue  # rotates the signing secret; touches no table or queue
        variables = props["Environment"]["Variables"]
        assert {Env.JOBS_TABLE, Env.RUNS_TABLE, Env.ESCALATION_QUEUE, *Env.QUEUES_BY_PRIORITY.values()} <= set(
            variables
        )
        assert json.loads(variables[Env.TEAM_LIMITS]) == TeamLimits().as_dict(), "every team limited by default"
    [dispatcher] = [p for p in functions if p["FunctionName"] == "jobsched-dev-Dispatcher"]
    assert dispatcher["ReservedConcurrentExecutions"] >= 1
    [api] = [p for p in functions if p["FunctionName"] == "jobsched-dev-Api"]
    assert api["ReservedConcurrentExecutions"] == 20  # an API burst cannot starve the worker


def test_dispatcher_and_heartbeat_tick_every_minute(dev: Template) -> None:
    rules = {p["Name"]: p for p in resources(dev[0], "AWS::Events::Rule").values() if "ScheduleExpression" in p}
    assert set(rules) == {"jobsched-dev-DispatcherTick", "jobsched-dev-HeartbeatTick"}
    assert all(r["ScheduleExpression"] == "rate(1 minute)" and r["State"] == "ENABLED" for r in rules.values())


def test_no_policy_allows_a_wildcard_action(dev: Template) -> None:
    for props in resources(dev[0], "AWS::IAM::Policy").values():
        for statement in props["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if statement["Effect"] == "Allow":
                assert all(a != "*" and not a.endswith(":*") for a in actions), actions


def _actions(statement: dict[str, Any]) -> list[str]:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def _policies_of(template: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [
        statement
        for name, props in resources(template, "AWS::IAM::Policy").items()
        if name.startswith(prefix)
        for statement in props["PolicyDocument"]["Statement"]
    ]


TARGET_ACTIONS = {
    "lambda:InvokeFunction",
    "sqs:SendMessage",
    "states:StartExecution",
    "events:PutEvents",
    "secretsmanager:GetSecretValue",
    "ssm:GetParameter",
    "sns:Publish",
}
OWN_TEAM = {"StringEquals": {"aws:ResourceTag/jobsched-team": "${aws:PrincipalTag/jobsched-team}"}}
SHARED = {"StringEquals": {"aws:ResourceTag/jobsched-shared": "true"}}


def test_function_roles_keep_no_permission_on_team_resources(dev: Template) -> None:
    """The worker, API, heartbeat, escalation, pages and dispatcher reach team resources only as the target role."""
    template = dev[0]
    own_refs = {
        json.dumps({"Ref": name})
        for name, r in template["Resources"].items()
        if r["Type"] in ("AWS::SNS::Topic", "AWS::SecretsManager::Secret")
    }
    for function in ("Worker", "Api", "Heartbeat", "Escalation", "Pages", "Dispatcher"):
        for statement in _policies_of(template, f"Functions{function}"):
            granted = TARGET_ACTIONS & set(_actions(statement))
            if not granted:
                continue
            resource = json.dumps(statement["Resource"])
            if granted == {"states:StartExecution"} and "jobsched-dev-kubernetes-jobs" in resource:
                # Kubernetes targets' Jobs: only the deployment's own kubernetes state machine, by its exact name.
                assert function == "Worker" and "*" not in resource and "Condition" not in statement
                continue
            if granted == {"states:StartExecution"}:
                # DAG starts: only jobsched's own machines, each tagged with its job.
                assert function == "Worker" and "jobsched-dev-dag-" in resource
                assert statement["Condition"] == {"StringLike": {"aws:ResourceTag/jobsched-job": "?*/?*"}}
                continue
            # Only the stack's own queues, topics, secret and runs bus (resolved references), never a wildcard.
            assert "*" not in resource.replace("/index/*", ""), (function, granted, resource)
            allowed = {"sqs:SendMessage", "sns:Publish", "secretsmanager:GetSecretValue", "ssm:GetParameter"}
            assert granted <= allowed | {"events:PutEvents"}
            if "events:PutEvents" in granted:  # Run Finished, on the deployment's own bus only
                assert "FunctionsRunsBus" in resource, (function, resource)
            assert "Fn::GetAtt" in resource or any(ref in resource for ref in own_refs) or "Ref" in resource


def test_the_target_role_is_assumed_only_by_jobscheds_functions_with_a_team_tag(dev: Template) -> None:
    template = dev[0]
    [role] = [p for n, p in resources(template, "AWS::IAM::Role").items() if n.startswith("FunctionsTargets")]
    trust = role["AssumeRolePolicyDocument"]["Statement"]
    callers = {
        "FunctionsWorkerServiceRole",
        "FunctionsApiServiceRole",
        "FunctionsPagesServiceRole",
        "FunctionsHeartbeatServiceRole",
        "FunctionsEventsServiceRole",  # reads the tags of a trigger's bucket or bus as the team, when events arrive
        "FunctionsConsoleActionsServiceRole",  # a drill button pages the team's own topics and webhooks as the team
    }

    def principals(statement: dict[str, Any]) -> set[str]:
        found = statement["Principal"]["AWS"]
        found = found if isinstance(found, list) else [found]
        return {item["Fn::GetAtt"][0][: -len("XXXXXXXX")] for item in found}

    assumers = set().union(*(principals(s) for s in trust if s["Action"] == "sts:AssumeRole"))
    [tag] = [s for s in trust if s["Action"] == "sts:TagSession"]
    assert assumers == callers and principals(tag) == callers
    assert {s["Action"] for s in trust} == {"sts:AssumeRole", "sts:TagSession"}
    assert tag["Condition"] == {"StringLike": {"aws:RequestTag/jobsched-team": "?*"}}
    assert role["MaxSessionDuration"] == 3600

    statements = _policies_of(template, "FunctionsTargetsRoleDefaultPolicy")
    by_action: dict[str, list[dict[str, Any]]] = {}
    for statement in statements:
        if statement["Effect"] == "Allow":
            for action in _actions(statement):
                by_action.setdefault(action, []).append(statement)
    for action in TARGET_ACTIONS:
        conditions = [s.get("Condition") for s in by_action[action]]
        shareable = action not in {"secretsmanager:GetSecretValue", "ssm:GetParameter", "sns:Publish"}
        assert sorted(map(json.dumps, conditions)) == sorted(
            map(json.dumps, [OWN_TEAM, SHARED] if shareable else [OWN_TEAM])
        ), action
    # A trigger's and a wait's bucket: its tags read as the team, then (waits) HeadObject of the awaited key.
    assert "s3:GetBucketTagging" in by_action and by_action["s3:GetObject"][0]["Resource"] == "arn:aws:s3:::*/*"
    [deny] = [s for s in statements if s["Effect"] == "Deny"]
    denied = json.dumps(deny["Resource"])
    for own in (
        "function:jobsched-dev-",
        ":jobsched-dev-*",
        "stateMachine:jobsched-dev-",
        "secret:jobsched/dev/",
        "parameter/jobsched/dev/",
    ):
        assert own in denied, own
    for function in ("Worker", "Api", "Pages", "Heartbeat"):
        assert any(
            "sts:TagSession" in _actions(s) and "sts:AssumeRole" in _actions(s)
            for s in _policies_of(template, f"Functions{function}")
        ), function


def test_the_stack_never_sets_the_local_runtimes_membership(dev: Template, prod: Template) -> None:
    """Membership comes from the SSM parameter in AWS, never from an inline variable (the local runtime's);
    the old local-gateway switch is gone from the code (tests/unit/test_membership.py) and the stack."""

    for template, _ in (dev, prod):
        for props in resources(template, "AWS::Lambda::Function").values():
            variables = props.get("Environment", {}).get("Variables", {})
            assert "JOBSCHED_LOCAL_GATEWAY" not in variables and Env.MEMBERSHIP not in variables


def test_every_api_method_is_iam_authorized(dev: Template) -> None:
    methods = resources(dev[0], "AWS::ApiGateway::Method")
    assert methods and all(m["AuthorizationType"] == "AWS_IAM" for m in methods.values())
    [stage] = resources(dev[0], "AWS::ApiGateway::Stage").values()
    assert stage["AccessLogSetting"]["DestinationArn"] and stage["TracingEnabled"] is True
    assert stage["MethodSettings"][0]["ThrottlingRateLimit"] > 0
    assert resources(dev[0], "AWS::ApiGateway::UsagePlan")


def test_alarms_page_the_ops_topic_with_their_thresholds(dev: Template) -> None:
    template = dev[0]
    topics = {n for n, p in resources(template, "AWS::SNS::Topic").items() if p["TopicName"].endswith("ops-alarms")}
    assert all("KmsMasterKeyId" in p for p in resources(template, "AWS::SNS::Topic").values())
    alarms = {
        p["AlarmName"].removeprefix("jobsched-dev-"): p for p in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    assert {
        "DlqHighNotEmpty",
        "DlqNormalNotEmpty",
        "DlqLowNotEmpty",
        "DispatcherErrors",
        "DispatcherMissedTicks",
        "JobsQuarantined",
        "FireLatenessP99Normal",
        "SloFastBurn",
        "SloSlowBurn",
        "OldestMessageNormal",
        "WorkerThrottles",
    } <= set(alarms)
    for alarm in alarms.values():
        assert [a["Ref"] for a in alarm["AlarmActions"]] == list(topics)
    assert alarms["DlqNormalNotEmpty"]["Threshold"] == 0
    assert alarms["SloFastBurn"]["Threshold"] == pytest.approx(14.4 * 0.005)
    assert alarms["SloSlowBurn"]["Threshold"] == pytest.approx(6 * 0.005)
    # Per tier, from the platform's objectives: critical 99.9%, important 99.5%; best-effort never pages.
    assert alarms["SloFastBurnCritical"]["Threshold"] == pytest.approx(14.4 * 0.001)
    assert alarms["SloSlowBurnImportant"]["Threshold"] == pytest.approx(6 * 0.005)
    assert not [name for name in alarms if "Best" in name]
    assert alarms["FireLatenessP99High"]["Threshold"] == 5.0
    assert alarms["DispatcherMissedTicks"]["ComparisonOperator"] == "LessThanThreshold"


def test_four_dashboards_and_the_jobs_one_is_the_console(dev: Template) -> None:
    dashboards = resources(dev[0], "AWS::CloudWatch::Dashboard")
    names = {p["DashboardName"] for p in dashboards.values()}
    assert names == {"jobsched-dev-executive", "jobsched-dev-oncall", "jobsched-dev-debug", "jobsched-dev-jobs"}
    [jobs] = [p for p in dashboards.values() if p["DashboardName"] == "jobsched-dev-jobs"]
    body = json.dumps(jobs["DashboardBody"])
    [console] = [
        logical
        for logical, f in resources(dev[0], "AWS::Lambda::Function").items()
        if f.get("Handler") == "functions.console.handler.handler"
    ]
    assert body.count('\\"type\\":\\"custom\\"') == 5 and console in body, "five custom widgets, the console"
    for view in ("team", "slo", "changes", "timeline", "job"):
        assert f'\\"view\\":\\"{view}\\"' in body, view
    assert "CONSOLE_TEAM" in body and '\\"variables\\"' in body, "the team comes from a dashboard variable"
    assert body.count(":team-CONSOLE_TEAM") == 5, "each widget invokes the typed team's alias"
    [executive] = [p for p in dashboards.values() if p["DashboardName"] == "jobsched-dev-executive"]
    executive_body = json.dumps(executive["DashboardBody"])
    assert executive_body.count('\\"type\\":\\"custom\\"') == 1 and '\\"view\\":\\"executive\\"' in executive_body
    assert ":oncall" in executive_body, "every team's heat-map row through the on-call alias"
    [oncall] = [p for p in dashboards.values() if p["DashboardName"] == "jobsched-dev-oncall"]
    oncall_body = json.dumps(oncall["DashboardBody"])
    assert oncall_body.count('\\"type\\":\\"custom\\"') == 1 and '\\"view\\":\\"incidents\\"' in oncall_body
    assert ":oncall" in oncall_body, "incidents across teams through the on-call alias"


def function_by_handler(template: dict[str, Any], handler: str) -> tuple[str, dict[str, Any]]:
    [found] = [
        (name, f) for name, f in resources(template, "AWS::Lambda::Function").items() if f.get("Handler") == handler
    ]
    return found


def role_actions(template: dict[str, Any], function: dict[str, Any]) -> set[str]:
    role = function["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Roles"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    return {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}


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


def test_cdk_nag_finds_nothing_unacknowledged(dev: Template) -> None:
    report = json.loads((dev[1] / "validation-report.json").read_text())
    violations = [v for plugin in report.get("pluginReports", []) for v in plugin.get("violations", [])]
    assert violations == [], violations[:3]
    [nag] = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success"
    # Every acknowledged finding carries its reason.
    assert nag["suppressedViolations"]
    assert all(len(v["reason"]) > 20 for v in nag["suppressedViolations"])


def test_cfn_lint_finds_no_errors(dev: Template) -> None:
    template = dev[1] / "jobsched-dev.template.json"
    result = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), str(template), "--format", "parseable"],
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line for line in result.stdout.splitlines() if ":E" in line]
    assert errors == [], "\n".join(errors[:10])


def test_workflow_role_and_scoped_pass_role(dev: Template) -> None:
    template = dev[0]
    roles = {
        n: p for n, p in resources(template, "AWS::IAM::Role").items() if p.get("RoleName") == "jobsched-dev-workflows"
    }
    [(role_name, role)] = roles.items()
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "states.amazonaws.com"}
    # Distributed maps: the machines' own child executions, and objects of this account only (the ItemReader).
    [machine_policy] = [
        p for p in resources(template, "AWS::IAM::Policy").values() if p["Roles"] == [{"Ref": role_name}]
    ]
    granted = {
        json.dumps(s["Action"]): s for s in machine_policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"
    }
    assert "stateMachine:jobsched-dev-dag-*" in json.dumps(granted['"states:StartExecution"']["Resource"])
    assert "execution:jobsched-dev-dag-*" in json.dumps(
        granted['["states:DescribeExecution", "states:StopExecution"]']["Resource"]
    )
    read = granted['"s3:GetObject"']
    assert read["Resource"] == "arn:aws:s3:::*/*"
    assert read["Condition"] == {"StringEquals": {"s3:ResourceAccount": "123456789012"}}  # the dev stage's account
    [api_policy] = [p for n, p in resources(template, "AWS::IAM::Policy").items() if n.startswith("FunctionsApi")]
    statements = api_policy["PolicyDocument"]["Statement"]
    [pass_role] = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert pass_role["Resource"] == {"Fn::GetAtt": [role_name, "Arn"]}
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "states.amazonaws.com"}}
    [manage] = [s for s in statements if isinstance(s["Action"], list) and "states:CreateStateMachine" in s["Action"]]
    assert "stateMachine:jobsched-dev-dag-*" in json.dumps(manage["Resource"])
    # Whoever starts, stops or reports on executions may do so only for the project's DAG machines, and its one
    # kubernetes machine (by its exact name).
    for name in ("FunctionsWorker", "FunctionsApi", "FunctionsHeartbeat"):
        [policy] = [p for n, p in resources(template, "AWS::IAM::Policy").items() if n.startswith(name)]
        for statement in policy["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(action.startswith("states:") for action in actions) and "Condition" not in statement:
                text = json.dumps(statement["Resource"])
                owned = ("stateMachine:jobsched-dev-dag-*", "execution:jobsched-dev-dag-*")
                kubernetes = ('stateMachine:jobsched-dev-kubernetes-jobs"', "execution:jobsched-dev-kubernetes-jobs:*")
                assert any(part in text for part in owned + kubernetes), statement
    functions = resources(template, "AWS::Lambda::Function")
    worker = next(p for n, p in functions.items() if n.startswith("FunctionsWorker"))
    prefix = json.dumps(worker["Environment"]["Variables"]["JOBSCHED_STATE_MACHINE_PREFIX"])
    assert "stateMachine:jobsched-dev-dag-" in prefix


def test_the_api_denies_tagged_callers_other_teams_routes(dev: Template) -> None:
    [api] = resources(dev[0], "AWS::ApiGateway::RestApi").values()
    [deny] = api["Policy"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "execute-api:Invoke"
    assert "execute-api:/*/*/teams/${aws:PrincipalTag/jobsched-team}/*" in deny["NotResource"]
    assert not any("teams/*" in resource for resource in deny["NotResource"])
    assert deny["Condition"]["Null"] == {"aws:PrincipalTag/jobsched-team": "false"}


def test_the_callback_signing_secret_rotates_monthly(dev: Template) -> None:
    [schedule] = resources(dev[0], "AWS::SecretsManager::RotationSchedule").values()
    assert schedule["RotationRules"]["ScheduleExpression"] == "rate(30 days)"
    assert schedule["RotationLambdaARN"]["Fn::GetAtt"][0].startswith("FunctionsRotation")


def test_prod_puts_a_web_acl_in_front_of_the_api(dev: Template, prod: Template) -> None:
    assert resources(dev[0], "AWS::WAFv2::WebACL") == {}  # non-prod: off unless -c waf=true
    [acl] = resources(prod[0], "AWS::WAFv2::WebACL").values()
    rules = {rule["Name"]: rule for rule in acl["Rules"]}
    assert rules["RatePerSourceIp"]["Statement"]["RateBasedStatement"]["Limit"] == 3000
    assert rules["BodyOver256KB"]["Statement"]["SizeConstraintStatement"]["Size"] == 256 * 1024
    assert all("Block" in rule["Action"] for rule in rules.values())
    [association] = resources(prod[0], "AWS::WAFv2::WebACLAssociation").values()
    assert association["WebACLArn"]["Fn::GetAtt"][1] == "Arn"


def test_team_limits_come_from_context_and_a_bad_one_fails_the_synth() -> None:
    from aws_cdk import App

    from infra.config import StageConfig

    app = App(context={"team_limits": '{"max_running": 50, "max_jobs": 200}'})
    limits = StageConfig.from_context(app).team_limits
    assert limits.max_running == 50 and limits.max_jobs == 200 and limits.max_backfills == TeamLimits().max_backfills
    with pytest.raises(ValueError, match="unknown team limit"):
        StageConfig.from_context(App(context={"team_limits": '{"max_runing": 5}'}))
    with pytest.raises(ValueError, match="at least 1"):
        StageConfig.from_context(App(context={"team_limits": {"max_running": 0}}))


def test_the_org_policy_is_the_file_lint_reads_given_by_path_text_or_object_and_a_bad_one_fails_the_synth() -> None:
    from aws_cdk import App

    from infra.config import StageConfig
    from jobsched.registry.policy import OrgPolicy

    path = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"
    by_path = StageConfig.from_context(App(context={"org_policy": str(path)})).org_policy
    assert by_path == OrgPolicy.load(path) and by_path.require == ["owner", "runbook_url"]
    as_text = StageConfig.from_context(App(context={"org_policy": '{"limits": {"max_attempts": 3}}'})).org_policy
    assert as_text.limits.max_attempts == 3
    assert StageConfig.from_context(App(context={"org_policy": {"require": ["tier"]}})).org_policy.require == ["tier"]
    assert StageConfig.from_context(App()).org_policy == OrgPolicy()
    with pytest.raises(ValueError, match="requir"):
        StageConfig.from_context(App(context={"org_policy": '{"requir": ["owner"]}'}))


def test_cloudwatch_may_publish_every_alarm_to_its_encrypted_topic(dev: Template) -> None:
    """An alarm reaches nobody if CloudWatch cannot use the topic's KMS key: the key policy must say so,
    for alarms of this account only."""
    template = dev[0]
    resources_by_id = template["Resources"]
    topics = {
        action["Ref"]
        for props in resources(template, "AWS::CloudWatch::Alarm").values()
        for action in props.get("AlarmActions", [])
    }
    assert topics, "alarms have actions"
    for topic in topics:
        key_ref = resources_by_id[topic]["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
        statements = resources_by_id[key_ref]["Properties"]["KeyPolicy"]["Statement"]
        [grant] = [s for s in statements if _service(s) == "cloudwatch.amazonaws.com"]
        assert set(_actions(grant)) == {"kms:Decrypt", "kms:GenerateDataKey*"}
        assert grant["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
        policies = [p for p in resources(template, "AWS::SNS::TopicPolicy").values() if {"Ref": topic} in p["Topics"]]
        published = [
            s for p in policies for s in p["PolicyDocument"]["Statement"] if _service(s) == "cloudwatch.amazonaws.com"
        ]
        assert published and published[0]["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}


def test_every_scheduled_or_queue_driven_component_and_every_dlq_is_alarmed(dev: Template) -> None:
    template = dev[0]
    names = {p["AlarmName"] for p in resources(template, "AWS::CloudWatch::Alarm").values()}
    for component in ("Dispatcher", "Heartbeat", "Escalation", "Pages", "Events"):
        assert f"jobsched-dev-{component}Errors" in names, component
    for ticking in ("Dispatcher", "Heartbeat"):
        [missed] = [
            p
            for p in resources(template, "AWS::CloudWatch::Alarm").values()
            if p["AlarmName"] == f"jobsched-dev-{ticking}MissedTicks"
        ]
        assert missed["TreatMissingData"] == "breaching" and missed["ComparisonOperator"] == "LessThanThreshold"
    dead_letter_queues = [
        q["QueueName"] for q in resources(template, "AWS::SQS::Queue").values() if q["QueueName"].endswith("-dlq")
    ]
    assert len(dead_letter_queues) == len(PRIORITIES) + 4  # work queues, escalations, pages, events, system events
    alarmed = json.dumps(list(resources(template, "AWS::CloudWatch::Alarm").values()))
    dlq_ids = [n for n, r in template["Resources"].items() if r["Type"] == "AWS::SQS::Queue" and "Dlq" in n]
    for logical in dlq_ids:
        assert logical in alarmed, f"no alarm watches {logical}"
    assert "jobsched-dev-Api5xx" in names
    assert {f"jobsched-dev-FireLatenessP99{p.title()}" for p in PRIORITIES} <= names


def _service(statement: dict[str, Any]) -> str | None:
    principal = statement.get("Principal")
    return principal.get("Service") if isinstance(principal, dict) else None


def test_provisioned_capacity_from_context_scales_every_table_and_index(tmp_path: Path) -> None:
    """For big deployments: -c dynamodb_capacity='{...}' makes both tables and every index provisioned, each
    read and write dimension auto scaled to its target utilisation; cdk-nag still passes. Malformed: refused."""
    from aws_cdk import App

    from infra.config import StageConfig
    from tests.infra.conftest import synthesize

    capacity = '{"write": {"min": 50, "max": 20000}, "target_utilization": 60}'
    context = {"stage": "prod", "dynamodb_capacity": capacity, "table_ttl": "true"}
    template, folder = synthesize(tmp_path, **context)
    tables = resources(template, "AWS::DynamoDB::Table").values()  # the previous ones
    global_tables = resources(template, "AWS::DynamoDB::GlobalTable").values()
    # -c table_ttl=true (a stage that stays in one region): DynamoDB deletes expired items for free.
    ttl = {"AttributeName": "expires_at", "Enabled": True}
    assert all(t["TimeToLiveSpecification"] == ttl for t in [*tables, *global_tables]) and len(global_tables) == 2
    for global_table in global_tables:
        scaled = global_table["WriteProvisionedThroughputSettings"]["WriteCapacityAutoScalingSettings"]
        assert (scaled["MinCapacity"], scaled["MaxCapacity"]) == (50, 20000)
        assert scaled["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 60
        [replica] = global_table["Replicas"]
        reads = replica["ReadProvisionedThroughputSettings"]["ReadCapacityAutoScalingSettings"]
        assert (reads["MinCapacity"], reads["MaxCapacity"]) == (5, 4000)
        assert len(replica["GlobalSecondaryIndexes"]) == len(global_table["GlobalSecondaryIndexes"])
    indexes = [index for table in tables for index in table.get("GlobalSecondaryIndexes", [])]
    assert len(tables) == 2 and indexes
    for provisioned in [*tables, *indexes]:
        assert provisioned.get("BillingMode", "PROVISIONED") == "PROVISIONED"
        assert provisioned["ProvisionedThroughput"]["WriteCapacityUnits"] == 50
    targets = resources(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert len(targets) == 2 * (len(tables) + len(indexes))
    assert {t["ScalableDimension"] for t in targets} == {
        f"dynamodb:{kind}:{unit}CapacityUnits" for kind in ("table", "index") for unit in ("Read", "Write")
    }
    assert {t["MaxCapacity"] for t in targets if "Write" in t["ScalableDimension"]} == {20000}
    policies = resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    assert {p["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for p in policies} == {60}
    report = json.loads((folder / "validation-report.json").read_text())
    assert [v for plugin in report.get("pluginReports", []) for v in plugin.get("violations", [])] == []
    assert StageConfig.from_context(App()).capacity is None  # on demand unless asked
    for bad in ('{"write": {"min": 10, "max": 5}}', '{"target_utilization": 99}', '{"writes": {}}'):
        with pytest.raises(ValueError, match="dynamodb_capacity"):
            StageConfig.from_context(App(context={"dynamodb_capacity": bad}))


def test_an_idle_non_prod_stage_pays_for_no_dashboards_traces_or_zero_counts(tmp_path: Path) -> None:
    """What scripts/idle_cost.py prices: a non-prod stage leaves out dashboards, X-Ray and zero-valued
    counts unless asked (-c dashboards=true ...); prod and the local stage keep them. Alarms stay in both."""
    from tests.infra.conftest import synthesize

    template, _ = synthesize(tmp_path / "qa", stage="qa")
    assert not resources(template, "AWS::CloudWatch::Dashboard")
    functions = resources(template, "AWS::Lambda::Function").values()
    assert all(f.get("TracingConfig", {}).get("Mode") != "Active" for f in functions)
    ours = [
        f["Environment"]["Variables"]
        for f in functions
        if Env.JOBS_TABLE in f.get("Environment", {}).get("Variables", {})
    ]
    assert ours and {variables[Env.ZERO_METRICS] for variables in ours} == {"off"}
    assert (
        len(resources(template, "AWS::CloudWatch::Alarm")) == 40
    )  # alarms cost nothing while idle (no data, not breaching)
    prod, _ = synthesize(tmp_path / "prod", stage="prod")
    assert len(resources(prod, "AWS::CloudWatch::Dashboard")) == 4
    prod_functions = resources(prod, "AWS::Lambda::Function").values()
    assert all(f["TracingConfig"]["Mode"] == "Active" for f in prod_functions if "Environment" in f)
    prod_ours = [
        f["Environment"]["Variables"]
        for f in prod_functions
        if Env.JOBS_TABLE in f.get("Environment", {}).get("Variables", {})
    ]
    assert {variables[Env.ZERO_METRICS] for variables in prod_ours} == {"on"}


def test_a_deployment_sized_for_bursts_fans_the_tick_out_and_warms_its_tables(tmp_path: Path) -> None:
    """-c dispatchers=7 -c due_shards=64 -c warm_throughput -c worker_concurrency -c work_queues=3 and memory:
    seven rule targets (five per rule) each naming its part, every function told the shard count, the
    dispatcher's reserved concurrency two per part, both tables warmed, three normal queues each with an
    event source allowed 500, sharing one DLQ, each alarmed; cdk-nag passes. Out-of-range values are
    refused at synth."""
    from aws_cdk import App

    from infra.config import StageConfig
    from jobsched.core.names import Env
    from tests.infra.conftest import synthesize

    context = {
        "stage": "prod",
        "dispatchers": "7",
        "due_shards": "64",
        "warm_throughput": '{"reads": 12000, "writes": 40000}',
        "worker_concurrency": '{"normal": 500}',
        "worker_memory": "1769",
        "dispatcher_memory": "1769",
        "work_queues": "3",
    }
    template, folder = synthesize(tmp_path, **context)
    rules = {
        name: rule
        for name, rule in resources(template, "AWS::Events::Rule").items()
        if "DispatcherTick" in json.dumps(rule.get("Name", ""))
    }
    targets = [target for rule in rules.values() for target in rule["Targets"]]
    assert len(rules) == 2 and sorted(len(rule["Targets"]) for rule in rules.values()) == [2, 5]
    assert sorted(json.loads(target["Input"])["part"] for target in targets) == list(range(7))
    assert {json.loads(target["Input"])["parts"] for target in targets} == {7}
    functions = resources(template, "AWS::Lambda::Function")
    dispatcher = next(f for name, f in functions.items() if name.startswith("FunctionsDispatcher"))
    assert dispatcher["ReservedConcurrentExecutions"] == 14 and dispatcher["MemorySize"] == 1769
    worker = next(f for name, f in functions.items() if name.startswith("FunctionsWorker"))
    assert worker["MemorySize"] == 1769
    for function in functions.values():
        variables = function.get("Environment", {}).get("Variables", {})
        if Env.JOBS_TABLE in variables:
            assert variables[Env.DUE_SHARDS] == "64"
    for kind in TABLE_KINDS:
        for table in resources(template, kind).values():
            assert table["WarmThroughput"] == {"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": 40000}
    concurrency = sorted(
        mapping["ScalingConfig"]["MaximumConcurrency"]
        for mapping in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if "ScalingConfig" in mapping
    )
    assert concurrency.count(500) == 3, "three normal queues, each its own event source"
    queue_names = [json.dumps(q.get("QueueName")) for q in resources(template, "AWS::SQS::Queue").values()]
    assert sum("WorkNormal" in name and "dlq" not in name for name in queue_names) == 3
    assert sum("WorkNormal-dlq" in name for name in queue_names) == 1, "the shards share the class's DLQ"
    worker_variables = worker["Environment"]["Variables"]
    assert Env.WORK_QUEUE_SHARDS in worker_variables
    alarms = json.dumps([a.get("AlarmName") for a in resources(template, "AWS::CloudWatch::Alarm").values()])
    assert "OldestMessageNormal3" in alarms
    report = json.loads((folder / "validation-report.json").read_text())
    assert [v for plugin in report.get("pluginReports", []) for v in plugin.get("violations", [])] == []
    assert StageConfig.from_context(App()).burst.dispatchers == 1
    for key, bad in (
        ("dispatchers", "0"),
        ("dispatchers", "65"),
        ("due_shards", "4"),
        ("warm_throughput", '{"write": 5}'),
        ("worker_concurrency", '{"normal": 5000}'),
        ("worker_concurrency", '{"urgent": 50}'),
        ("worker_memory", "64"),
        ("work_queues", "17"),
    ):
        with pytest.raises(ValueError, match=key):
            StageConfig.from_context(App(context={key: bad}))


def test_stopped_container_tasks_reach_the_intake_through_one_rule_and_the_target_role_may_run_only_teams_tasks(
    dev: Template,
) -> None:
    from jobsched.core.events import container_envelope_template, container_rule_patterns

    template = dev[0]
    for name, pattern in container_rule_patterns().items():
        [rule] = [p for p in resources(template, "AWS::Events::Rule").values() if p.get("Name", "").endswith(name)]
        assert rule["EventPattern"] == pattern and rule["Name"].startswith("jobsched-dev-")
        [target] = rule["Targets"]
        assert target["InputTransformer"]["InputTemplate"] == container_envelope_template()
    # Kubernetes targets: only the deployment's kubernetes machine's executions reach the intake.
    [kubernetes] = [
        p
        for p in resources(template, "AWS::Events::Rule").values()
        if p.get("Name", "").endswith("kubernetes-state-changes")
    ]
    machine = json.dumps(kubernetes["EventPattern"]["detail"]["stateMachineArn"])
    assert (
        kubernetes["EventPattern"]["source"] == ["aws.states"]
        and "stateMachine:jobsched-dev-kubernetes-jobs" in machine
    )
    statements = _policies_of(template, "FunctionsTargetsRoleDefaultPolicy")
    [run_task] = [s for s in statements if "ecs:RunTask" in _actions(s)]
    assert run_task["Condition"] == OWN_TEAM
    for action in ("batch:SubmitJob", "batch:TerminateJob", "logs:GetLogEvents"):
        [statement] = [s for s in statements if action in _actions(s)]
        assert statement["Condition"] == OWN_TEAM, action
    [pass_role] = [s for s in statements if "iam:PassRole" in _actions(s)]
    assert pass_role["Condition"]["StringEquals"]["iam:PassedToService"] == "ecs-tasks.amazonaws.com"
    assert (
        pass_role["Condition"]["StringEquals"]["aws:ResourceTag/jobsched-team"] == "${aws:PrincipalTag/jobsched-team}"
    )


def test_the_kubernetes_machines_data_is_encrypted_and_only_the_deployment_may_read_it_back(dev: Template) -> None:
    """Its executions' input carries the attempt's token (for the pod's Secret): encrypted with the stack's key,
    which the machine's role, the worker (to start) and the functions that describe executions may use for this
    machine only."""
    template = dev[0]
    [machine] = [
        p
        for p in resources(template, "AWS::StepFunctions::StateMachine").values()
        if p["StateMachineName"] == "jobsched-dev-kubernetes-jobs"
    ]
    encryption = machine["EncryptionConfiguration"]
    [key] = resources(template, "AWS::KMS::Key")
    assert encryption["Type"] == "CUSTOMER_MANAGED_KMS_KEY" and encryption["KmsKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    context = "kms:EncryptionContext:aws:states:stateMachineArn"
    granted: dict[str, set[str]] = {}
    for name, props in resources(template, "AWS::IAM::Policy").items():
        for statement in props["PolicyDocument"]["Statement"]:
            if not any(a.startswith("kms:") for a in _actions(statement)):
                continue
            if context in json.dumps(statement.get("Condition", {})):
                assert statement["Resource"] == {"Fn::GetAtt": [key, "Arn"]}, statement
                assert "stateMachine:jobsched-dev-kubernetes-jobs" in json.dumps(statement["Condition"]), statement
                granted.setdefault(name, set()).update(_actions(statement))
    by_owner = {
        owner: actions
        for owner in ("KubernetesRole", "Worker", "Heartbeat", "Api")
        for name, actions in granted.items()
        if owner in name
    }
    assert by_owner["KubernetesRole"] == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert by_owner["Worker"] >= {"kms:GenerateDataKey", "kms:Decrypt"}
    assert by_owner["Heartbeat"] == by_owner["Api"] == {"kms:Decrypt"}


def test_every_alarm_links_its_section_of_the_alarm_runbook(dev: Template) -> None:
    """An alarm's description ends with its runbook link; the section exists in docs/operate/alarms.md."""
    import re

    runbook = (Path(__file__).resolve().parents[2] / "docs" / "operate" / "alarms.md").read_text()
    sections = {
        re.sub(r"[^a-z0-9 -]", "", heading.lower()).strip().replace(" ", "-")
        for heading in re.findall(r"^## (.+)$", runbook, flags=re.MULTILINE)
    }
    alarms = resources(dev[0], "AWS::CloudWatch::Alarm")
    assert len(alarms) >= 40
    for alarm in alarms.values():
        description = alarm["AlarmDescription"]
        link = description.rsplit("Runbook: ", 1)[1]
        page, _, section = link.partition("#")
        assert page == "docs/operate/alarms.md" and section in sections, (alarm["AlarmName"], link)
