"""What the local stack trusts (#26), through the real local gateway of a running ``make run``: another website
in the developer's browser, a DNS-rebinding name, and one team's member looking at another team's console pages.
Each request below is the one the security review reproduced, as a browser would send it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import urllib3

from infra.local.runtime import DEFAULT_ADMIN, TEAM_PATTERN, LocalRuntime
from tests.e2e import running_stack

HTTP = urllib3.PoolManager(retries=False)
FORM = "application/x-www-form-urlencoded"
JOB = {"schedule": {"expression": "0 3 * * *"}, "target": {"type": "lambda", "function": "jobsched-example-echo"}}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    for started in running_stack(tmp_path_factory.mktemp("trust"), tick_seconds=5.0, examples=False):
        for team in ("alpha", "beta"):
            assert as_team(started, team, "PUT", f"/teams/{team}/jobs/nightly", JOB)[0] == 201
        paused = as_team(started, "beta", "POST", "/teams/beta/jobs/nightly/pause", {"reason": "beta's secret INC-9"})
        assert paused[0] == 200
        yield started


def as_team(runtime: LocalRuntime, team: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", "X-Jobsched-Principal": TEAM_PATTERN.format(team=team)}
    response = HTTP.request(method, runtime.api_url + path, body=json.dumps(body) if body else None, headers=headers)
    return response.status, json.loads(response.data) if response.data else None


def send(
    runtime: LocalRuntime, method: str, path: str, headers: dict[str, str], body: str = ""
) -> urllib3.BaseHTTPResponse:
    return HTTP.request(method, runtime.api_url + path, body=body or None, headers=headers)


def history(runtime: LocalRuntime) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = as_team(runtime, "alpha", "GET", "/teams/alpha/jobs/nightly/history")[1]["entries"]
    return entries


@pytest.mark.parametrize("action", ["trigger", "resume", "pause"])
def test_another_websites_form_post_changes_nothing(runtime: LocalRuntime, action: str) -> None:
    """A cross-site form post with no fields: 202 and audited as platform-admin before."""
    before = history(runtime)
    evil = {"Origin": "http://evil.example", "Content-Type": FORM, "Sec-Fetch-Site": "cross-site"}
    response = send(runtime, "POST", f"/teams/alpha/jobs/nightly/{action}", evil)
    assert response.status == 403 and json.loads(response.data)["error"]["code"] == "cross_site"
    # The same post from a browser that sends no Origin (fetch metadata only): refused too.
    response = send(
        runtime, "POST", f"/teams/alpha/jobs/nightly/{action}", {"Content-Type": FORM, "Sec-Fetch-Site": "cross-site"}
    )
    assert response.status == 403
    assert history(runtime) == before
    assert all(entry["principal"] != DEFAULT_ADMIN for entry in history(runtime))


def test_a_dns_rebinding_name_is_refused_whatever_origin_it_brings(runtime: LocalRuntime) -> None:
    port = runtime.port
    rebound = {"Host": f"rebind.attacker.test:{port}", "Origin": f"http://rebind.attacker.test:{port}"}
    console = send(
        runtime,
        "POST",
        "/console/act",
        {**rebound, "Content-Type": FORM},
        urlencode({"action": "pause", "job": "alpha/nightly", "reason": "x"}),
    )
    assert console.status == 403 and b"Paused" not in console.data
    api = send(
        runtime,
        "POST",
        "/teams/alpha/jobs/nightly/pause",
        {**rebound, "Content-Type": "application/json"},
        '{"reason": "x"}',
    )
    assert api.status == 403 and json.loads(api.data)["error"]["code"] == "host_not_allowed"
    assert send(runtime, "GET", "/teams/alpha/jobs", {"Host": f"rebind.attacker.test:{port}"}).status == 403
    assert as_team(runtime, "alpha", "GET", "/teams/alpha/jobs/nightly")[1]["state"] == "ACTIVE"


def test_a_console_post_without_an_origin_is_refused(runtime: LocalRuntime) -> None:
    headers = {"Content-Type": FORM, "X-Jobsched-Principal": TEAM_PATTERN.format(team="alpha")}
    form = urlencode({"action": "pause", "job": "alpha/nightly", "reason": "no origin"})
    assert send(runtime, "POST", "/console/act", headers, form).status == 403
    assert send(runtime, "POST", "/console/act", {**headers, "Origin": runtime.api_url}, form).status == 200
    assert as_team(runtime, "alpha", "POST", "/teams/alpha/jobs/nightly/resume")[0] == 200


def test_a_browser_is_never_the_admin_by_default(runtime: LocalRuntime) -> None:
    browser = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}
    api = send(runtime, "GET", "/teams/beta/jobs", browser)
    assert api.status == 401
    page = send(runtime, "GET", "/console/teams/beta", browser)
    assert page.status == 401 and b"INC-9" not in page.data
    # The link make run prints carries the key; the page then keeps it in a SameSite=Strict cookie.
    keyed = send(runtime, "GET", f"/console/teams/beta?key={runtime.gateway.console_key}", browser)
    assert keyed.status == 200 and b"INC-9" in keyed.data
    cookie = keyed.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    again = send(runtime, "GET", "/console/teams/beta", {**browser, "Cookie": cookie.split(";", 1)[0]})
    assert again.status == 200 and b"INC-9" in again.data
    assert send(runtime, "GET", "/console/teams/beta?key=guessed", browser).status == 401
    assert (
        keyed.headers["X-Frame-Options"] == "DENY"
        and "frame-ancestors 'none'" in keyed.headers["Content-Security-Policy"]
    )


@pytest.mark.parametrize(
    "path",
    [
        "/console/teams/beta",
        "/console/teams/beta/timeline",
        "/console/teams/beta/jobs/nightly",
        "/console/teams/beta/jobs/nightly/runs/20270104T030000Z",
        "/console/act?action=resume&job=beta%2Fnightly",
    ],
)
def test_a_member_of_one_team_sees_no_console_page_of_another(runtime: LocalRuntime, path: str) -> None:
    alpha = {"X-Jobsched-Principal": TEAM_PATTERN.format(team="alpha")}
    page = send(runtime, "GET", path, alpha)
    assert (
        page.status == 403
        and b"INC-9" not in page.data
        and b"nightly" not in page.data.split(b"<body", 1)[-1].split(b"not a member", 1)[-1]
    )
    assert as_team(runtime, "alpha", "GET", "/teams/beta/jobs/nightly")[0] == 403  # as the API answers


def test_the_console_index_and_incidents_list_only_the_callers_teams(runtime: LocalRuntime) -> None:
    alpha = {"X-Jobsched-Principal": TEAM_PATTERN.format(team="alpha")}
    index = send(runtime, "GET", "/console", alpha).data.decode()
    assert "/console/teams/alpha" in index and "/console/teams/beta" not in index
    assert send(runtime, "GET", "/console/teams/alpha", alpha).status == 200
    admin = send(runtime, "GET", "/console", {"X-Jobsched-Principal": DEFAULT_ADMIN}).data.decode()
    assert "/console/teams/beta" in admin


@pytest.mark.parametrize("days", ["\u00b2", "9" * 5000, "-1", "1e9"])
def test_a_days_value_that_is_no_number_shows_the_default_range(runtime: LocalRuntime, days: str) -> None:
    alpha = {"X-Jobsched-Principal": TEAM_PATTERN.format(team="alpha")}
    page = send(runtime, "GET", f"/console/teams/alpha/timeline?{urlencode({'days': days})}", alpha)
    assert page.status == 200 and b"nightly" in page.data
