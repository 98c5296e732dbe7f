"""No noisy neighbours (#13, first part): what one team sends cannot stall a shared component."""

from __future__ import annotations

import time

import pytest

from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import Stack

NOISY = {
    "schedule": {"expression": "* * * * *", "blackouts": [{"cron": "* * 1 12 *", "duration": "31d"}]},
    "target": {"type": "lambda", "function": "echo"},
}


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


def test_put_refuses_a_schedule_that_would_stall_the_dispatcher(api: ApiClient, stack: Stack) -> None:
    started = time.perf_counter()
    response = api.call("PUT", "/teams/noisy/jobs/december", NOISY, principal=team_role("noisy"))
    assert response.status == 422 and response.body["error"]["field"] == "schedule"
    assert response.body["error"]["errors"][0]["code"] == "schedule_too_expensive"
    assert time.perf_counter() - started < 10
    assert stack.jobs.get("noisy/december") is None


def test_validate_refuses_it_too_and_answers_a_hostile_owner_in_milliseconds(api: ApiClient) -> None:
    result = api.call("POST", "/validate", NOISY | {"name": "december", "team": "noisy"}).body
    assert result["valid"] is False and result["errors"][0]["code"] == "schedule_too_expensive"
    hostile = {"name": "x", "team": "noisy", "owner": "a@" + "." * 16_000 + "@", "target": {"type": "callback"}}
    started = time.perf_counter()
    answer = api.call("POST", "/validate", hostile).body
    assert answer["valid"] is False and answer["errors"][0]["field"] == "owner"
    assert time.perf_counter() - started < 0.5, "linear-time validation (the regex took 2.3 s)"


def test_high_priority_is_granted_by_the_platform_not_chosen_by_a_team(stack: Stack) -> None:
    from jobsched.api.identity import Membership
    from tests.aws.api_client import ACCOUNT, ADMIN

    api = ApiClient(stack)
    body = {"priority": "high", "target": {"type": "callback"}}
    refused = api.call("PUT", "/teams/eager/jobs/first", body, principal=team_role("eager"))
    assert refused.status == 422 and refused.body["error"]["field"] == "priority"
    assert refused.body["error"]["errors"][0]["code"] == "priority_not_granted"
    assert (
        api.call("PUT", "/teams/eager/jobs/first", body | {"priority": "low"}, principal=team_role("eager")).status
        == 201
    )

    api.services.membership = Membership.from_config(
        {
            "admins": [ADMIN],
            "team_patterns": [f"arn:aws:iam::{ACCOUNT}:role/team-{{team}}"],
            "priorities": {"payments": ["high", "normal", "low"]},
        }
    )
    assert api.call("PUT", "/teams/payments/jobs/ledger", body, principal=team_role("payments")).status == 201
    assert api.call("PUT", "/teams/eager/jobs/second", body, principal=team_role("eager")).status == 422
