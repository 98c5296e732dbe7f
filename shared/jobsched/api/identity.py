"""Who is calling, and which teams they may act for.

API Gateway authorizes every method with IAM (SigV4); the caller's ARN arrives in the request context.
A membership mapping, managed by platform admins, turns ARNs into teams:

    {"admins": ["arn:aws:iam::123456789012:role/platform-admin"],
     "teams": {"payments": ["arn:aws:sts::123456789012:assumed-role/payments-ci/*"]},
     "team_patterns": ["arn:aws:iam::123456789012:role/team-{team}"]}

Patterns are shell-style (``*``). A ``{team}`` placeholder makes one pattern serve every team: the
local runtime seeds ``arn:aws:iam::123456789012:role/team-{team}``. The mapping comes from the
environment variable JOBSCHED_MEMBERSHIP (JSON) or, in AWS, the SSM parameter named by
JOBSCHED_MEMBERSHIP_PARAMETER (cached for a minute, so admins change access without a deploy).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

MEMBERSHIP_ENV = "JOBSCHED_MEMBERSHIP"
MEMBERSHIP_PARAMETER_ENV = "JOBSCHED_MEMBERSHIP_PARAMETER"
LOCAL_GATEWAY_ENV = "JOBSCHED_LOCAL_GATEWAY"
PRINCIPAL_HEADER = "x-jobsched-principal"


class Unauthenticated(PermissionError):
    pass


class Forbidden(PermissionError):
    pass


@dataclass(frozen=True)
class Principal:
    arn: str
    teams: frozenset[str]
    admin: bool

    def may_act_for(self, team: str) -> bool:
        return self.admin or team in self.teams

    def require(self, team: str) -> None:
        if not self.may_act_for(team):
            raise Forbidden(f"{self.arn} is not a member of team '{team}'")


@dataclass(frozen=True)
class Membership:
    admins: tuple[str, ...] = ()
    teams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    team_patterns: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Membership:
        return cls(
            admins=tuple(config.get("admins", [])),
            teams={team: tuple(patterns) for team, patterns in config.get("teams", {}).items()},
            team_patterns=tuple(config.get("team_patterns", [])),
        )

    @classmethod
    def from_env(cls) -> Membership:
        if os.environ.get(MEMBERSHIP_ENV):
            return cls.from_config(json.loads(os.environ[MEMBERSHIP_ENV]))
        parameter = os.environ.get(MEMBERSHIP_PARAMETER_ENV)
        if parameter:
            from aws_lambda_powertools.utilities.parameters import SSMProvider

            from jobsched.aws.clients import client

            value = SSMProvider(boto3_client=client("ssm")).get(parameter, max_age=60)
            return cls.from_config(json.loads(str(value)))
        return cls()

    def principal(self, arn: str) -> Principal:
        admin = any(fnmatch.fnmatchcase(arn, pattern) for pattern in self.admins)
        teams = {team for team, patterns in self.teams.items() if any(fnmatch.fnmatchcase(arn, p) for p in patterns)}
        for pattern in self.team_patterns:
            regex = "^" + re.escape(pattern).replace(r"\{team\}", "(?P<team>[a-z0-9-]+)").replace(r"\*", ".*") + "$"
            match = re.match(regex, arn)
            if match:
                teams.add(match.group("team"))
        return Principal(arn, frozenset(teams), admin)


def caller_arn(event: dict[str, Any], headers: dict[str, str]) -> str:
    """The IAM caller; the local gateway may name another one with X-Jobsched-Principal."""
    if os.environ.get(LOCAL_GATEWAY_ENV) == "1":
        named = {k.lower(): v for k, v in headers.items()}.get(PRINCIPAL_HEADER)
        if named:
            return named
    identity = (event.get("requestContext") or {}).get("identity") or {}
    arn = identity.get("userArn") or identity.get("caller")
    if not arn:
        raise Unauthenticated("no caller identity: sign the request with SigV4 (IAM)")
    return str(arn)
