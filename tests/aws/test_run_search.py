"""Run search (#46): by time range, status, trigger kind, attempts and error text, a page at a time, for a job or
across a team's jobs, in the API and the CLI. Pages never skip or repeat a run, however the reads are bounded."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.watch import run_search
from tests.aws.api_client import ApiClient, cli_as, team_role
from tests.aws.harness import Clock, Stack


@pytest.fixture
def api(stack: Stack) -> ApiClient:
    return ApiClient(stack)


def hourly(stack: Stack, name: str, function: str) -> None:
    stack.register(
        {
            "name": name,
            "team": "ops",
            "schedule": {"expression": "*/10 * * * *"},
            "target": {"type": "lambda", "function": function},
            "retry": {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s"}},
        }
    )


def failing_on(minutes: set[int]) -> Any:
    def handler(event: dict[str, Any]) -> Any:
        if int(event["jobsched"]["scheduled_at"][14:16]) in minutes:
            raise RuntimeError(f"upstream said no at {event['jobsched']['scheduled_at']}")
        return {"ok": True}

    return handler


@pytest.fixture
def history(stack: Stack, clock: Clock) -> None:
    """Three jobs of one team, every 10 minutes for two hours (same instants: their run ids tie across jobs);
    ``b`` fails at :20 each hour, on both attempts."""
    stack.lambdas.functions["fine"] = lambda event: {"ok": True}
    stack.lambdas.functions["sometimes"] = failing_on({20})
    for name in ("a", "c"):
        hourly(stack, name, "fine")
    hourly(stack, "b", "sometimes")
    stack.minutes(121)


def page(api: ApiClient, path: str, **query: Any) -> dict[str, Any]:
    text = "&".join(f"{key}={value}" for key, value in query.items())
    response = api.call("GET", f"{path}?{text}", principal=team_role("ops"))
    assert response.status == 200, response.body
    body: dict[str, Any] = response.body
    return body


def walk(api: ApiClient, path: str, **query: Any) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    token = None
    for _ in range(200):
        body = page(api, path, **query, **({"next_token": token} if token else {}))
        seen += [(run["run_id"], run["job"]) for run in body["runs"]]
        token = body["next_token"]
        if token is None:
            return seen
    raise AssertionError("pages never ended")


@pytest.mark.usefixtures("history")
def test_a_team_search_pages_newest_first_across_jobs_without_skipping_or_repeating(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    everything = walk(api, "/teams/ops/runs", limit=7)
    assert len(everything) == 3 * 13 and len(set(everything)) == len(everything)
    assert everything == sorted(everything, reverse=True), "newest first, ties ordered by job"
    monkeypatch.setattr(run_search, "EVALUATED_PER_JOB", 3)  # each job's read stops early: pages stay exact
    assert walk(api, "/teams/ops/runs", limit=5) == everything
    assert walk(api, "/teams/ops/runs", limit=100, status="FAILED") == [
        ("20270104T102000Z", "ops/b"),
        ("20270104T092000Z", "ops/b"),
    ]


@pytest.mark.usefixtures("history")
def test_a_jobs_runs_by_time_range_attempts_error_text_and_trigger(api: ApiClient) -> None:
    window = page(api, "/teams/ops/jobs/b/runs", since="2027-01-04T09:30:00Z", until="2027-01-04T10:00:00Z")
    assert [run["run_id"] for run in window["runs"]] == [f"20270104T{t}00Z" for t in ("1000", "0950", "0940", "0930")]
    retried = page(api, "/teams/ops/jobs/b/runs", min_attempts=2)
    assert {run["run_id"] for run in retried["runs"]} == {"20270104T092000Z", "20270104T102000Z"}
    said = page(api, "/teams/ops/runs", error="said%20no%20at%202027-01-04T10")
    assert [(run["job"], run["run_id"]) for run in said["runs"]] == [("ops/b", "20270104T102000Z")]
    assert page(api, "/teams/ops/runs", trigger="manual")["runs"] == []
    recent = page(api, "/teams/ops/jobs/a/runs", since="25m")  # now is 11:00
    assert [run["run_id"] for run in recent["runs"]] == ["20270104T110000Z", "20270104T105000Z", "20270104T104000Z"]


@pytest.mark.parametrize(
    ("query", "field", "code"),
    [
        ("status=DONE", "status", "invalid_status"),
        ("status=FAILED,nope", "status", "invalid_status"),
        ("trigger=cron", "trigger", "invalid_trigger"),
        ("since=yesterday", "since", "invalid_instant"),
        ("until=2027-01-04T09:00", "until", "invalid_instant"),
        ("next_token=garbage", "next_token", "invalid_next_token"),
        ("min_attempts=0", "min_attempts", None),
    ],
)
def test_a_search_it_cannot_run_is_a_422_on_the_parameter(api: ApiClient, query: str, field: str, code: Any) -> None:
    response = api.call("GET", f"/teams/ops/runs?{query}", principal=team_role("ops"))
    assert response.status == 422 and field in response.body["error"]["field"], response.body
    assert code is None or response.body["error"]["code"] == code
    assert api.call("GET", "/teams/ops/runs", principal=team_role("billing")).status == 403


@pytest.mark.usefixtures("history")
def test_jobsched_runs_searches_a_job_or_a_team_and_says_how_to_continue(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = cli_as(api, team_role("ops"), monkeypatch)
    code, output = run("runs", "--team", "ops", "--status", "FAILED")
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0].split()[:3] == ["JOB", "RUN", "STATUS"] and len(lines) == 3
    assert "ops/b" in lines[1] and "upstream said no" in lines[1]
    code, output = run("runs", "ops/a", "--limit", "2")
    assert code == 0 and output.splitlines()[-1].startswith("more: --next-token '20270104T105000Z|ops/a'"), output
    code, output = run("runs", "ops/a", "--limit", "2", "--next-token", "20270104T105000Z|ops/a")
    assert code == 0 and "20270104T104000Z" in output and "20270104T105000Z" not in output
    code, output = run("runs")
    assert code == 2 and "--team" in output


@pytest.mark.usefixtures("history")
def test_the_consoles_runs_view_finds_what_jobsched_runs_finds(stack: Stack, clock: Clock) -> None:
    from jobsched.console.widget import Viewer, render_widget

    def widget(**params: str) -> str:
        event = {"widgetContext": {"params": params}, **params}
        return render_widget(event, stack.jobs, stack.runs, clock(), viewer=Viewer("ops"))

    failed = widget(view="runs", team="ops", status="FAILED")
    assert failed.count("<td>b</td>") == 2 and "upstream said no" in failed and "<td>a</td>" not in failed
    one = widget(view="runs", team="ops", job="a", since="25m")
    assert one.count("<td>a</td>") == 3 and "<td>b</td>" not in one
    assert "No run matches" in widget(view="runs", team="ops", error="nothing like this")
    assert "status: unknown status" in widget(view="runs", team="ops", status="<b>")
    assert "<b>" not in widget(view="runs", team="ops", status="<b>")
    assert "Not allowed" in widget(view="runs", team="billing")
