"""Values a careless or hostile team sends, each of which gave a 5xx (an unhandled exception) before #26: every
one is a 4xx on its field now, and nothing is stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.aws.api_client import ADMIN, ApiClient, ApiResponse
from tests.aws.harness import Stack

JOB = {"schedule": {"expression": "0 * * * *"}, "target": {"type": "lambda", "function": "echo"}}


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    client = ApiClient(stack)
    assert client.call("PUT", "/teams/payments/jobs/hourly", JOB).status == 201
    return client


def refused(response: ApiResponse, field: str | None, status: int = 422) -> None:
    assert response.status == status, response.body
    error = response.body["error"]
    assert error["message"] and error["code"], error
    if field is not None:
        assert error["field"] == field, error


def test_a_token_signature_that_is_not_ascii_is_refused(api: ApiClient, stack: Stack) -> None:
    token = api.tokens.issue("payments/hourly", "20270104T090000Z", 1, expires_at=stack.clock() + timedelta(hours=1))
    version, kid, payload, _ = token.split(".")
    response = api.callback("heartbeat", f"{version}.{kid}.{payload}.ééééé")
    refused(response, "X-Jobsched-Token", 404)
    refused(api.callback("heartbeat", "v2.\u00e9.\u00e9.\u00e9"), "X-Jobsched-Token", 404)


@pytest.mark.parametrize(
    "method, path",
    [("PUT", "/teams/payments/jobs/deep"), ("POST", "/validate"), ("POST", "/teams/payments/jobs/hourly/trigger")],
)
def test_a_body_nested_without_end_is_refused_before_it_is_parsed(api: ApiClient, method: str, path: str) -> None:
    deep = "[" * 60_000 + "]" * 60_000
    response = api.call(method, path, raw_body='{"payload": ' + deep + "}")
    refused(response, "body")
    assert "deep" in response.body["error"]["message"]
    assert api.call("GET", "/teams/payments/jobs/deep").status == 404


def test_a_body_nested_a_little_is_still_accepted(api: ApiClient) -> None:
    nested: Any = {"leaf": 1}
    for _ in range(30):
        nested = {"child": nested}
    response = api.call("POST", "/teams/payments/jobs/hourly/trigger", {"payload": nested})
    assert response.status == 202, response.body


@pytest.mark.parametrize("value", ["99999999999999d", "P99999999999999D", "99999999999999999999s", "9" * 5000 + "h"])
def test_a_huge_duration_is_a_422_on_its_field(api: ApiClient, value: str) -> None:
    job = {**JOB, "target": {"type": "callback", "timeout": value}}
    refused(api.call("PUT", "/teams/payments/jobs/huge", job), "target.timeout")
    refused(api.call("GET", f"/teams/payments/jobs/hourly/health?window={value[:16]}"), "window")


@pytest.mark.parametrize("year", ["0001", "9999"])
def test_an_instant_outside_the_years_a_schedule_can_reach_is_a_422(api: ApiClient, year: str) -> None:
    at = f"{year}-12-31T23:59:59Z" if year == "9999" else f"{year}-01-01T00:00:00Z"
    job = {**JOB, "schedule": {"expression": "0 * * * *", "start_at": at}}
    refused(api.call("PUT", "/teams/payments/jobs/ancient", job), "schedule.start_at")
    refused(api.call("GET", f"/teams/payments/jobs/hourly/preview?after={at}"), "after")
    backfill = {"from": at, "to": "2027-01-01T00:00:00Z"}
    refused(api.call("POST", "/teams/payments/jobs/hourly/backfill", backfill), "from")
    assert api.call("GET", "/teams/payments/jobs/ancient").status == 404


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "9" * 5000, "-1"])
def test_an_if_match_that_is_not_a_version_is_a_422(api: ApiClient, value: str) -> None:
    refused(api.call("PUT", "/teams/payments/jobs/hourly", JOB, headers={"If-Match": value}), "If-Match")
    refused(api.call("DELETE", "/teams/payments/jobs/hourly", headers={"If-Match": value}), "If-Match")
    assert api.call("GET", "/teams/payments/jobs/hourly").status == 200


@pytest.mark.parametrize("value", [True, "5", 5.5, 2**70])
def test_team_limits_are_strict_integers(api: ApiClient, value: object) -> None:
    response = api.call("PUT", "/admin/teams/payments", {"max_running": value}, principal=ADMIN)
    refused(response, "max_running")
    assert api.call("GET", "/admin/teams/payments", principal=ADMIN).body["overrides"] == {}


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "nul\x00", "\u4e2d"])
def test_a_header_value_that_is_not_one_line_of_latin1_is_refused(api: ApiClient, value: str) -> None:
    job = {**JOB, "target": {"type": "http", "url": "https://hooks.example.com/x", "headers": {"X-A": value}}}
    response = api.call("PUT", "/teams/payments/jobs/injected", job)
    refused(response, "target.headers")
    assert "X-A" in response.body["error"]["message"]
    assert api.call("GET", "/teams/payments/jobs/injected").status == 404


def test_a_job_stored_before_a_check_was_added_still_reads() -> None:
    """A stricter release never makes a stored spec unreadable: the dispatcher reads due jobs in batches."""
    from jobsched.core.records import StoredJob
    from jobsched.core.spec import JobSpec

    spec = JobSpec.model_validate({**JOB, "name": "old", "team": "payments"})
    now = datetime(2027, 1, 4, tzinfo=UTC)
    values = StoredJob(spec, 1, "ACTIVE", now, now, "test").to_values()
    document = json.loads(values["spec"])
    document["target"] = {"type": "http", "url": "https://hooks.example.com/x", "headers": {"X-A": "a\r\nb"}}
    document["schedule"]["start_at"] = "9999-12-31T00:00:00Z"
    read = StoredJob.from_values({**values, "spec": json.dumps(document)})
    assert read.spec.target.headers == {"X-A": "a\r\nb"}  # type: ignore[union-attr]


@pytest.mark.parametrize("host", ["[::a9fe:a9fe]", "[::ffff:0:a9fe:a9fe]", "[fec0::1]", "[::ffff:0:a00:1]"])
def test_an_ipv6_form_of_a_private_address_is_refused_at_put(api: ApiClient, host: str) -> None:
    job = {**JOB, "target": {"type": "http", "url": f"https://{host}/hook"}}
    refused(api.call("PUT", "/teams/payments/jobs/ssrf", job), "target.url")
