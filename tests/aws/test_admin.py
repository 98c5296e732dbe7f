"""Platform admins set a team's limits through the API (#17); members of the team get 403."""

from __future__ import annotations

import pytest

from tests.aws.api_client import ApiClient, team_role
from tests.aws.harness import Stack

JOB = {"schedule": {"expression": "0 * * * *"}, "target": {"type": "lambda", "function": "echo"}}


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


def test_an_admin_reads_the_defaults_then_sets_and_resets_a_teams_limits(api: ApiClient, stack: Stack) -> None:
    read = api.call("GET", "/admin/teams/payments")
    assert read.status == 200 and read.body["overrides"] == {}
    assert read.body["limits"] == read.body["defaults"] == stack.jobs.team_defaults.as_dict()
    put = api.call("PUT", "/admin/teams/payments", {"max_running": 50, "max_jobs": 2})
    assert put.status == 200 and put.body["overrides"] == {"max_running": 50, "max_jobs": 2}
    assert put.body["limits"]["max_running"] == 50 and put.body["limits"]["max_backfills"] == 5
    assert stack.jobs.team_limits("payments").max_running == 50, "the store holds the team to it"
    # Absent keys are left alone; null returns a limit to the default.
    again = api.call("PUT", "/admin/teams/payments", {"max_jobs": None})
    assert again.body["overrides"] == {"max_running": 50}
    assert again.body["limits"]["max_jobs"] == stack.jobs.team_defaults.max_jobs
    # #49: each change is in the team's history, newest first: who, from what, to what.
    history = api.call("GET", "/admin/teams/payments/history").body["entries"]
    assert [entry["action"] for entry in history] == ["team_limits", "team_limits"]
    assert history[0]["details"] == {"before": {"max_running": 50, "max_jobs": 2}, "changes": {"max_jobs": None}}
    assert history[1]["details"] == {"before": {}, "changes": {"max_running": 50, "max_jobs": 2}}
    assert history[0]["principal"] and history[0]["version"] == 2
    member = api.call("GET", "/admin/teams/payments/history", principal=team_role("payments"))
    assert member.status == 403


def test_the_new_max_jobs_is_enforced_on_the_next_create(api: ApiClient) -> None:
    assert api.call("PUT", "/admin/teams/ops", {"max_jobs": 1}).status == 200
    assert api.call("PUT", "/teams/ops/jobs/first", JOB).status == 201
    refused = api.call("PUT", "/teams/ops/jobs/second", JOB)
    assert refused.status == 429 and refused.body["error"]["field"] == "max_jobs"


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_a_team_member_gets_403_and_nothing_changes(api: ApiClient, stack: Stack, method: str) -> None:
    response = api.call(method, "/admin/teams/payments", {"max_running": 10_000}, principal=team_role("payments"))
    assert response.status == 403 and response.body["error"]["code"] == "forbidden"
    assert stack.jobs.team_overrides("payments") == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_running": 0}, "max_running"),
        ({"max_jobs": "many"}, "max_jobs"),
        ({"max_running": 10**9}, "max_running"),
        ({"max_runing": 5}, "max_runing"),
    ],
)
def test_bad_limits_get_422_on_the_field_and_nothing_is_written(
    api: ApiClient, stack: Stack, body: dict[str, object], field: str
) -> None:
    response = api.call("PUT", "/admin/teams/payments", body)
    assert response.status == 422 and response.body["error"]["field"] == field
    assert stack.jobs.team_overrides("payments") == {}


def test_a_team_name_that_cannot_exist_is_refused(api: ApiClient) -> None:
    assert api.call("GET", "/admin/teams/Not_A_Team").status == 422


def test_jobsched_admin_quota_shows_sets_and_resets(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.aws.api_client import ADMIN, cli_as

    api = ApiClient(stack)
    run = cli_as(api, ADMIN, monkeypatch)

    code, output = run("admin", "quota", "payments", "--set", "max_running=40", "--set", "max_jobs=3")
    assert code == 0, output
    assert "max_running            40   40            20" in output and "max_jobs               3    3" in output
    code, output = run("admin", "quota", "payments", "--reset", "max_jobs", "-o", "json")
    assert code == 0 and '"overrides": {\n    "max_running": 40\n  }' in output
    code, output = run("admin", "quota", "payments", "--set", "max_running=lots")
    assert code == 2 and "LIMIT=N" in output
    run = cli_as(api, team_role("payments"), monkeypatch)
    code, output = run("admin", "quota", "payments", "--set", "max_running=1000")
    assert code == 1 and "not a platform admin" in output
    assert stack.jobs.team_overrides("payments") == {"max_running": 40}
