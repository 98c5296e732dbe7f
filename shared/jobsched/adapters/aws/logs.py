"""A run's logs from CloudWatch Logs Insights, over the functions' log groups."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from jobsched.adapters.aws.clients import client
from jobsched.core.logs import run_logs_query
from jobsched.core.records import LogLine
from jobsched.core.runs import parse_instant
from jobsched.core.tz import UTC

QUERY_TIMEOUT_S = 20.0  # the API answers within API Gateway's 29 s


class InsightsLogs:
    def __init__(
        self,
        log_groups: tuple[str, ...],
        logs: Any | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_groups = log_groups
        self._client = logs
        self.sleep = sleep
        self.monotonic = monotonic

    @property
    def logs(self) -> Any:
        return self._client or client("logs")

    def lines(self, job: str, run_id: str, *, since: datetime, until: datetime, limit: int) -> list[LogLine]:
        if not self.log_groups:
            return []
        query_id = self.logs.start_query(
            logGroupNames=list(self.log_groups),
            startTime=int(since.timestamp()),
            endTime=int(until.timestamp()) + 1,
            queryString=run_logs_query(job, run_id, limit=limit),
            limit=limit,
        )["queryId"]
        deadline = self.monotonic() + QUERY_TIMEOUT_S
        while True:
            response = self.logs.get_query_results(queryId=query_id)
            if response["status"] not in ("Scheduled", "Running") or self.monotonic() > deadline:
                break
            self.sleep(0.5)
        return [line for row in response.get("results", []) if (line := _line(row)) is not None]


def _line(row: list[dict[str, str]]) -> LogLine | None:
    values = {cell["field"]: cell["value"] for cell in row}
    stamp = values.pop("@timestamp", None)
    if stamp is None:
        return None
    values.pop("@ptr", None)
    message = values.pop("message", "")
    try:
        at = parse_instant(stamp.replace(" ", "T") + ("" if stamp.endswith("Z") else "Z"))
    except ValueError:
        at = datetime.now(UTC)
    fields = {key: _value(text) for key, text in values.items() if key not in ("service", "level")}
    return LogLine(at, values.get("service", ""), values.get("level", ""), message, fields)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
