"""Data between DAG tasks on moto's Step Functions interpreter: a task's output reaches its downstream tasks'
payloads by reference, through a task in between; a reference with nothing to read fails its task clearly;
an output too large to pass on fails the task that returned it."""

from __future__ import annotations

from typing import Any

from jobsched.core.references import MAX_TASK_OUTPUT
from jobsched.core.runs import RunStatus, TaskStatus
from tests.aws.harness import Clock, FakeLambdas, Stack
from tests.aws.test_dag import dag_job, drive, finished, lambda_task, run_of, start_run, tasks_of


def payloads(lambdas: FakeLambdas, function: str) -> list[Any]:
    return [event["payload"] for name, event in lambdas.calls if name == function]


def test_an_extracts_output_flows_to_the_load_through_a_task_in_between(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    lambdas.functions["extract"] = lambda event: {"files": ["s3://data-landing/a.csv", "s3://data-landing/b.csv"]}
    lambdas.functions["load"] = lambda event: {"loaded": len(event["payload"]["files"])}
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("extract", function="extract"),
            lambda_task("transform", "extract"),
            {
                "name": "load",
                "depends_on": ["transform"],
                "target": {
                    "type": "lambda",
                    "function": "load",
                    "payload": {
                        "files": "{{ tasks.extract.output.files }}",  # a list stays a list
                        "first": "{{ tasks.extract.output.files[0] }}",
                        "note": "{{ tasks.transform.output.echo.task }} then {{ tasks.extract.output.files }}",
                        "other": "{{ not a reference }}",
                    },
                },
            },
        ),
    )
    drive(dag_stack, finished(dag_stack))
    assert run_of(dag_stack).status is RunStatus.SUCCEEDED
    (payload,) = payloads(lambdas, "load")
    assert payload == {
        "files": ["s3://data-landing/a.csv", "s3://data-landing/b.csv"],
        "first": "s3://data-landing/a.csv",
        "note": 'transform then ["s3://data-landing/a.csv","s3://data-landing/b.csv"]',
        "other": "{{ not a reference }}",
    }
    # Only the outputs a downstream task reads are kept: extract's and transform's, not load's.
    kept = dag_stack.runs.task_outputs(
        run_of(dag_stack).job, run_of(dag_stack).run_id, ["extract", "transform", "load"]
    )
    assert sorted(kept) == ["extract", "transform"]


def test_a_reference_to_an_upstream_that_did_not_succeed_fails_its_task_naming_it(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    def broken(event: Any) -> Any:
        raise RuntimeError("extract is down")

    lambdas.functions["extract"] = broken
    lambdas.functions["report"] = lambda event: {"ok": True}
    report = {
        "name": "report",
        "depends_on": ["extract"],
        "trigger_rule": "all_done",  # runs whatever happened upstream, but has nothing to read
        "target": {"type": "lambda", "function": "report", "payload": {"rows": "{{ tasks.extract.output.rows }}"}},
    }
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("extract", function="extract"),
            report,
            retry={"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}},
        ),
    )
    drive(dag_stack, finished(dag_stack))
    tasks = tasks_of(dag_stack)
    assert tasks["extract"].status is TaskStatus.FAILED
    assert tasks["report"].status is TaskStatus.FAILED and tasks["report"].attempt == 1  # not retried
    assert tasks["report"].error == "tasks.extract.output.rows: task extract has no output"
    assert payloads(lambdas, "report") == []  # never called with an unresolved payload


def test_an_output_too_large_to_pass_on_fails_the_task_that_returned_it(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    lambdas.functions["extract"] = lambda event: {"rows": ["x" * 1000] * (MAX_TASK_OUTPUT // 1000 + 1)}
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("extract", function="extract"),
            {
                "name": "load",
                "depends_on": ["extract"],
                "target": {
                    "type": "lambda",
                    "function": "echo",
                    "payload": {"rows": "{{ tasks.extract.output.rows }}"},
                },
            },
            retry={"max_attempts": 3},
        ),
    )
    drive(dag_stack, finished(dag_stack))
    tasks = tasks_of(dag_stack)
    assert tasks["extract"].status is TaskStatus.FAILED and tasks["extract"].attempt == 1
    assert tasks["extract"].error is not None and tasks["extract"].error.startswith("output_too_large: ")
    assert "return its s3:// URI" in tasks["extract"].error
    assert tasks["load"].status is TaskStatus.SKIPPED


def test_an_unreadable_upstream_output_fails_the_reading_task_not_the_worker(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    """NaN (a Lambda's JSON encoder writes it) used to raise inside the worker: the downstream task's message went
    to the dead-letter queue and the run hung until its state machine's timeout. Now that task fails, named."""
    lambdas.functions["extract"] = lambda event: {"rows": float("nan"), "ok": True}
    start_run(
        dag_stack,
        clock,
        dag_job(
            lambda_task("extract", function="extract"),
            {
                "name": "load",
                "depends_on": ["extract"],
                "target": {"type": "lambda", "function": "echo", "payload": {"ok": "{{ tasks.extract.output.ok }}"}},
            },
        ),
    )
    drive(dag_stack, finished(dag_stack))
    tasks = tasks_of(dag_stack)
    assert tasks["extract"].status is TaskStatus.SUCCEEDED
    assert tasks["load"].status is TaskStatus.FAILED and tasks["load"].attempt == 1
    assert tasks["load"].error == "an upstream output cannot be read: NaN is not JSON"
    assert run_of(dag_stack).status is RunStatus.FAILED


def test_a_trigger_payload_reaches_the_tasks_that_read_it_and_a_scheduled_run_says_it_has_none(
    dag_stack: Stack, clock: Clock, lambdas: FakeLambdas
) -> None:
    """Airflow's `conf`: `jobsched trigger --payload '{"day": ...}'` reaches a DAG's task through
    {{ run.payload.day }} (#46: it was accepted and dropped)."""
    from jobsched.pipeline.manual_runs import trigger_run

    lambdas.functions["report"] = lambda event: {"ok": True}
    report = {
        "name": "report",
        "target": {"type": "lambda", "function": "report", "payload": {"day": "{{ run.payload.day }}", "all": "x"}},
    }
    spec = dag_stack.register(dag_job(report))
    run = trigger_run(
        dag_stack.jobs,
        dag_stack.runs,
        dag_stack.queues,
        spec.key,
        now=clock(),
        principal="test",
        payload={"day": "2027-01-03"},
    )
    dag_stack.pump()

    def ended() -> bool:
        found = dag_stack.runs.get(spec.key, run.run_id)
        return found is not None and found.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)

    drive(dag_stack, ended)
    assert payloads(lambdas, "report") == [{"day": "2027-01-03", "all": "x"}]
    # The scheduled run has no payload: the task fails naming the reference, not retried.
    clock.set("2027-01-04T08:59:30Z")
    dag_stack.tick()
    clock.set("2027-01-04T09:00:00Z")
    dag_stack.pump()
    drive(dag_stack, finished(dag_stack))
    failed = tasks_of(dag_stack)["report"]
    assert failed.status is TaskStatus.FAILED and "started with no payload" in (failed.error or ""), failed
