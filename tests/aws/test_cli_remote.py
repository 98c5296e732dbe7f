"""The jobsched CLI against the API in-process: apply (dry run, prune), get, pause, trigger, runs, exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from jobsched.cli import app as cli_app
from jobsched.cli import cli
from jobsched.cli import remote as cli_module
from jobsched.client import HttpResult, ServiceError
from jobsched.core.prices import US_EAST_1
from jobsched.core.usage import SCHEDULER_PER_ATTEMPT, cost_of
from tests.aws.api_client import ApiClient, InProcess, team_role
from tests.aws.harness import Clock, Stack


@pytest.fixture
def run_cli(stack: Stack, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    api = ApiClient(stack)
    monkeypatch.setattr(cli_module, "make_transport", lambda url: InProcess(api, team_role("payments")))
    monkeypatch.setattr(cli_app, "clock", clock)
    monkeypatch.setattr(cli_module, "backfill_poll_seconds", 0.0)

    def invoke(*args: str, input: str | None = None) -> tuple[int, str]:
        result = CliRunner().invoke(cli, list(args), input=input)
        return result.exit_code, result.output

    yield invoke


def write_job(folder: Path, name: str, expression: str = "0 * * * *", **extra: Any) -> Path:
    document = {
        "name": name,
        "team": "payments",
        "schedule": {"expression": expression},
        "target": {"type": "lambda", "function": "echo"},
        **extra,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_apply_reports_created_changed_unchanged(run_cli: Any, tmp_path: Path) -> None:
    write_job(tmp_path, "alpha")
    write_job(tmp_path, "beta")
    code, output = run_cli("apply", "-f", str(tmp_path))
    assert code == 0 and output.splitlines() == ["payments/alpha: created", "payments/beta: created"]
    write_job(tmp_path, "beta", "30 * * * *")
    code, output = run_cli("apply", "-f", str(tmp_path))
    assert code == 0, output
    assert output.splitlines() == ["payments/alpha: unchanged", "payments/beta: changed"]
    code, output = run_cli("get", "job", "payments/beta", "-o", "json")
    assert code == 0, output
    assert json.loads(output)["version"] == 2


def test_apply_dry_run_shows_the_diff_and_fire_times_and_changes_nothing(run_cli: Any, tmp_path: Path) -> None:
    write_job(tmp_path, "alpha")
    run_cli("apply", "-f", str(tmp_path))
    write_job(tmp_path, "alpha", "0 */2 * * *")
    code, output = run_cli("apply", "-f", str(tmp_path), "--dry-run")
    assert code == 0
    assert "-  expression: 0 * * * *" in output and "+  expression: 0 */2 * * *" in output
    assert "fire times over the next 7 days: +0 -84" in output
    assert output.splitlines()[-1] == "payments/alpha: changed (dry run)"
    code, output = run_cli("get", "job", "payments/alpha", "-o", "json")
    assert code == 0, output
    assert json.loads(output)["spec"]["schedule"]["expression"] == "0 * * * *"


def test_apply_dry_run_says_what_a_change_costs_a_month(run_cli: Any, tmp_path: Path, stack: Stack) -> None:
    """#50: cost before apply: every minute instead of hourly is 43,200 runs a month instead of 720, priced."""
    write_job(tmp_path, "alpha")
    run_cli("apply", "-f", str(tmp_path))
    write_job(tmp_path, "alpha", "* * * * *")
    code, output = run_cli("apply", "-f", str(tmp_path), "--dry-run")
    assert code == 0, output
    per_run = cost_of(SCHEDULER_PER_ATTEMPT, US_EAST_1).total
    delta = (43_200 - 720) * per_run
    line = next(line for line in output.splitlines() if line.startswith("cost: "))
    assert line.startswith(f"cost: +${delta:,.2f}/month (43,200 runs a month instead of 720)"), line
    validated = ApiClient(stack).call(
        "POST", "/validate", yaml.safe_load((tmp_path / "alpha.yaml").read_text()), principal=team_role("payments")
    )
    assert validated.body["runs_per_month"] == 43_200
    assert validated.body["usd_per_month"] == pytest.approx(43_200 * per_run, rel=1e-3)


