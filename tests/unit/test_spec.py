"""The job specification: the issue's example validates as written; every error is located and explains itself."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jobsched.core.durations import format_duration, parse_duration
from jobsched.core.errors import FieldError, SpecError
from jobsched.core.spec import CalendarPolicy, JobSpec
from jobsched.registry.jobfile import load_job_file, parse_document, validate_document

EXAMPLE = Path(__file__).parents[2] / "examples" / "jobs" / "nightly-invoices.yaml"

BASE: dict[str, Any] = {
    "name": "nightly",
    "team": "payments",
    "schedule": {"expression": "30 1 * * *"},
    "target": {"type": "lambda", "function": "build-invoices"},
}


def errors_of(document: Any) -> list[FieldError]:
    with pytest.raises(SpecError) as caught:
        validate_document(document)
    return caught.value.errors


def with_changes(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = document
        *parents, leaf = dotted.split("__")
        for parent in parents:
            node = node.setdefault(parent, {})
        if value is _DELETE:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return document


_DELETE = object()


def test_issue_example_validates_as_written() -> None:
    job = load_job_file(EXAMPLE)
    assert job.key == "payments/nightly-invoices"
    assert job.schedule is not None and job.schedule.timezone == "America/New_York"
    assert job.schedule.catchup.window == timedelta(hours=6)
    assert isinstance(job.schedule.calendar, CalendarPolicy) and job.schedule.calendar.skip_holidays is not None
    assert job.schedule.calendar.skip_holidays.country == "US"
    assert job.target is not None and job.target.type == "lambda" and job.target.timeout == timedelta(minutes=10)
    assert job.retry.backoff.max == timedelta(minutes=10)
    assert job.escalation is not None and job.escalation.auto_pause_after == 5


def test_storage_round_trip_is_lossless_and_prints_short_durations() -> None:
    job = load_job_file(EXAMPLE)
    stored = job.model_dump(mode="json", exclude_none=True)
    assert stored["target"]["timeout"] == "10m" and stored["schedule"]["catchup"]["window"] == "6h"
    assert JobSpec.model_validate(json.loads(json.dumps(stored))) == job


def test_json_job_files_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(BASE))
    assert load_job_file(path).key == "payments/nightly"


def test_openapi_schema_is_generated_from_the_same_models() -> None:
    schema = JobSpec.model_json_schema(mode="validation")
    assert {"name", "team", "schedule", "target", "dag"} <= set(schema["properties"])
    assert schema["$defs"]["Schedule"]["properties"]["expression"]["type"] == "string"


def test_yaml_norway_stays_a_country() -> None:
    document = parse_document("calendar: {skip_holidays: NO}\nflag: yes\nreal: true")
    assert document == {"calendar": {"skip_holidays": "NO"}, "flag": "yes", "real": True}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("6h", 21600),
        ("2d", 172800),
        ("1h30m", 5400),
        ("PT10M", 600),
        ("P1DT2H", 93600),
    ],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


def test_durations_print_back_short() -> None:
    assert [format_duration(timedelta(seconds=s)) for s in (0, 30, 5400, 93600)] == [
        "0s",
        "30s",
        "1h30m",
        "1d2h",
    ]


# (document changes, path, code, words the message must contain)
ERROR_CASES: list[tuple[dict[str, Any], str, str, str]] = [
    ({"name": "Nightly_Invoices"}, "name", "invalid_name", "a-z, 0-9 and '-'"),
    ({"name": "x" * 64}, "name", "invalid_name", "1-63 characters"),
    ({"team": "-payments"}, "team", "invalid_name", "starting and ending with a letter or digit"),
    ({"name": _DELETE}, "name", "missing", "required field is missing"),
    ({"owner": "payments-oncall"}, "owner", "invalid_email", "not an email address"),
    ({"runbook_url": "wiki/runbook"}, "runbook_url", "invalid_url", "http(s) URL"),
    ({"tags": {"k" * 129: "v"}}, "tags", "invalid_tag", "keys 1-128 characters"),
    ({"colour": "blue"}, "colour", "extra_forbidden", "allowed here: name, team"),
    (
        {"schedule__timzone": "UTC"},
        "schedule.timzone",
        "extra_forbidden",
        "did you mean 'timezone'?",
    ),
    (
        {"schedule__expression": "30 25 * * *"},
        "schedule.expression",
        "invalid_schedule_expression",
        "25",
    ),
    (
        {"schedule__timezone": "Europe/Berln"},
        "schedule.timezone",
        "unknown_timezone",
        "did you mean 'Europe/Berlin'?",
    ),
    ({"schedule__timezone": "EST5EDTX"}, "schedule.timezone", "unknown_timezone", "IANA name"),
    (
        {"schedule__dst": {"gap": "later"}},
        "schedule.dst.gap",
        "literal_error",
        "allowed: shift or skip",
    ),
    (
        {"schedule__dst": {"fold": "twice"}},
        "schedule.dst.fold",
        "literal_error",
        "first, last or both",
    ),
    (
        {"schedule__start_at": "2027-01-01T00:00:00"},
        "schedule.start_at",
        "timezone_aware",
        "UTC offset or Z",
    ),
    (
        {"schedule__start_at": "tomorrow"},
        "schedule.start_at",
        "datetime_from_date_parsing",
        "ISO-8601",
    ),
    (
        {"schedule__start_at": "2027-02-01T00:00:00Z", "schedule__end_at": "2027-01-01T00:00:00Z"},
        "schedule",
        "invalid_schedule_window",
        "must be after start_at",
    ),
    ({"schedule__jitter": "2h"}, "schedule.jitter", "duration_out_of_range", "allowed: 0s to 1h"),
    ({"schedule__jitter": 30}, "schedule.jitter", "duration", "write a unit, e.g. 30s or 30m"),
    ({"schedule__jitter": "soon"}, "schedule.jitter", "duration", "30s, 10m, 6h, 2d"),
    (
        {"schedule__catchup": {"policy": "sometimes"}},
        "schedule.catchup.policy",
        "literal_error",
        "none, latest or all",
    ),
    (
        {"schedule__catchup": {"max_runs": 0}},
        "schedule.catchup.max_runs",
        "greater_than_equal",
        "1",
    ),
    (
        {"schedule__catchup": {"window": "90d"}},
        "schedule.catchup.window",
        "duration_out_of_range",
        "31d",
    ),
    (
        {"schedule__calendar": {"skip_holidays": "XX"}},
        "schedule.calendar.skip_holidays",
        "unknown_holiday_calendar",
        "ISO 3166",
    ),
    (
        {"schedule__calendar": {"skip_holidays": "US-ZZ"}},
        "schedule.calendar.skip_holidays",
        "unknown_subdivision",
        "allowed: AK",
    ),
    (
        {"schedule__calendar": {"exclude_dates": ["2027-13-01"]}},
        "schedule.calendar.exclude_dates",
        "invalid_date",
        "YYYY-MM-DD",
    ),
    (
        {"schedule__blackouts": [{"cron": "0 22 * * FRI"}]},
        "schedule.blackouts[0]",
        "invalid_blackout",
        "cron + duration",
    ),
    (
        {"schedule__blackouts": [{"cron": "0 22 * * FRI", "duration": "1h", "start": "2027-01-01T00:00:00Z"}]},
        "schedule.blackouts[0]",
        "invalid_blackout",
        "either",
    ),
    (
        {"schedule__blackouts": [{"cron": "rate(5 minutes)", "duration": "1h"}]},
        "schedule.blackouts[0].cron",
        "invalid_cron",
        "cron entry",
    ),
    (
        {"schedule__blackouts": [{"cron": "0 22 * * FRI", "duration": "1h", "action": "pause"}]},
        "schedule.blackouts[0].action",
        "literal_error",
        "skip or defer",
    ),
    (
        {"target": {"type": "lamda", "function": "f"}},
        "target",
        "union_tag_invalid",
        "did you mean 'lambda'?",
    ),
    ({"target": {"function": "f"}}, "target", "union_tag_not_found", "allowed: lambda, sqs"),
    (
        {"target__function": "arn:aws:lambda:us-east-1:123:function:x"},
        "target.function",
        "invalid_function",
        "function name or ARN",
    ),
    ({"target__timeout": "20m"}, "target.timeout", "duration_out_of_range", "14m"),
    (
        {"target__payload": {"blob": "x" * 70000}},
        "target.payload",
        "payload_too_large",
        "at most 65536 bytes",
    ),
    ({"target": {"type": "sqs"}}, "target.queue_url", "missing", "required"),
    (
        {"target": {"type": "stepfunctions", "state_machine_arn": "etl"}},
        "target.state_machine_arn",
        "invalid_state_machine_arn",
        "stateMachine",
    ),
    (
        {"target": {"type": "eventbridge", "source": "aws.events"}},
        "target.source",
        "reserved_source",
        "reserved",
    ),
    (
        {"target": {"type": "eventbridge", "bus": "bad bus"}},
        "target.bus",
        "invalid_event_bus",
        "event bus",
    ),
    (
        {"target": {"type": "http", "url": "http://example.com/hook"}},
        "target.url",
        "insecure_url",
        "use https",
    ),
    (
        {"target": {"type": "http", "url": "https://x.io", "method": "FETCH"}},
        "target.method",
        "literal_error",
        "GET, POST",
    ),
    (
        {
            "target": {
                "type": "http",
                "url": "https://x.io",
                "headers": {"Authorization": "Bearer abc"},
            }
        },
        "target.headers",
        "secret_in_headers",
        "secret_headers",
    ),
    (
        {
            "target": {
                "type": "http",
                "url": "https://x.io",
                "secret_headers": {"Authorization": "Bearer abc"},
            }
        },
        "target.secret_headers.Authorization",
        "invalid_secret_reference",
        "secretsmanager:NAME",
    ),
    (
        {"target": {"type": "http", "url": "https://x.io", "headers": {"bad header": "v"}}},
        "target.headers",
        "invalid_header",
        "header name",
    ),
    (
        {"target": {"type": "callback", "payload": {}}},
        "target.payload",
        "extra_forbidden",
        "allowed here: timeout, type",
    ),
    ({"target": _DELETE}, "target", "target_or_dag", "exactly one of target"),
    (
        {"dag": {"tasks": [{"name": "a", "target": {"type": "callback"}}]}},
        "target",
        "target_or_dag",
        "exactly one",
    ),
    ({"retry": {"max_attempts": 0}}, "retry.max_attempts", "greater_than_equal", "1"),
    ({"retry": {"max_attempts": 50}}, "retry.max_attempts", "less_than_equal", "20"),
    (
        {"retry": {"backoff": {"initial": "10m", "max": "1m"}}},
        "retry.backoff",
        "invalid_backoff",
        "at least initial",
    ),
    (
        {"retry": {"backoff": {"jitter": "some"}}},
        "retry.backoff.jitter",
        "literal_error",
        "full, equal or none",
    ),
    (
        {"retry": {"backoff": {"multiplier": 0.5}}},
        "retry.backoff.multiplier",
        "greater_than_equal",
        "1",
    ),
    (
        {"concurrency": {"overlap": "parallel"}},
        "concurrency.overlap",
        "literal_error",
        "skip, allow, replace or queue",
    ),
    ({"concurrency": {"max_running": 0}}, "concurrency.max_running", "greater_than_equal", "1"),
    ({"priority": "urgent"}, "priority", "literal_error", "high, normal or low"),
    ({"heartbeat_timeout": "1s"}, "heartbeat_timeout", "duration_out_of_range", "10s"),
    ({"deadline": "-5m"}, "deadline", "duration", "30s, 10m"),
    (
        {"escalation": {"after_failures": 2}},
        "escalation",
        "no_escalation_channel",
        "sns_topic, webhook",
    ),
    (
        {"escalation": {"sns_topic": "payments-oncall"}},
        "escalation.sns_topic",
        "invalid_topic_arn",
        "SNS topic ARN",
    ),
    ({"run_retention": "2y"}, "run_retention", "duration", "30s, 10m"),
]


@pytest.mark.parametrize(
    ("changes", "path", "code", "words"), ERROR_CASES, ids=[c[1] + ":" + c[2] for c in ERROR_CASES]
)
def test_each_error_names_the_field_and_what_is_allowed(
    changes: dict[str, Any], path: str, code: str, words: str
) -> None:
    found = errors_of(with_changes(**changes))
    matching = [e for e in found if e.path == path and e.code == code]
    assert matching, f"expected {path} {code}, got {[(e.path, e.code, e.message) for e in found]}"
    assert words in matching[0].message


def test_all_errors_are_reported_at_once() -> None:
    document = with_changes(
        name="Bad",
        priority="urgent",
        schedule__timezone="Mars/Olympus",
        target={"type": "http"},
        concurrency={"overlap": "x"},
    )
    paths = {e.path for e in errors_of(document)}
    assert {"name", "priority", "schedule.timezone", "target.url", "concurrency.overlap"} <= paths


class TestDag:
    @staticmethod
    def dag(*tasks: dict[str, Any]) -> dict[str, Any]:
        document = with_changes(target=_DELETE)
        document["dag"] = {"tasks": [{"target": {"type": "callback"}, **t} for t in tasks]}
        return document

    def test_a_diamond_validates_and_orders(self) -> None:
        job = validate_document(
            self.dag(
                {"name": "a"},
                {"name": "b", "depends_on": ["a"]},
                {"name": "c", "depends_on": ["a"]},
                {"name": "d", "depends_on": ["b", "c"], "trigger_rule": "all_done"},
            )
        )
        assert job.dag is not None
        order = job.dag.order()
        assert order[0] == "a" and order[-1] == "d"

    def test_unknown_dependency(self) -> None:
        [error] = errors_of(self.dag({"name": "a", "depends_on": ["extract"]}))
        assert (error.path, error.code) == ("dag.tasks[0].depends_on[0]", "invalid_dag")
        assert "unknown task 'extract'; tasks in this DAG: a" in error.message

    def test_cycle_names_its_tasks(self) -> None:
        [error] = errors_of(
            self.dag(
                {"name": "a", "depends_on": ["c"]},
                {"name": "b", "depends_on": ["a"]},
                {"name": "c", "depends_on": ["b"]},
            )
        )
        assert error.path == "dag.tasks" and error.message.startswith("cycle: ")
        assert {"a", "b", "c"} <= set(error.message.removeprefix("cycle: ").split(" -> "))

    def test_self_dependency(self) -> None:
        [error] = errors_of(self.dag({"name": "a", "depends_on": ["a"]}))
        assert "depends on itself" in error.message

    def test_duplicate_task(self) -> None:
        [error] = errors_of(self.dag({"name": "a"}, {"name": "a"}))
        assert error.path == "dag.tasks[1].name" and "duplicate task 'a' (also tasks[0])" in error.message

    def test_more_than_100_tasks(self) -> None:
        tasks = [{"name": f"t{i}"} for i in range(101)]
        found = errors_of(self.dag(*tasks))
        assert any(e.path == "dag.tasks" and "at most 100" in e.message for e in found)

    def test_graph_errors_come_with_field_errors(self) -> None:
        found = errors_of(
            self.dag(
                {"name": "a", "depends_on": ["zz"]},
                {"name": "b", "target": {"type": "sqs"}, "trigger_rule": "sometimes"},
            )
        )
        paths = {e.path for e in found}
        assert {
            "dag.tasks[0].depends_on[0]",
            "dag.tasks[1].target.queue_url",
            "dag.tasks[1].trigger_rule",
        } <= paths


@pytest.mark.parametrize(
    ("document", "code"),
    [(None, "empty"), ([1, 2], "not_a_mapping"), ("just text", "not_a_mapping")],
)
def test_documents_that_are_not_jobs(document: Any, code: str) -> None:
    assert errors_of(document)[0].code == code


def test_syntax_errors_give_the_line() -> None:
    with pytest.raises(SpecError) as caught:
        parse_document("name: x\nteam: [unclosed\n")
    assert caught.value.errors[0].code == "syntax" and "line" in caught.value.errors[0].message


def test_an_approval_is_a_dag_task_only_and_its_timeout_is_bounded() -> None:
    approval = {"type": "approval", "message": "Delete them?"}
    with pytest.raises(ValidationError) as alone:
        JobSpec.model_validate({"name": "j", "team": "t", "target": approval})
    assert [e["type"] for e in alone.value.errors()] == ["approval_outside_dag"]
    with pytest.raises(ValidationError) as too_long:
        JobSpec.model_validate(
            {"name": "j", "team": "t", "dag": {"tasks": [{"name": "a", "target": approval | {"timeout": "30d"}}]}}
        )
    assert [e["loc"][-1] for e in too_long.value.errors()] == ["timeout"]
    spec = JobSpec.model_validate({"name": "j", "team": "t", "dag": {"tasks": [{"name": "a", "target": approval}]}})
    assert spec.dag is not None and spec.dag.tasks[0].target.timeout == timedelta(hours=24)
