"""What `make run` prints (#46): a run's end once, whoever ended it (DAG and container runs too); pages and alarm
changes, also when a handler's logger formatted them; no line per wait poll or per map item."""

from __future__ import annotations

from infra.local.terminal import run_line

RUN = {"team": "examples", "job": "examples/pipeline", "run_id": "20261205T223200Z"}


def test_a_runs_end_is_one_line_whoever_ended_it() -> None:
    dag = RUN | {"message": "run finished", "status": "SUCCEEDED", "kind": "dag", "took_s": 2.4, "lateness_s": 0.6}
    assert run_line(dag) == "run   examples/pipeline 20261205T223200Z (DAG)  SUCCEEDED  late 0.6 s  took 2.4 s"
    container = RUN | {
        "message": "run finished",
        "job": "examples/slow-export",
        "status": "TIMED_OUT",
        "kind": "container",
        "attempt": 2,
        "error": "timed out after 15s: the task was stopped",
    }
    assert run_line(container) == (
        "run   examples/slow-export 20261205T223200Z attempt 2 (container)  TIMED_OUT"
        "  timed out after 15s: the task was stopped"
    )
    worker_end = RUN | {"message": "run message", "outcome": "succeeded", "lateness_s": 0.4}
    assert run_line(worker_end) is None, "the run finished line says it"


def test_news_is_shown_and_polls_and_map_items_are_not() -> None:
    retrying = RUN | {"message": "run message", "outcome": "retrying", "detail": "attempt 2 in 0:00:02"}
    assert run_line(retrying) == "run   examples/pipeline 20261205T223200Z  RETRYING  attempt 2 in 0:00:02"
    task = RUN | {"message": "run message", "outcome": "succeeded", "task": "extract", "detail": "task extract"}
    assert run_line(task) == "run   examples/pipeline 20261205T223200Z task extract  SUCCEEDED  task extract"
    poll = RUN | {"message": "run message", "outcome": "waiting", "detail": "waiting for s3://b/k since 22:00"}
    item = RUN | {"message": "run message", "outcome": "succeeded", "task": "reindex[7]"}
    assert run_line(poll) is None and run_line(item) is None
    held = RUN | {"message": "run message", "outcome": "waiting", "detail": "held: circuit open until 22:40 (x)"}
    assert run_line(held) == "run   examples/pipeline 20261205T223200Z  WAITING  held: circuit open until 22:40 (x)"


def test_pages_and_alarm_changes_show_when_a_handlers_logger_formatted_them() -> None:
    page = {"level": "WARNING", "name": "jobsched.local", "message": "PAGE [jobsched] examples/failing: run failed\nx"}
    assert run_line(page) == "page  [jobsched] examples/failing: run failed"
    alarm = {"level": "WARNING", "name": "jobsched.local.alarms", "message": "alarm A -> ALARM: 1 of 1 breaching"}
    assert run_line(alarm) == "alarm A -> ALARM: 1 of 1 breaching"