def test_apply_prune_deletes_what_no_file_defines(run_cli: Any, tmp_path: Path) -> None:
    for name in ("alpha", "beta", "gamma"):
        write_job(tmp_path, name)
    run_cli("apply", "-f", str(tmp_path))
    (tmp_path / "gamma.yaml").unlink()
    code, output = run_cli("apply", "-f", str(tmp_path), "--prune", "--dry-run")
    assert code == 0, output
    assert "payments/gamma: deleted (dry run)" in output
    code, output = run_cli("apply", "-f", str(tmp_path), "--prune", input="n\n")
    assert code == 0, output
    assert "payments/gamma" not in output.splitlines()[-1]
    code, output = run_cli("apply", "-f", str(tmp_path), "--prune", "--yes")
    assert code == 0 and "payments/gamma: deleted" in output
    code, output = run_cli("get", "jobs", "--team", "payments", "-o", "json")
    assert code == 0, output
    assert [job["name"] for job in json.loads(output)] == ["alpha", "beta"]


def test_a_folder_is_applied_upstreams_first_and_a_refused_file_stops_nothing_else(
    run_cli: Any, tmp_path: Path
) -> None:
    """Alphabetically the report comes before the extract it runs after; a file the API refuses (a reserved name)
    is reported with its reason and file, the others are applied, and the exit code says something was refused."""
    write_job(tmp_path, "a-report", triggers=[{"after": {"job": "payments/z-extract"}}], schedule=None)
    write_job(tmp_path, "m-bad", target={"type": "lambda", "function": "jobsched-test-Worker"})
    write_job(tmp_path, "z-extract")
    code, output = run_cli("apply", "-f", str(tmp_path))
    lines = output.splitlines()
    assert code == 1, output
    assert lines[0] == "payments/m-bad: refused: " + lines[0].split(": refused: ", 1)[1]
    assert lines[0].endswith(f"({tmp_path / 'm-bad.yaml'})"), lines[0]
    assert lines[1:] == ["payments/z-extract: created", "payments/a-report: created"], output
    code, output = run_cli("get", "jobs", "--team", "payments", "-o", "json")
    assert sorted(job["name"] for job in json.loads(output)) == ["a-report", "z-extract"]


def test_prune_deletes_a_downstream_before_the_job_it_runs_after(run_cli: Any, tmp_path: Path) -> None:
    write_job(tmp_path, "keep")
    write_job(tmp_path, "b-upstream")
    write_job(tmp_path, "a-downstream", triggers=[{"after": {"job": "payments/b-upstream"}}], schedule=None)
    assert run_cli("apply", "-f", str(tmp_path))[0] == 0
    (tmp_path / "a-downstream.yaml").unlink()
    (tmp_path / "b-upstream.yaml").unlink()
    code, output = run_cli("apply", "-f", str(tmp_path), "--prune", "--dry-run")
    assert code == 0 and output.splitlines()[1:] == [
        "payments/a-downstream: deleted (dry run)",
        "payments/b-upstream: deleted (dry run)",
    ], output
    code, output = run_cli("apply", "-f", str(tmp_path), "--prune", "--yes")
    assert code == 0 and "payments/b-upstream: deleted" in output, output
    code, output = run_cli("get", "jobs", "--team", "payments", "-o", "json")
    assert [job["name"] for job in json.loads(output)] == ["keep"]


