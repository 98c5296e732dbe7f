"""Who is calling, and which teams they may act for.

API Gateway authorizes every method with IAM (SigV4); the caller's ARN arrives in the request context.
A membership mapping, managed by platform admins, turns ARNs into teams:

    {"admins": ["arn:aws:iam::123456789012:role/platform-admin"],
     "teams": {"payments": ["arn:aws:sts::123456789012:assumed-role/payments-ci/*"]},
     "team_patterns": ["arn:aws:iam::123456789012:role/team-{team}"],
     "kubernetes": {"payments": {"namespaces": ["payments-batch"], "service_accounts": ["invoicer"]}},
     "event_sources": {"payments": ["com.acme.billing"]}}

Patterns are shell-style (``*``). A ``{team}`` placeholder makes one pattern serve every team: the
local runtime seeds ``arn:aws:iam::123456789012:role/team-{team}``. API Gateway reports a role's callers
as ``arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION``; such an ARN is matched both as it is and as the
role ``arn:aws:iam::ACCOUNT:role/ROLE`` (assumed-role ARNs carry no role path, so write patterns without
one). A name pattern trusts whoever may create or assume a role of that name.

The recommended setup derives the team from a tag instead: with ``"team_tag": "jobsched-team"`` the
caller's role is looked up (``iam:ListRoleTags``, cached like the mapping) and its ``jobsched-team`` tag
names the team; only those who may tag roles (platform admins) decide membership. The stack adds an API
Gateway resource policy as a second wall: a principal carrying that tag (role or session tag) may not
invoke another team's routes.

The mapping comes from the environment variable JOBSCHED_MEMBERSHIP (JSON) or, in AWS, the SSM
parameter named by JOBSCHED_MEMBERSHIP_PARAMETER. ``MembershipCache`` reloads it at most once a minute,
so a change (removing someone) takes effect within a minute, without a deploy.

The caller is the signed identity API Gateway puts in the request context, and nothing else: no header or
environment variable can name another one. (The local gateway builds that context itself, which is where
`make run` lets a request act as someone else.)
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.names import Env
from jobsched.core.roles import ASSUMED_ROLE, role_of
from jobsched.tenancy.ownership import TeamGrants

MEMBERSHIP_TTL_SECONDS = 60.0
DEFAULT_PRIORITIES = ("normal", "low")
log = logging.getLogger(__name__)

RoleTags = Callable[[str], dict[str, str]]  # role name -> its tags


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
    team_tag: str | None = None  # e.g. "jobsched-team": the caller's role tag names its team
    # Priority classes each team may use; others get DEFAULT_PRIORITIES ("high" is the platform's to grant).
    priorities: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Kubernetes namespaces and service accounts, and shared-bus event sources, the platform grants each team.
    grants: TeamGrants = field(default_factory=TeamGrants)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Membership:
        return cls(
            admins=tuple(config.get("admins", [])),
            teams={team: tuple(patterns) for team, patterns in config.get("teams", {}).items()},
            team_patterns=tuple(config.get("team_patterns", [])),
            team_tag=config.get("team_tag") or None,
            priorities={team: tuple(granted) for team, granted in config.get("priorities", {}).items()},
            grants=TeamGrants.from_config(config),
        )

    def priorities_for(self, team: str) -> tuple[str, ...]:
        return self.priorities.get(team, DEFAULT_PRIORITIES)

    @classmethod
    def from_env(cls) -> Membership:
        if os.environ.get(Env.MEMBERSHIP):
            return cls.from_config(json.loads(os.environ[Env.MEMBERSHIP]))
        parameter = os.environ.get(Env.MEMBERSHIP_PARAMETER)
        if parameter:
            from aws_lambda_powertools.utilities.parameters import SSMProvider

            from jobsched.adapters.aws.clients import client

            value = SSMProvider(boto3_client=client("ssm")).get(parameter, max_age=60)
            return cls.from_config(json.loads(str(value)))
        return cls()

    def principal(self, arn: str, role_tags: RoleTags | None = None) -> Principal:
        forms = identity_forms(arn)

        def matches(pattern: str) -> bool:
            return any(fnmatch.fnmatchcase(form, pattern) for form in forms)

        admin = any(matches(pattern) for pattern in self.admins)
        teams = {team for team, patterns in self.teams.items() if any(matches(p) for p in patterns)}
        for pattern in self.team_patterns:
            regex = "^" + re.escape(pattern).replace(r"\{team\}", "(?P<team>[a-z0-9-]+)").replace(r"\*", ".*") + "$"
            for form in forms:
                match = re.match(regex, form)
                if match:
                    teams.add(match.group("team"))
        role = role_name(arn)
        if self.team_tag and role_tags is not None and role is not None:
            team = role_tags(role).get(self.team_tag)
            if team:
                teams.add(team)
        return Principal(arn, frozenset(teams), admin)


def role_name(arn: str) -> str | None:
    """The IAM role behind a role or assumed-role ARN (None for users and others)."""
    found = role_of(arn)
    return found[1] if found else None


def identity_forms(arn: str) -> tuple[str, ...]:
    """The ARN as reported, and for an assumed role also the role's own ARN (what admins write)."""
    match = ASSUMED_ROLE.fullmatch(arn)
    if match is None:
        return (arn,)
    partition, account, role, _ = match.groups()
    return arn, f"arn:{partition}:iam::{account}:role/{role}"


class MembershipCache:
    """The current membership, reloaded at most every ``ttl`` seconds; role tags cached as long."""

    def __init__(
        self,
        load: Callable[[], Membership],
        *,
        role_tags: RoleTags | None = None,
        ttl: float = MEMBERSHIP_TTL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.load, self.role_tags_source, self.ttl, self.monotonic = load, role_tags, ttl, monotonic
        self._current: tuple[float, Membership] | None = None
        self._tags: dict[str, tuple[float, dict[str, str]]] = {}
        self._lock = threading.Lock()

    def current(self) -> Membership:
        now = self.monotonic()
        with self._lock:
            if self._current is None or now - self._current[0] >= self.ttl:
                self._current = (now, self.load())
            return self._current[1]

    def principal(self, arn: str) -> Principal:
        return self.current().principal(arn, self._role_tags if self.role_tags_source else None)

    def priorities_for(self, team: str) -> tuple[str, ...]:
        return self.current().priorities_for(team)

    def team_grants(self) -> TeamGrants:
        return self.current().grants

    def _role_tags(self, role: str) -> dict[str, str]:
        assert self.role_tags_source is not None
        now = self.monotonic()
        cached = self._tags.get(role)
        if cached is None or now - cached[0] >= self.ttl:
            cached = (now, self.role_tags_source(role))
            self._tags[role] = cached
        return cached[1]


def iam_role_tags(role: str) -> dict[str, str]:
    """A role's tags (iam:ListRoleTags); an unknown role has none."""
    from botocore.exceptions import ClientError

    from jobsched.adapters.aws.clients import client

    try:
        found = client("iam").list_role_tags(RoleName=role, MaxItems=50)["Tags"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("NoSuchEntity", "AccessDenied"):
            return {}
        raise
    return {tag["Key"]: tag["Value"] for tag in found}


def caller_arn(event: dict[str, Any]) -> str:
    """The IAM caller API Gateway authenticated (SigV4), from the request context."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    arn = identity.get("userArn") or identity.get("caller")
    if not arn:
        raise Unauthenticated("no caller identity: sign the request with SigV4 (IAM)")
    return str(arn)
