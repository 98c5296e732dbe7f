"""The synthesized template: what matters for correctness, security and on-call, checked directly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobsched.core.limits import TeamLimits
from jobsched.core.names import PRIORITIES, WORK_QUEUES, Env
from tests.infra.templates import (
    OWN_TEAM,
    SHARED,
    TARGET_ACTIONS,
    Template,
    _actions,
    _policies_of,
    resources,
)


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