def test_apply_with_invalid_files_exits_1_before_calling_the_api(run_cli: Any, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: Bad\nteam: payments\ntarget: {type: lamda}\n")
    code, output = run_cli("apply", "-f", str(tmp_path))
    assert code == 1 and "bad.yaml: name:" in output
    code, output = run_cli("get", "jobs", "--team", "payments", "-o", "json")
    assert code == 0, output
    assert json.loads(output) == []


def test_get_table_pause_resume_trigger_runs(run_cli: Any, tmp_path: Path, stack: Stack) -> None:
    write_job(tmp_path, "alpha")
    run_cli("apply", "-f", str(tmp_path))
    code, output = run_cli("get", "jobs", "--team", "payments")
    assert code == 0, output
    assert output.splitlines()[0].split() == ["TEAM", "NAME", "STATE", "VERSION", "NEXT"]
    assert output.splitlines()[1].split()[:3] == ["payments", "alpha", "ACTIVE"]
    code, output = run_cli("pause", "payments/alpha", "--reason", "incident", "-o", "json")
    assert code == 0, output
    assert json.loads(output)["state"] == "PAUSED"
    code, output = run_cli("resume", "alpha", "--team", "payments", "-o", "yaml")
    assert code == 0, output
    assert yaml.safe_load(output)["state"] == "ACTIVE"
    code, output = run_cli(
        "trigger", "payments/alpha", "--payload", '{"a": 1}', "--idempotency-key", "k1", "-o", "json"
    )
    assert code == 0, output
    run_id = json.loads(output)["run_id"]
    code, again = run_cli("trigger", "payments/alpha", "--idempotency-key", "k1", "-o", "json")
    assert code == 0, again
    assert json.loads(again)["run_id"] == run_id
    stack.pump()
    code, output = run_cli("runs", "payments/alpha", "-o", "json")
    assert code == 0, output
    assert [(r["run_id"], r["status"]) for r in json.loads(output)["runs"]] == [(run_id, "SUCCEEDED")]
    code, output = run_cli("run", "payments/alpha", run_id)
    assert code == 0, output
    assert "SUCCEEDED" in output


def test_backfill_waits_with_progress(
    run_cli: Any, tmp_path: Path, stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_job(tmp_path, "alpha")
    run_cli("apply", "-f", str(tmp_path))
    ticks = {"n": 0}

    def advance(_: float) -> None:  # each poll: one dispatcher tick and the worker catch up
        ticks["n"] += 1
        stack.tick()
        stack.pump()

    monkeypatch.setattr("time.sleep", advance)
    code, output = run_cli(
        "backfill",
        "payments/alpha",
        "--from",
        "2027-01-03T00:00:00Z",
        "--to",
        "2027-01-03T03:00:00Z",
        "--max-in-flight",
        "2",
    )
    assert code == 0, output
    monkeypatch.undo()
    assert code == 0 and "DONE" in output and ticks["n"] >= 2


def test_user_errors_exit_1_with_the_api_message(run_cli: Any) -> None:
    code, output = run_cli("get", "job", "payments/missing")
    assert code == 1 and "error: no job payments/missing (name)" in output
    code, output = run_cli("pause", "nameonly", "--reason", "x")
    assert code == 2 and "name the team" in output  # click usage error
    code, output = run_cli("get", "jobs", "--team", "marketing")
    assert code == 1 and "not a member of team 'marketing'" in output


def test_service_failures_exit_2(run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def down(method: str, path: str, body: bytes | None, headers: dict[str, str]) -> HttpResult:
        raise ServiceError("cannot reach http://127.0.0.1:8080: MaxRetryError")

    monkeypatch.setattr(cli_module, "make_transport", lambda url: down)
    code, output = run_cli("get", "jobs", "--team", "payments")
    assert code == 2 and "cannot reach" in output


def test_deps_shows_upstreams_and_downstreams_with_their_last_runs(run_cli: Any, stack: Stack, tmp_path: Path) -> None:
    write_job(tmp_path, "extract", share_with=["data"])
    write_job(tmp_path, "report", triggers=[{"after": {"job": "payments/extract"}}])
    assert run_cli("apply", "-f", str(tmp_path))[0] == 0
    stack.register(
        {
            "name": "mirror",
            "team": "data",
            "target": {"type": "lambda", "function": "echo"},
            "triggers": [{"after": {"any": ["payments/extract"]}}],
        }
    )
    stack.minutes(61)  # extract runs at the hour; report does not run here (no rule delivery in this test)
    from datetime import timedelta

    from jobsched.core.runs import RunMessage, RunStatus

    now = stack.clock()
    theirs = RunMessage.scheduled(job="data/mirror", team="data", at=now, fire_at=now, spec_version=1)
    stack.runs.create(theirs, status=RunStatus.SCHEDULED, now=now, retention=timedelta(days=1))
    code, output = run_cli("deps", "payments/extract")
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0] == "runs after: none" and lines[1] == "run after it:"
    report = next(line for line in lines if line.startswith("payments/report"))
    mirror = next(line for line in lines if line.startswith("data/mirror"))
    assert "after, on succeeded" in report and "any of, on succeeded" in mirror
    assert mirror.split()[-2:] == ["-", "-"]  # another team's downstream: none of its runs is shown
    code, output = run_cli("deps", "payments/report", "-o", "json")
    (upstream,) = json.loads(output)["upstreams"]
    assert upstream["job"] == "payments/extract" and upstream["last_run"]["status"] == "SUCCEEDED"
    # Changing the job's triggers moves its edge: extract no longer lists it.
    write_job(tmp_path, "report")
    assert run_cli("apply", "-f", str(tmp_path))[0] == 0
    downstreams = json.loads(run_cli("deps", "payments/extract", "-o", "json")[1])["downstreams"]
    assert [d["job"] for d in downstreams] == ["data/mirror"]


def test_rerun_downstream_and_a_waiting_job_as_typed(run_cli: Any, stack: Stack, tmp_path: Path) -> None:
    write_job(tmp_path, "extract")
    write_job(tmp_path, "report", wait_for=[{"job": "payments/extract", "within": "2h"}], wait={"timeout": "3h"})
    assert run_cli("apply", "-f", str(tmp_path))[0] == 0
    stack.minutes(2)  # both run at 09:00: report's wait is met by extract's run of that hour
    [extracted] = stack.run_list("payments/extract")
    [reported] = stack.run_list("payments/report")
    assert (extracted.status.value, reported.status.value) == ("SUCCEEDED", "SUCCEEDED")
    code, output = run_cli("deps", "payments/report")
    assert code == 0 and "payments/extract" in output and "waits for a succeeded run within 2h" in output
    code, output = run_cli("rerun", "payments/extract", extracted.run_id, "--force", "--downstream")
    assert code == 0, output
    reopened = stack.runs.get("payments/extract", extracted.run_id)
    assert reopened is not None and reopened.downstream_attempt == reopened.attempt + 1
    [entry, *_] = json.loads(run_cli("history", "payments/extract", "-o", "json")[1])
    assert entry["action"] == "rerun" and entry["details"]["downstream"] is True


def test_runs_and_run_say_why_a_run_skipped_or_waits_and_how_far_a_running_one_got(
    run_cli: Any, stack: Stack, tmp_path: Path
) -> None:
    """#46: a SKIPPED run's reason and a held run's were `-` in the table (only -o json had them); `run` showed
    no progress or checkpoint."""
    callback = {"type": "callback", "timeout": "1h"}
    write_job(tmp_path, "skips", target=callback)
    write_job(tmp_path, "queues", target=callback, concurrency={"max_running": 1, "overlap": "queue"})
    code, output = run_cli("apply", "-f", str(tmp_path))
    assert code == 0, output
    ids = {}
    for name in ("skips", "queues"):
        for turn in (1, 2):
            code, output = run_cli("trigger", f"payments/{name}", "-o", "json")
            assert code == 0, output
            ids[name, turn] = json.loads(output)["run_id"]
            stack.pump()
    code, output = run_cli("runs", "payments/skips")
    assert code == 0 and output.splitlines()[0].split()[-1] == "WHY", output
    [skipped] = [line for line in output.splitlines() if ids["skips", 2] in line]
    assert "SKIPPED" in skipped and "overlap: skip (still running:" in skipped, output
    code, output = run_cli("runs", "payments/queues")
    [held] = [line for line in output.splitlines() if ids["queues", 2] in line]
    assert "SCHEDULED" in held and "max_running 1 reached" in held, output

    api = ApiClient(stack)
    running = api.call("GET", f"/teams/payments/jobs/queues/runs/{ids['queues', 1]}").body
    report = {"progress": 40, "message": "partition 12 of 30", "checkpoint": {"partition": 12}}
    assert api.callback("heartbeat", running["callback_token"], report).status == 200
    code, output = run_cli("run", "payments/queues", ids["queues", 1])
    assert code == 0, output
    assert "progress: 40% partition 12 of 30 (attempt 1, at " in output, output
    assert 'checkpoint: {"partition": 12}' in output
