"""The team API: every route, its error statuses and bodies, team isolation, concurrency, callbacks."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.aws.api_client import ADMIN, ApiClient, team_role
from tests.aws.harness import Clock, Stack

JOB = {
    "schedule": {"expression": "0 * * * *", "timezone": "Europe/Berlin"},
    "target": {"type": "lambda", "function": "echo"},
}


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


def put(api: ApiClient, team: str = "payments", name: str = "hourly", body: Any = None, **kw: Any) -> Any:
    return api.call("PUT", f"/teams/{team}/jobs/{name}", JOB if body is None else body, **kw)


def assert_error(response: Any, status: int, code: str, field: str | None = None) -> None:
    assert response.status == status, response.body
    assert response.body["error"]["code"] == code, response.body
    assert response.body["error"]["message"]
    if field is not None:
        assert response.body["error"]["field"] == field, response.body


class TestJobs:
    def test_create_then_replace_with_versions_and_etags(self, api: ApiClient) -> None:
        created = put(api, principal=team_role("payments"))
        assert created.status == 201 and created.headers["ETag"] == "1"
        assert created.body["version"] == 1 and created.body["state"] == "ACTIVE"
        assert created.body["next_fire_times"][0] == "2027-01-04T09:00:00Z"
        assert created.body["updated_by"] == team_role("payments")
        replaced = put(api, body=JOB | {"description": "v2"}, headers={"If-Match": "1"})
        assert replaced.status == 200 and replaced.body["version"] == 2

    def test_if_match_mismatch_is_412_and_changes_nothing(self, api: ApiClient) -> None:
        put(api)
        stale = put(api, body=JOB | {"description": "lost update"}, headers={"If-Match": "7"})
        assert_error(stale, 412, "version_mismatch", "If-Match")
        assert api.call("GET", "/teams/payments/jobs/hourly").body["version"] == 1

    def test_invalid_spec_lists_every_error_with_its_field(self, api: ApiClient) -> None:
        bad = {"schedule": {"expression": "0 25 * * *", "timezone": "Mars/Base"}, "target": {"type": "lamda"}}
        response = put(api, body=bad)
        assert response.status == 422
        fields = {e["field"] for e in response.body["error"]["errors"]}
        assert {"schedule.expression", "schedule.timezone", "target"} <= fields
        assert api.call("GET", "/teams/payments/jobs/hourly").status == 404, "nothing stored"

    def test_checks_that_cannot_be_evaluated_are_a_422_on_their_field_and_store_nothing(self, api: ApiClient) -> None:
        sqs = {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q"}
        for body, code, field in (
            (JOB | {"checks": [{"expect": "output.rows >"}]}, "invalid_check", "checks[0].expect"),
            (
                JOB | {"checks": [{"expect": "output.rows > 0"}, {"json_schema": {"pattern": "(a+)+$"}}]},
                "invalid_check_schema",
                "checks[1].json_schema",
            ),
            (JOB | {"checks": [{"severity": "warn"}]}, "check_form", "checks[0]"),
            ({"target": sqs, "checks": [{"expect": "output > 1"}]}, "checks_need_output", "checks"),
        ):
            response = put(api, body=body)
            assert response.status == 422, response.body
            (error,) = response.body["error"]["errors"]
            assert (error["code"], error["field"]) == (code, field), error
        assert api.call("GET", "/teams/payments/jobs/hourly").status == 404, "nothing stored"

    def test_body_naming_another_job_is_refused(self, api: ApiClient) -> None:
        assert_error(put(api, body=JOB | {"name": "other"}), 422, "path_mismatch", "name")

    def test_bad_names_in_the_path(self, api: ApiClient) -> None:
        response = put(api, name="Bad_Name")
        assert response.status == 422 and response.body["error"]["field"] == "name"

    def test_a_dag_job_gets_its_state_machine_and_loses_it_with_the_job(self, api: ApiClient, stack: Stack) -> None:
        dag = {"dag": {"tasks": [{"name": "a", "target": {"type": "callback"}}]}}
        assert put(api, body=dag).status == 201
        assert stack.workflows.definition("payments/hourly") is not None
        assert api.call("DELETE", "/teams/payments/jobs/hourly").status == 204
        assert stack.workflows.definition("payments/hourly") is None

    def test_dag_jobs_are_refused_where_step_functions_is_not_configured(self, stack: Stack) -> None:
        api = ApiClient(stack)
        api.services.dags = None
        dag = {"dag": {"tasks": [{"name": "a", "target": {"type": "callback"}}]}}
        assert_error(put(api, body=dag), 422, "unsupported", "dag")
        assert api.call("GET", "/teams/payments/jobs/hourly").status == 404, "nothing stored"

    def test_body_over_256_kb_is_413(self, api: ApiClient) -> None:
        huge = JOB | {"description": "x" * 300_000}
        assert_error(put(api, body=huge), 413, "body_too_large")

    def test_malformed_json_is_a_4xx(self, api: ApiClient) -> None:
        response = api.call("PUT", "/teams/payments/jobs/hourly", raw_body="{not json")
        assert 400 <= response.status < 500 and "error" in response.body

    def test_get_list_paginate_and_filter(self, api: ApiClient) -> None:
        for index in range(5):
            put(api, name=f"job-{index}", body=JOB | {"tags": {"tier": "gold" if index % 2 else "silver"}})
        api.call("POST", "/teams/payments/jobs/job-3/pause", {"reason": "maintenance"})
        names: list[str] = []
        token = None
        for _ in range(5):
            query = f"?limit=2&next_token={token}" if token else "?limit=2"
            page = api.call("GET", f"/teams/payments/jobs{query}")
            assert page.status == 200 and len(page.body["jobs"]) <= 2
            names += [job["name"] for job in page.body["jobs"]]
            token = page.body["next_token"]
            if not token:
                break
        assert names == [f"job-{i}" for i in range(5)]
        paused = api.call("GET", "/teams/payments/jobs?state=PAUSED").body["jobs"]
        assert [j["name"] for j in paused] == ["job-3"] and paused[0]["paused_reason"] == "maintenance"
        gold = api.call("GET", "/teams/payments/jobs?tag=tier=gold").body["jobs"]
        assert [j["name"] for j in gold] == ["job-1", "job-3"]
        assert_error(api.call("GET", "/teams/payments/jobs?limit=1000"), 422, "invalid_request", "limit")

    def test_delete(self, api: ApiClient) -> None:
        put(api)
        assert api.call("DELETE", "/teams/payments/jobs/hourly", headers={"If-Match": "9"}).status == 412
        assert api.call("DELETE", "/teams/payments/jobs/hourly").status == 204
        assert_error(api.call("GET", "/teams/payments/jobs/hourly"), 404, "job_not_found")
        assert_error(api.call("DELETE", "/teams/payments/jobs/hourly"), 404, "job_not_found")

    def test_pause_and_resume(self, api: ApiClient) -> None:
        put(api)
        assert_error(api.call("POST", "/teams/payments/jobs/hourly/pause", {}), 422, "invalid_request", "reason")
        paused = api.call("POST", "/teams/payments/jobs/hourly/pause", {"reason": "incident 42"})
        assert paused.status == 200 and paused.body["state"] == "PAUSED" and paused.body["next_fire_times"] == []
        resumed = api.call("POST", "/teams/payments/jobs/hourly/resume")
        assert resumed.body["state"] == "ACTIVE" and resumed.body["next_fire_times"]

    def test_preview_and_validate(self, api: ApiClient) -> None:
        put(api)
        preview = api.call("GET", "/teams/payments/jobs/hourly/preview?count=3&after=2027-03-28T00:30:00Z")
        assert [e["utc"] for e in preview.body] == [
            "2027-03-28T01:00:00Z",
            "2027-03-28T02:00:00Z",
            "2027-03-28T03:00:00Z",
        ]
        # #49: skipped instants come with their reasons, as the CLI's preview shows them.
        quiet = {
            **JOB,
            "schedule": {
                "expression": "0 9 * * *",
                "timezone": "Europe/London",
                "calendar": {"exclude_dates": ["2027-03-30"], "business_days_only": True},
            },
        }
        assert api.call("PUT", "/teams/payments/jobs/daily", quiet).status == 201
        days = api.call("GET", "/teams/payments/jobs/daily/preview?count=2&after=2027-03-26T12:00:00Z").body
        assert [e["utc"] for e in days] == ["2027-03-29T08:00:00Z", "2027-03-31T08:00:00Z"]
        skipped = [(s["local"][:10], s["reason"]) for s in days[0]["skipped"]]
        assert [day for day, _ in skipped] == ["2027-03-27", "2027-03-28"] and all(reason for _, reason in skipped)
        assert [s["local"][:10] for s in days[1]["skipped"]] == ["2027-03-30"]
        ok = api.call("POST", "/validate", {"name": "x", "team": "t", **JOB})
        assert ok.status == 200 and ok.body["valid"] and len(ok.body["next_fire_times"]) == 5
        bad = api.call("POST", "/validate", {"name": "x", "team": "t", "target": {"type": "sqs"}})
        assert bad.status == 200 and not bad.body["valid"] and bad.body["errors"][0]["field"] == "target.queue_url"


class TestRunsAndTriggers:
    def test_trigger_with_an_idempotency_key_returns_the_same_run(self, api: ApiClient, stack: Stack) -> None:
        put(api)
        first = api.call(
            "POST", "/teams/payments/jobs/hourly/trigger", {"payload": {"a": 1}}, headers={"Idempotency-Key": "k"}
        )
        again = api.call(
            "POST", "/teams/payments/jobs/hourly/trigger", {"payload": {"a": 1}}, headers={"Idempotency-Key": "k"}
        )
        assert first.status == again.status == 202 and first.body["run_id"] == again.body["run_id"]
        stack.pump()
        run = api.call("GET", f"/teams/payments/jobs/hourly/runs/{first.body['run_id']}")
        assert run.body["status"] == "SUCCEEDED" and run.body["trigger"] == "manual"
        assert [e["payload"] for _, e in stack.lambdas.calls] == [{"a": 1}]

    def test_a_payload_no_target_would_pass_on_is_refused_never_dropped(self, api: ApiClient, stack: Stack) -> None:
        """A DAG whose tasks read no {{ run.payload }}, and a target that takes no payload: 422 on the field, and
        no run; a DAG that reads it takes it."""
        echo = {"type": "lambda", "function": "echo"}
        put(api, name="flow", body={"dag": {"tasks": [{"name": "a", "target": echo}]}})
        put(api, name="external", body={"target": {"type": "callback"}})
        reads = {"name": "a", "target": {**echo, "payload": {"day": "{{ run.payload.day }}"}}}
        put(api, name="reads", body={"dag": {"tasks": [reads]}})
        for job in ("flow", "external"):
            refused = api.call("POST", f"/teams/payments/jobs/{job}/trigger", {"payload": {"day": "2027-01-03"}})
            assert_error(refused, 422, "payload_not_taken", "payload")
            assert api.call("GET", f"/teams/payments/jobs/{job}/runs").body["runs"] == []
        assert api.call("POST", "/teams/payments/jobs/flow/trigger", {}).status == 202  # no payload: fine
        taken = api.call("POST", "/teams/payments/jobs/reads/trigger", {"payload": {"day": "2027-01-03"}})
        assert taken.status == 202, taken.body

    def test_runs_newest_first_with_status_filter_and_pagination(
        self, api: ApiClient, stack: Stack, clock: Clock
    ) -> None:
        put(api, body={"schedule": {"expression": "* * * * *"}, "target": {"type": "lambda", "function": "echo"}})
        for _ in range(4):
            stack.tick()
            clock.advance(timedelta(minutes=1))
            stack.pump()
        page = api.call("GET", "/teams/payments/jobs/hourly/runs?limit=3")
        assert [r["run_id"][9:13] for r in page.body["runs"]] == ["0903", "0902", "0901"]
        rest = api.call("GET", f"/teams/payments/jobs/hourly/runs?limit=3&next_token={page.body['next_token']}")
        assert [r["run_id"][9:13] for r in rest.body["runs"]] == ["0900"]
        assert api.call("GET", "/teams/payments/jobs/hourly/runs?status=FAILED").body["runs"] == []
        assert_error(api.call("GET", "/teams/payments/jobs/hourly/runs?status=DONE"), 422, "invalid_status", "status")
        assert_error(api.call("GET", "/teams/payments/jobs/hourly/runs/nope"), 404, "run_not_found", "run_id")

    def test_backfill_and_its_progress(self, api: ApiClient, stack: Stack) -> None:
        put(api)
        started = api.call(
            "POST",
            "/teams/payments/jobs/hourly/backfill",
            {"from": "2027-01-03T00:00:00Z", "to": "2027-01-03T05:00:00Z", "max_in_flight": 2},
        )
        assert started.status == 202 and started.body["total"] == 6
        stack.tick()
        stack.pump()
        progress = api.call("GET", f"/teams/payments/jobs/hourly/backfills/{started.body['backfill_id']}")
        assert progress.status == 200 and progress.body["sent"] == 2
        backwards = api.call(
            "POST",
            "/teams/payments/jobs/hourly/backfill",
            {"from": "2027-01-03T05:00:00Z", "to": "2027-01-03T00:00:00Z"},
        )
        assert_error(backwards, 422, "invalid_range", "to")
        assert_error(api.call("GET", "/teams/payments/jobs/hourly/backfills/none"), 404, "not_found")
        # The future belongs to the schedule: a backfill ahead of now would claim its run ids first.
        ahead = api.call(
            "POST",
            "/teams/payments/jobs/hourly/backfill",
            {"from": "2027-01-04T08:00:00Z", "to": "2027-01-05T10:00:00Z"},
        )
        assert_error(ahead, 422, "backfill_in_future", "to")


class TestCallbacks:
    def running_callback(self, api: ApiClient, stack: Stack, clock: Clock, retries: int = 1) -> dict[str, Any]:
        clock.set("2027-01-04T09:59:30Z")
        put(
            api,
            name="cb",
            body={
                "schedule": {"expression": "0 * * * *"},
                "target": {"type": "callback", "timeout": "1h"},
                "heartbeat_timeout": "5m",
                "retry": {"max_attempts": retries, "backoff": {"initial": "10s"}},
            },
        )
        stack.tick()
        clock.set("2027-01-04T10:00:00Z")
        stack.pump()
        run: dict[str, Any] = api.call("GET", "/teams/payments/jobs/cb/runs/20270104T100000Z").body
        assert run["status"] == "RUNNING" and run["callback_token"]
        return run

    def test_heartbeat_and_complete_without_team_credentials(self, api: ApiClient, stack: Stack, clock: Clock) -> None:
        token = self.running_callback(api, stack, clock)["callback_token"]
        beat = api.callback("heartbeat", token)
        assert beat.status == 200 and beat.body["status"] == "RUNNING"
        done = api.callback("complete", token, {"status": "succeeded", "output": "42 rows"})
        assert done.status == 200 and done.body["status"] == "SUCCEEDED" and done.body["output"] == "42 rows"
        again = api.callback("complete", token, {"status": "failed", "error": "late"})
        assert_error(again, 409, "attempt_superseded")
        assert stack.live_slot_holders("payments/cb", "STATE") == {}

    def test_complete_takes_the_status_in_either_case_and_json_output(
        self, api: ApiClient, stack: Stack, clock: Clock
    ) -> None:
        """Runs are upper case everywhere and checks read output as JSON: both forms are taken (#46)."""
        token = self.running_callback(api, stack, clock)["callback_token"]
        done = api.callback("complete", token, {"status": "SUCCEEDED", "output": {"rows": 42, "tables": ["a"]}})
        assert done.status == 200 and done.body["status"] == "SUCCEEDED", done.body
        assert json.loads(done.body["output"]) == {"rows": 42, "tables": ["a"]}
        assert_error(api.callback("complete", token, {"status": "DONE"}), 422, "invalid_request", "status")

    def test_a_superseded_attempts_token_changes_nothing(self, api: ApiClient, stack: Stack, clock: Clock) -> None:
        first = self.running_callback(api, stack, clock, retries=3)["callback_token"]
        failed = api.callback("complete", first, {"status": "failed", "error": "disk full"})
        assert failed.body["status"] == "RETRYING"
        clock.advance(timedelta(seconds=15))
        stack.pump()
        second = api.call("GET", "/teams/payments/jobs/cb/runs/20270104T100000Z").body
        assert second["attempt"] == 2 and second["callback_token"] != first
        assert_error(
            api.callback("heartbeat", first),
            409,
            "attempt_superseded",
        )
        late = api.callback("complete", first, {"status": "succeeded"})
        assert_error(late, 409, "attempt_superseded")
        assert api.call("GET", "/teams/payments/jobs/cb/runs/20270104T100000Z").body["status"] == "RUNNING"

    def test_forged_token_is_404(self, api: ApiClient, stack: Stack, clock: Clock) -> None:
        token = self.running_callback(api, stack, clock)["callback_token"]
        forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
        assert_error(
            api.callback("heartbeat", forged),
            404,
            "unknown_run_token",
        )

    def test_cancel(self, api: ApiClient, stack: Stack, clock: Clock) -> None:
        self.running_callback(api, stack, clock)
        cancelled = api.call("POST", "/teams/payments/jobs/cb/runs/20270104T100000Z/cancel")
        assert cancelled.status == 200 and cancelled.body["status"] == "CANCELLED"
        assert_error(
            api.call("POST", "/teams/payments/jobs/cb/runs/20270104T100000Z/cancel"), 409, "attempt_superseded"
        )


ROUTES = [
    ("PUT", "/teams/payments/jobs/hourly", JOB),
    ("GET", "/teams/payments/jobs", None),
    ("GET", "/teams/payments/jobs/hourly", None),
    ("DELETE", "/teams/payments/jobs/hourly", None),
    ("POST", "/teams/payments/jobs/hourly/pause", {"reason": "x"}),
    ("POST", "/teams/payments/jobs/hourly/resume", None),
    ("POST", "/teams/payments/jobs/hourly/trigger", None),
    ("POST", "/teams/payments/jobs/hourly/backfill", {"from": "2027-01-01T00:00:00Z", "to": "2027-01-01T03:00:00Z"}),
    ("GET", "/teams/payments/jobs/hourly/backfills/x", None),
    ("GET", "/teams/payments/jobs/hourly/runs", None),
    ("GET", "/teams/payments/jobs/hourly/runs/20270104T100000Z", None),
    ("POST", "/teams/payments/jobs/hourly/runs/20270104T100000Z/cancel", None),
    ("GET", "/teams/payments/jobs/hourly/preview", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_another_teams_identity_is_refused_and_changes_nothing(
    api: ApiClient, method: str, path: str, body: Any
) -> None:
    put(api, principal=team_role("payments"))
    before = api.call("GET", "/teams/payments/jobs/hourly").body
    response = api.call(method, path, body, principal=team_role("marketing"))
    assert_error(response, 403, "forbidden", "team")
    assert api.call("GET", "/teams/payments/jobs/hourly").body == before
    assert api.call("GET", "/teams/payments/jobs/hourly/runs").body["runs"] == []


def test_no_identity_is_401(api: ApiClient) -> None:
    assert_error(api.call("GET", "/teams/payments/jobs", principal=None), 401, "unauthenticated")


def test_admins_see_every_team(api: ApiClient) -> None:
    put(api, team="payments", principal=team_role("payments"))
    assert api.call("GET", "/teams/payments/jobs", principal=ADMIN).body["jobs"][0]["name"] == "hourly"


def test_health_openapi_and_unknown_routes(api: ApiClient) -> None:
    assert api.call("GET", "/health", principal=None).body == {"status": "ok"}
    schema = api.call("GET", "/openapi.json", principal=None).body
    assert "/teams/{team}/jobs/{name}" in schema["paths"] and "/callbacks/complete" in schema["paths"]
    assert_error(api.call("GET", "/nothing/here"), 404, "no_route")


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "text",
        {"schedule": 5},
        {"target": {"type": None}},
        {"retry": {"max_attempts": "many"}},
        {"tags": [1, 2]},
    ],
)
def test_nonsense_bodies_are_4xx_never_5xx(api: ApiClient, body: Any) -> None:
    response = put(api, body=body) if body is not None else api.call("PUT", "/teams/payments/jobs/x", raw_body="")
    assert 400 <= response.status < 500, response.body


def test_a_team_over_its_request_rate_gets_429_and_others_do_not(stack: Stack, clock: Clock) -> None:
    api = ApiClient(stack, requests_per_minute=3)
    payments, marketing = team_role("payments"), team_role("marketing")
    for _ in range(3):
        assert api.call("GET", "/teams/payments/jobs", principal=payments).status == 200
    limited = api.call("GET", "/teams/payments/jobs", principal=payments)
    assert_error(limited, 429, "throttled")
    assert int(limited.headers["Retry-After"]) == 60 - clock().second
    assert api.call("GET", "/teams/marketing/jobs", principal=marketing).status == 200
    clock.advance(timedelta(minutes=1))
    assert api.call("GET", "/teams/payments/jobs", principal=payments).status == 200


def test_every_authenticated_request_counts_toward_its_callers_rate(stack: Stack, clock: Clock) -> None:
    """/validate needs no team, but it is counted per caller (#13): one caller cannot burn the API."""
    api = ApiClient(stack, requests_per_minute=3)
    body = {"name": "x", "team": "t", "target": {"type": "callback"}}
    for _ in range(3):
        assert api.call("POST", "/validate", body, principal=team_role("busy")).status == 200
    assert_error(api.call("POST", "/validate", body, principal=team_role("busy")), 429, "throttled")
    assert api.call("POST", "/validate", body, principal=team_role("calm")).status == 200
