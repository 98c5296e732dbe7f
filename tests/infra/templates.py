"""Reading a synthesized template in the infra tests: resources by type, the tables, policies and roles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

Template = tuple[dict[str, Any], Path]
TABLE_KINDS = ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] | {"_r": r} for name, r in template["Resources"].items() if r["Type"] == kind}


def table(template: dict[str, Any], suffix: str) -> dict[str, Any]:
    [found] = [p for kind in TABLE_KINDS for p in resources(template, kind).values() if p["TableName"].endswith(suffix)]
    return found


def replica(props: dict[str, Any]) -> dict[str, Any]:
    """A table's per-region settings: a global table's replica's, a table's own."""
    return props["Replicas"][0] if "Replicas" in props else props


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


def _service(statement: dict[str, Any]) -> str | None:
    principal = statement.get("Principal")
    return principal.get("Service") if isinstance(principal, dict) else None
