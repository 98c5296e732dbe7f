"""Quality gates on a target's output, through the worker on moto: a blocking check fails the run (not retried),
a warning check records, counts and pages at warning severity while the run succeeds; in a DAG a failed
blocking check skips the task's downstream tasks and fails the run with the check's message."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobsched.core.runs import RunStatus, TaskStatus
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.watch import signals
from jobsched.watch.observability import run_finished
from tests.aws.harness import Clock, FakeLambdas, Stack
from tests.aws.test_dag import FIRST, JOB, dag_job, drive, finished, lambda_task, run_of, start_run, tasks_of

ROWS_CHECKED = [
    {"name": "has-rows", "expect": "output.rows > 0"},
    {
        "name": "lists-files",
        "json_schema": {"type": "object", "required": ["files"], "properties": {"files": {"type": "array"}}},
        "severity": "warn",
    },
]


def extract_job(checks: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": "extract",
        "team": "data",
        "target": {"type": "lambda", "function": "extract"},
        "retry": {"max_attempts": 3},
        "checks": checks,
        **extra,
    }


@pytest.fixture
def metrics() -> Any:
    seen: list[tuple[str, float, dict[str, str]]] = []

    def sink(name: str, value: float, dimensions: dict[str, str]) -> None:
        seen.append((name, value, dimensions))

    signals.add_sink(sink)
    yield seen
    signals.remove_sink(sink)


def test_a_blocking_check_fails_the_run_with_its_message_and_is_not_retried(
    stack: Stack, lambdas: FakeLambdas, metrics: Any
) -> None:
    lambdas.functions["extract"] = lambda event: {"rows": 0, "files": []}
    run_id = stack.register_and_trigger(extract_job(ROWS_CHECKED))
    stack.pump()
    run = stack.runs.get("data/extract", run_id)
    assert run is not None and run.status is RunStatus.FAILED and run.attempt == 1  # "succeeded", with no rows
    assert run.error == "check has-rows failed: output.rows is 0, expected > 0"
    assert run.checks == [
        {"name": "has-rows", "severity": "error", "passed": False, "message": "output.rows is 0, expected > 0"},
        {"name": "lists-files", "severity": "warn", "passed": True},
    ]
    assert len(lambdas.executions("extract")) == 1
    run_finished(run)  # what the deployed runs store tells once a run ends (wiring.metered_runs)
    assert ("ChecksFailed", 1, {"severity": "error"}) in metrics
    assert [e["kind"] for e in stack.escalations()] == ["run_failed"]


def test_a_warning_check_records_counts_and_pages_at_warning_severity_while_the_run_succeeds(
    stack: Stack, lambdas: FakeLambdas, metrics: Any
) -> None:
    topic = stack.topic("data-oncall", team="data")
    lambdas.functions["extract"] = lambda event: {"rows": 12}
    job = extract_job(ROWS_CHECKED, escalation={"sns_topic": topic})
    run_id = stack.register_and_trigger(job)
    run = stack.runs.get("data/extract", run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED
    assert run.checks is not None and run.checks[1] == {
        "name": "lists-files",
        "severity": "warn",
        "passed": False,
        "message": "output: 'files' is a required property",
    }
    run_finished(run)
    assert ("ChecksFailed", 1, {"severity": "warn"}) in metrics
    stack.handle_escalations()
    (page,) = stack.pages()
    assert page["subject"].startswith("[jobsched, warning] data/extract: warning check failed")
    assert "severity: warning" in page["message"] and "check lists-files" in page["message"]

    # The next run passes its warning check: the quality incident resolves (one notice), no new page opens.
    lambdas.functions["extract"] = lambda event: {"rows": 3, "files": ["a.csv"]}
    second = stack.register_and_trigger(job)
    assert stack.runs.get("data/extract", second).status is RunStatus.SUCCEEDED  # type: ignore[union-attr]
    stack.handle_escalations()
    (resolved,) = stack.pages()
    assert resolved["subject"].startswith("[jobsched, resolved] data/extract")


def test_output_that_is_not_json_fails_its_checks_clearly(stack: Stack, lambdas: FakeLambdas) -> None:
    lambdas.functions["extract"] = lambda event: "twelve rows"
    run_id = stack.register_and_trigger(extract_job([{"expect": "output.rows > 0"}]))
    run = stack.runs.get("data/extract", run_id)
    assert run is not None and run.status is RunStatus.FAILED
    assert run.error == "check output.rows > 0 failed: output.rows is missing"  # "twelve rows" is a JSON string


def test_a_callback_result_passes_the_jobs_checks(stack: Stack) -> None:
    job = {
        "name": "load",
        "team": "data",
        "target": {"type": "callback", "timeout": "1h"},
        "checks": [{"expect": "len(output.tables) >= 2"}],
    }
    run_id = stack.register_and_trigger(job)
    run = stack.worker.ends.complete(
        AttemptRef("data/load", run_id, 1), Reported(succeeded=True, output='{"tables": ["a"]}')
    )
    assert run.status is RunStatus.FAILED and run.error == (
        "check len(output.tables) >= 2 failed: len(output.tables) is 1, expected >= 2"
    )


def test_a_blocking_check_on_a_dag_task_skips_its_downstream_and_fails_the_run(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    lambdas.functions["extract"] = lambda event: {"rows": 0}
    lambdas.functions["audit"] = lambda event: {"rows": 5}
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("extract", function="extract", checks=[{"name": "rows", "expect": "output.rows > 0"}]),
            lambda_task("audit", function="audit", checks=[{"expect": "output.rows > 10", "severity": "warn"}]),
            lambda_task("load", "extract"),
            retry={"max_attempts": 3},
        ),
    )
    drive(dag_stack, finished(dag_stack))
    run = run_of(dag_stack)
    tasks = tasks_of(dag_stack)
    assert {name: state.status for name, state in tasks.items()} == {
        "extract": TaskStatus.FAILED,
        "audit": TaskStatus.SUCCEEDED,
        "load": TaskStatus.SKIPPED,
    }
    assert run.status is RunStatus.FAILED
    assert run.error == "task extract failed: check rows failed: output.rows is 0, expected > 0"
    assert tasks["extract"].attempt == 1  # not retried: the target answered, its data did not pass
    assert tasks["audit"].checks == [
        {"name": "output.rows > 10", "severity": "warn", "passed": False, "message": "output.rows is 5, expected > 10"}
    ]
    assert run.checks is not None and [c["name"] for c in run.checks] == ["extract: rows", "audit: output.rows > 10"]
    assert run.run_id == FIRST and run.job == JOB
    kinds = sorted(e["kind"] for e in dag_stack.escalations())
    assert kinds == ["checks_warned", "run_failed"]


def test_a_callback_result_with_checks_is_judged_in_the_worker_never_inside_the_api_request(stack: Stack) -> None:
    """The review's bomb reached the API: a 10 KB callback output against an enum took 49.6 s there while another
    team's GET waited; nested 5,000 deep it answered 502 and left the run RUNNING. Now a result that checks
    judge is accepted (202) and the worker judges it within its budget: hostile, the check fails, named."""
    from tests.aws.api_client import ApiClient

    api = ApiClient(stack)
    job = {
        "name": "load",
        "team": "data",
        "target": {"type": "callback", "timeout": "1h"},
        "checks": [{"json_schema": {"items": {"enum": list(range(100))}}}],
    }
    for hostile, why in (
        ("[" * 5_000 + "]" * 5_000, "nested deeper than 64 levels"),
        ("[" + ",".join(["100"] * 2_400) + "]", "is not one of the 100 allowed values"),
    ):
        run_id = stack.register_and_trigger(job)
        token = api.tokens.issue("data/load", run_id, 1, expires_at=stack.clock() + timedelta(hours=2))
        accepted = api.callback("complete", token, {"status": "succeeded", "output": hostile})
        assert accepted.status == 202 and accepted.body["status"] == "RUNNING", accepted.body
        stack.pump()
        run = stack.runs.get("data/load", run_id)
        assert run is not None and run.status is RunStatus.FAILED and why in (run.error or ""), run
        late = api.callback("complete", token, {"status": "succeeded", "output": "[1]"})
        assert late.status == 409  # the attempt ended: refused at once, nothing queued
        stack.clock.advance(timedelta(minutes=1))
    # Without checks (or on failure) nothing costs CPU: recorded at once, as before.
    plain = job | {"name": "plain", "checks": []}
    run_id = stack.register_and_trigger(plain)
    token = api.tokens.issue("data/plain", run_id, 1, expires_at=stack.clock() + timedelta(hours=2))
    done = api.callback("complete", token, {"status": "succeeded", "output": "[" * 5_000})
    assert done.status == 200 and done.body["status"] == "SUCCEEDED", done.body
