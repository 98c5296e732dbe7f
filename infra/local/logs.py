"""The lines the in-process handlers write, kept for ``jobsched logs`` under ``make run``.

In AWS a run's lines are found with Logs Insights; here every function runs in this process, so the
runtime keeps their JSON lines (the handlers' own Powertools format, with the run's keys) in a ring and
answers the same question over it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from datetime import UTC, datetime
from typing import Any

from jobsched.core.records import LogLine

LOGGERS = ("jobsched-dispatcher", "jobsched-worker", "jobsched-escalation", "jobsched-pages", "jobsched-api")
KEEP = 200_000  # lines; older ones are dropped first


class CapturedLogs:
    def __init__(self, keep: int = KEEP) -> None:
        self.records: deque[dict[str, Any]] = deque(maxlen=keep)
        self.lock = threading.Lock()
        self._attached: list[tuple[logging.Logger, logging.Handler]] = []

    def attach(self) -> None:
        """Capture every handler logger's lines, formatted as that handler formats them (with its keys)."""
        for name in LOGGERS:
            logger = logging.getLogger(name)
            formatter = next((h.formatter for h in logger.handlers if h.formatter is not None), None)
            capture = _Capture(self)
            capture.setFormatter(formatter)
            logger.addHandler(capture)
            self._attached.append((logger, capture))

    def detach(self) -> None:
        for logger, capture in self._attached:
            logger.removeHandler(capture)
        self._attached.clear()

    def lines(self, job: str, run_id: str, *, since: datetime, until: datetime, limit: int) -> list[LogLine]:
        with self.lock:
            records = list(self.records)
        found = []
        for values in records:
            if values.get("job") != job or (values.get("run_id") != run_id and run_id not in values.get("run_ids", ())):
                continue
            at = _timestamp(values.get("timestamp"))
            if since <= at <= until:
                found.append(_line(values, at))
        return found[:limit]


class _Capture(logging.Handler):
    def __init__(self, logs: CapturedLogs) -> None:
        super().__init__()
        self.logs = logs

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            values = json.loads(text) if text.startswith("{") else {"message": text}
        except Exception:  # a line that cannot be formatted is not worth failing a run for
            return
        with self.logs.lock:
            self.logs.records.append(values)


def _timestamp(text: Any) -> datetime:
    """Powertools writes ``2027-01-04 09:00:00,123+0000``."""
    try:
        return datetime.strptime(str(text)[:23], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
    except ValueError:
        return datetime.now(UTC)


def _line(values: dict[str, Any], at: datetime) -> LogLine:
    ignored = {"timestamp", "level", "message", "service", "location", "xray_trace_id", "sampling_rate"}
    fields = {key: value for key, value in values.items() if key not in ignored}
    return LogLine(
        at, str(values.get("service", "")), str(values.get("level", "")), str(values.get("message", "")), fields
    )
