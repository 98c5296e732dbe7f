"""Team sessions: the target role is assumed with the run's team as session tag, cached, renewed in time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.adapters.aws.ownership import RENEW_BEFORE_SECONDS, TeamSessions
from jobsched.adapters.aws.workflows import machine_suffix

ROLE = "arn:aws:iam::123456789012:role/jobsched-prod-targets"


class RecordingSts:
    """Stands in for STS: records each AssumeRole and hands out credentials valid for an hour."""

    class meta:
        region_name = "us-east-1"

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.calls: list[dict[str, Any]] = []

    def assume_role(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        expires = datetime.fromtimestamp(self.clock[0] + request["DurationSeconds"], UTC)
        n = len(self.calls)
        return {
            "Credentials": {"AccessKeyId": f"AK{n}", "SecretAccessKey": "s", "SessionToken": "t", "Expiration": expires}
        }


def test_each_team_gets_its_own_tagged_session_cached_until_shortly_before_expiry() -> None:
    clock = [1_000_000.0]
    sts = RecordingSts(clock)
    sessions = TeamSessions(ROLE, sts=sts, wall_clock=lambda: clock[0])
    first = sessions.client("payments", "sqs")
    assert sessions.client("payments", "sqs") is first
    sessions.client("payments", "lambda")
    sessions.client("data", "sqs")
    assert [c["Tags"] for c in sts.calls] == [
        [{"Key": "jobsched-team", "Value": "payments"}],
        [{"Key": "jobsched-team", "Value": "data"}],
    ]
    assert all(c["RoleArn"] == ROLE and c["DurationSeconds"] == 3600 for c in sts.calls)
    assert sts.calls[0]["RoleSessionName"] == "jobsched-payments"

    clock[0] += 3600 - RENEW_BEFORE_SECONDS - 1
    assert sessions.client("payments", "sqs") is first, "still well within the hour"
    clock[0] += 2
    renewed = sessions.client("payments", "sqs")
    assert renewed is not first and len(sts.calls) == 3
    assert renewed._request_signer._credentials.access_key == "AK3"


def test_without_a_target_role_the_functions_own_clients_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobsched.adapters.aws.clients import client, reset_clients

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    reset_clients()
    assert TeamSessions(None).client("payments", "sqs") is client("sqs", None)


def test_state_machine_names_cannot_collide() -> None:
    assert machine_suffix("data/reports--daily", 60) != machine_suffix("data--reports/daily", 60)
    long_a, long_b = "t/" + "a" * 62 + "x", "t/" + "a" * 62 + "y"
    assert machine_suffix(long_a, 40) != machine_suffix(long_b, 40) and len(machine_suffix(long_a, 40)) <= 40
