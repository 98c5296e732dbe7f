"""Calls the API in-process with API Gateway REST proxy events, as IAM-authorized callers."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from jobsched.adapters.aws.dead_letters import DeadLetterQueues
from jobsched.api.app import ApiServices, build_handler
from jobsched.api.identity import Membership
from jobsched.api.tokens import CallbackTokens
from jobsched.client import HttpResult
from jobsched.pipeline.dead_letters import DeadLetters
from jobsched.tenancy.egress import AddressPolicy
from tests.aws.harness import Stack

ACCOUNT = "123456789012"
ADMIN = f"arn:aws:iam::{ACCOUNT}:role/platform-admin"
MEMBERSHIP = Membership.from_config(
    {"admins": [ADMIN], "team_patterns": [f"arn:aws:iam::{ACCOUNT}:role/team-{{team}}"]}
)


def team_role(team: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/team-{team}"


@dataclass
class ApiResponse:
    status: int
    body: Any
    headers: dict[str, str]


class ApiClient:
    def __init__(self, stack: Stack, *, requests_per_minute: int = 600) -> None:
        self.stack = stack
        stack.jobs.team_defaults = replace(stack.jobs.team_defaults, requests_per_minute=requests_per_minute)
        self.tokens = CallbackTokens(b"test-secret-of-sufficient-length")
        self.services = services = ApiServices(
            jobs=stack.jobs,
            runs=stack.runs,
            queues=stack.queues,
            worker=stack.worker,
            tokens=self.tokens,
            membership=MEMBERSHIP,
            clock=stack.clock,
            dags=stack.dags,
            rules=stack.rules,
            guard=stack.guard,
            egress=AddressPolicy(),  # as deployed: literal private addresses are refused at PUT
            notifier=stack.page_sender.notifier,  # paging drills send through the pages' own notifier
            default_topic=stack.default_topic,
            dead_letters=DeadLetters(  # as deployed: the work queues' dead-letter queues (jobsched dlq)
                DeadLetterQueues({f"work-{p}": url for p, url in stack.dlq_urls.items()}, stack.sqs),
                stack.queues,
                stack.escalation_queue,
            ),
        )
        self.handle = build_handler(lambda: services)

    def callback(self, action: str, token: str, body: Any = None, *, principal: str | None = None) -> ApiResponse:
        """A callback report as an external worker sends it: the token in its header; ``principal``: the IAM
        identity that signed it (a container's report is signed with its task's role)."""
        headers = {"X-Jobsched-Token": token}
        return self.call("POST", f"/callbacks/{action}", body, principal=principal, headers=headers)

    def call(
        self,
        method: str,
        url: str,
        body: Any = None,
        *,
        principal: str | None = ADMIN,
        headers: dict[str, str] | None = None,
        raw_body: str | None = None,
    ) -> ApiResponse:
        parts = urlsplit(url)
        text = raw_body if raw_body is not None else (None if body is None else json.dumps(body))
        identity = {"userArn": principal} if principal else {}
        event = {
            "resource": parts.path,
            "path": parts.path,
            "httpMethod": method,
            "headers": {"Content-Type": "application/json", **(headers or {})},
            "multiValueHeaders": {},
            "queryStringParameters": dict(parse_qsl(parts.query)) or None,
            "multiValueQueryStringParameters": None,
            "pathParameters": None,
            "requestContext": {"identity": identity, "requestId": "req", "httpMethod": method, "path": parts.path},
            "body": text,
            "isBase64Encoded": False,
        }
        result = self.handle(event, None)
        raw = result.get("body") or ""
        try:
            parsed = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            parsed = raw
        headers = {k: v[-1] for k, v in (result.get("multiValueHeaders") or {}).items()}
        headers.update(result.get("headers") or {})
        return ApiResponse(result["statusCode"], parsed, headers)


class InProcess:
    """A transport for the CLI that hands requests to the API handler, as ``principal``."""

    def __init__(self, api: ApiClient, principal: str) -> None:
        self.api, self.principal = api, principal

    def __call__(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> HttpResult:
        response = self.api.call(
            method, path, principal=self.principal, headers=headers, raw_body=body.decode() if body else None
        )
        return HttpResult(response.status, response.body, response.headers)


def cli_as(api: ApiClient, principal: str, monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str]]:
    """The jobsched command line against this API as ``principal``: run(*args) -> (exit code, output)."""
    from click.testing import CliRunner

    from jobsched.cli import cli
    from jobsched.cli import remote as cli_remote

    monkeypatch.setattr(cli_remote, "make_transport", lambda url: InProcess(api, principal))

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, list(args))
        return result.exit_code, result.output

    return run
