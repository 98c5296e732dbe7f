"""Who is a member: assumed-role ARNs, role tags, reload within a minute, no header override in Lambda."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.clients import reset_clients
from jobsched.api.identity import (
    Membership,
    MembershipCache,
    Unauthenticated,
    caller_arn,
    iam_role_tags,
)

ACCOUNT = "123456789012"
ASSUMED = f"arn:aws:sts::{ACCOUNT}:assumed-role/team-payments/ci-session-42"


def test_an_assumed_role_arn_matches_patterns_written_for_the_role() -> None:
    by_pattern = Membership.from_config({"team_patterns": [f"arn:aws:iam::{ACCOUNT}:role/team-{{team}}"]})
    assert by_pattern.principal(ASSUMED).teams == {"payments"}
    listed = Membership.from_config({"teams": {"billing": [f"arn:aws:iam::{ACCOUNT}:role/team-payments"]}})
    assert listed.principal(ASSUMED).teams == {"billing"}
    sessions = Membership.from_config({"teams": {"ops": [f"arn:aws:sts::{ACCOUNT}:assumed-role/team-payments/ci-*"]}})
    assert sessions.principal(ASSUMED).teams == {"ops"}
    admins = Membership.from_config({"admins": [f"arn:aws:iam::{ACCOUNT}:role/team-payments"]})
    assert admins.principal(ASSUMED).admin


def test_a_role_name_alone_does_not_make_a_member_when_teams_come_from_tags() -> None:
    membership = Membership.from_config({"team_tag": "jobsched-team"})
    tags = {"team-payments": {}, "ci-runner": {"jobsched-team": "payments"}}
    assert membership.principal(ASSUMED, tags.__getitem__).teams == frozenset()
    runner = f"arn:aws:sts::{ACCOUNT}:assumed-role/ci-runner/build-7"
    assert membership.principal(runner, tags.__getitem__).teams == {"payments"}
    assert membership.principal(f"arn:aws:iam::{ACCOUNT}:user/alice", tags.__getitem__).teams == frozenset()


def test_removing_a_member_takes_effect_within_the_ttl() -> None:
    configs: list[dict[str, Any]] = [{"teams": {"payments": [ASSUMED]}}, {"teams": {}}]
    loads: list[int] = []

    def load() -> Membership:
        loads.append(1)
        return Membership.from_config(configs[min(len(loads) - 1, 1)])

    now = [0.0]
    cache = MembershipCache(load, ttl=60, monotonic=lambda: now[0])
    assert cache.principal(ASSUMED).teams == {"payments"}
    now[0] = 59.0
    assert cache.principal(ASSUMED).teams == {"payments"} and len(loads) == 1
    now[0] = 60.5
    assert cache.principal(ASSUMED).teams == frozenset() and len(loads) == 2


def test_role_tags_are_read_from_iam_and_cached() -> None:
    with mock_aws():
        reset_clients()
        iam = boto3.client("iam", region_name="us-east-1")
        iam.create_role(
            RoleName="ci-runner", AssumeRolePolicyDocument="{}", Tags=[{"Key": "jobsched-team", "Value": "data"}]
        )
        assert iam_role_tags("ci-runner") == {"jobsched-team": "data"}
        assert iam_role_tags("no-such-role") == {}
        reads: list[str] = []

        def counting(role: str) -> dict[str, str]:
            reads.append(role)
            return iam_role_tags(role)

        cache = MembershipCache(lambda: Membership.from_config({"team_tag": "jobsched-team"}), role_tags=counting)
        arn = f"arn:aws:sts::{ACCOUNT}:assumed-role/ci-runner/s"
        assert cache.principal(arn).teams == {"data"} and cache.principal(arn).teams == {"data"}
        assert reads == ["ci-runner"]
    reset_clients()


def test_no_header_or_environment_names_the_caller_in_the_deployed_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the signed identity API Gateway puts in the request context counts: a header naming an admin,
    with the environment variable the local runtime used to set, changes nothing."""
    from pathlib import Path

    import jobsched
    from infra.local.gateway import PRINCIPAL_HEADER, LocalGateway, proxy_event

    admin = "arn:aws:iam::123456789012:role/platform-admin"
    event = {"requestContext": {"identity": {"userArn": ASSUMED}}, "headers": {PRINCIPAL_HEADER: admin}}
    monkeypatch.setenv("JOBSCHED_LOCAL_GATEWAY", "1")
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    assert caller_arn(event) == ASSUMED
    with pytest.raises(Unauthenticated):
        caller_arn({"headers": {PRINCIPAL_HEADER: admin}})
    # The header is the local gateway's alone: it builds the request context, as API Gateway does.
    gateway = LocalGateway(lambda event, context: {}, principal=ASSUMED)
    named = gateway.caller({PRINCIPAL_HEADER: admin}, None)
    assert caller_arn(proxy_event("GET", "/teams/payments/jobs", {}, None, named)) == admin
    assert caller_arn(proxy_event("GET", "/teams/payments/jobs", {}, None, gateway.caller({}, None))) == ASSUMED
    gateway.server.server_close()
    # What the API Lambda runs (the api package, its handler, the stores) never mentions the header.
    package = Path(jobsched.__file__).parent
    deployed = [*(package / "api").rglob("*.py"), *(package / "aws").rglob("*.py"), package.parents[1] / "functions"]
    files = [path for place in deployed for path in ([place] if place.is_file() else place.rglob("*.py"))]
    assert files and not [path for path in files if PRINCIPAL_HEADER in path.read_text().lower()]
