"""Judge recorded calls against a deployed template's policies with a real IAM evaluator (``simulate.js``, one Node
process for all of them): each call as its principal (the function's role, or a team's session with its tags), with
the resource's policy where it has one, the resource's tags as ``aws:ResourceTag``, and the requests AWS makes on
the caller's behalf (KMS for encrypted queues, topics and state machines; ``sts:TagSession`` with a tagged
``AssumeRole``).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.iam.requests import IamRequest
from infra.iam.template import Policies, Role, document

SIMULATOR = Path(__file__).with_name("simulate.js")
# Actions AWS authorizes on a resource that its published service reference (which the simulator validates against)
# lists none for: a task token's answer is authorized on the token's state machine (what CDK's grantTaskResponse
# grants, and AWS's callback examples show). Evaluated without that validation.
UNLISTED_RESOURCE_TYPES = ("states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat")
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Asked:
    """One request to judge: as whom, what, and what is expected (allowed, or denied for a probe)."""

    role_arn: str
    session_tags: tuple[tuple[str, str], ...]
    request: IamRequest
    resource_tags: tuple[tuple[str, str], ...] = ()
    expect_allowed: bool = True
    why: str = ""  # what it stands for: the recorded SDK call, or the probe
    identity: str = ""  # a JSON policy for a role the template does not hold (a team's own role, in a probe)

    @property
    def account(self) -> str:
        return self.role_arn.split(":")[4]


@dataclass(frozen=True)
class Verdict:
    asked: Asked
    result: str  # Allowed, ExplicitlyDenied, ImplicitlyDenied, Error
    allowed_by: tuple[str, ...]
    errors: str | None

    @property
    def as_expected(self) -> bool:
        return (self.result == "Allowed") == self.asked.expect_allowed and self.errors is None


def implied(asked: Asked, policies: Policies) -> list[Asked]:
    """What AWS asks on the caller's behalf for this request."""
    request, extra = asked.request, []
    key = policies.encrypted_by.get(request.resource)
    service = request.action.split(":", 1)[0]
    if key and service in ("sqs", "sns"):
        operation = request.action.split(":", 1)[1]
        actions = ["kms:Decrypt"] if operation in ("ReceiveMessage",) else []
        if operation in ("SendMessage", "SendMessageBatch", "Publish"):
            actions = ["kms:GenerateDataKey", "kms:Decrypt"]
        via = {"kms:ViaService": f"{service}.{key.split(':')[3]}.amazonaws.com", "aws:ViaAWSService": "true"}
        context = via | ({f"kms:EncryptionContext:aws:{service}:arn": request.resource} if service == "sqs" else {})
        for action in actions:
            extra.append(
                Asked(
                    asked.role_arn,
                    asked.session_tags,
                    IamRequest(action, key, tuple(sorted(context.items()))),
                    why=f"{action} for {request.action}",
                )
            )
    if request.action == "sts:AssumeRole":
        tags = dict(asked.request.context)
        if "sts:tags" in tags:
            context = {f"aws:RequestTag/{k}": v for k, v in json.loads(tags["sts:tags"])} | {
                "aws:TagKeys": ",".join(k for k, _ in json.loads(tags["sts:tags"]))
            }
            extra.append(
                Asked(
                    asked.role_arn,
                    asked.session_tags,
                    IamRequest("sts:TagSession", request.resource, tuple(sorted(context.items()))),
                    why="sts:TagSession for a tagged AssumeRole",
                )
            )
    return extra


def simulation(asked: Asked, policies: Policies) -> dict[str, Any]:
    role = policies.role(asked.role_arn)
    identity = [{"name": name, "policy": doc} for name, doc in (role.identity if role else [])]
    if asked.identity:
        identity.append({"name": "probe", "policy": json.loads(asked.identity)})
    role_name = asked.role_arn.rsplit("/", 1)[-1]
    principal = f"arn:aws:sts::{asked.account}:assumed-role/{role_name}/jobsched"
    context: dict[str, str | list[str]] = {
        "aws:PrincipalArn": asked.role_arn,
        "aws:PrincipalAccount": asked.account,
        "aws:SecureTransport": "true",
        # Always in a real request: a role calls, itself or through a service (the implied requests say so).
        "aws:PrincipalIsAWSService": "false",
        "aws:ViaAWSService": "false",
    }
    context |= {f"aws:PrincipalTag/{k}": v for k, v in asked.session_tags}
    context |= {f"aws:ResourceTag/{k}": v for k, v in asked.resource_tags}
    for name, value in asked.request.context:
        if name.startswith("sdk:") or name == "sts:tags":
            continue
        context[name] = value.split(",") if name == "aws:TagKeys" else value
    found: dict[str, Any] = {
        "request": {
            "principal": principal,
            "action": asked.request.action,
            "resource": {"resource": asked.request.resource, "accountId": asked.account},
            "contextVariables": context,
        },
        "identityPolicies": identity,
        "serviceControlPolicies": [],
        "resourceControlPolicies": [],
    }
    statements = _resource_statements(asked.request, policies)
    if statements is not None:
        found["resourcePolicy"] = statements
    return found


def _resource_statements(request: IamRequest, policies: Policies) -> dict[str, Any] | None:
    if request.action in ("sts:AssumeRole", "sts:TagSession"):
        target: Role | None = policies.role(request.resource)
        return target.trust if target else None
    statements = policies.resource.get(request.resource)
    if statements is None and request.resource.startswith("arn:aws:secretsmanager:"):
        for arn, found in policies.resource.items():  # a secret's policy names it with its six-character suffix
            if arn.endswith("-??????") and request.resource.startswith(arn[:-7]):
                statements = found
    return document(statements, "R") if statements is not None else None


def judge(asked: list[Asked], policies: Policies) -> list[Verdict]:
    cases = [
        {"id": str(index), "simulation": simulation(a, policies), "unsafe": a.request.action in UNLISTED_RESOURCE_TYPES}
        for index, a in enumerate(asked)
    ]
    done = subprocess.run(
        ["node", str(SIMULATOR)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the IAM evaluator failed: {done.stderr[-2000:]}")
    answers = {answer["id"]: answer for answer in json.loads(done.stdout)}
    verdicts = []
    for index, one in enumerate(asked):
        answer = answers[str(index)]
        errors = json.dumps(answer["errors"])[:500] if answer["errors"] else None
        verdicts.append(Verdict(one, answer["result"], tuple(answer["allowedBy"]), errors))
    return verdicts
