"""Run logs in AWS: the Logs Insights query (job and run id, never free text) and its results as lines."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.adapters.aws.logs import InsightsLogs
from jobsched.core.logs import NotAQueryableRun, run_logs_query
from tests.helpers import utc


class FakeInsights:
    def __init__(self) -> None:
        self.started: dict[str, Any] = {}
        self.polls = 0

    def start_query(self, **request: Any) -> dict[str, str]:
        self.started = request
        return {"queryId": "q-1"}

    def get_query_results(self, queryId: str) -> dict[str, Any]:
        self.polls += 1
        if self.polls < 2:
            return {"status": "Running", "results": []}
        row = [
            {"field": "@timestamp", "value": "2027-01-04 09:00:01.250"},
            {"field": "service", "value": "jobsched-worker"},
            {"field": "level", "value": "INFO"},
            {"field": "message", "value": "run message"},
            {"field": "outcome", "value": "succeeded"},
            {"field": "attempt", "value": "1"},
            {"field": "@ptr", "value": "xyz"},
        ]
        return {"status": "Complete", "results": [row]}


def test_the_query_filters_by_job_and_run_id_and_refuses_anything_else() -> None:
    query = run_logs_query("payments/nightly", "20270104T090000Z")
    assert "filter job = 'payments/nightly' and (run_id = '20270104T090000Z'" in query
    for job, run_id in (("payments/x' or 1=1", "r"), ("payments/x", "r' | fields @message"), ("x", "r")):
        with pytest.raises(NotAQueryableRun):
            run_logs_query(job, run_id)


def test_insights_results_become_lines_of_the_run() -> None:
    insights = FakeInsights()
    logs = InsightsLogs(("/aws/lambda/jobsched-prod-Worker",), insights, sleep=lambda _: None)
    [line] = logs.lines(
        "payments/nightly",
        "20270104T090000Z",
        since=utc("2027-01-04T08:45:00Z"),
        until=utc("2027-01-04T10:00:00Z"),
        limit=100,
    )
    assert insights.started["logGroupNames"] == ["/aws/lambda/jobsched-prod-Worker"]
    assert insights.started["startTime"] == int(utc("2027-01-04T08:45:00Z").timestamp())
    assert line.at == utc("2027-01-04T09:00:01.250Z") and line.component == "jobsched-worker"
    assert line.message == "run message" and line.fields == {"outcome": "succeeded", "attempt": 1}


def test_no_log_groups_configured_means_no_query() -> None:
    insights = FakeInsights()
    assert (
        InsightsLogs((), insights).lines(
            "a/b", "r", since=utc("2027-01-04T00:00:00Z"), until=utc("2027-01-05T00:00:00Z"), limit=1
        )
        == []
    )
    assert insights.started == {}
