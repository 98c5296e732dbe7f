"""A run's logs: the one query every component's lines are found by (job and run id are log fields).

The worker, escalation and pages handlers put ``job`` and ``run_id`` on every line of a run; the
dispatcher logs the run ids it sent per job. The same query serves ``jobsched logs`` (through the API),
the link in pages, and the console.
"""

from __future__ import annotations

import re

RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
JOB = re.compile(r"^[a-z0-9-]{1,63}/[a-z0-9-]{1,63}$")
MAX_LINES = 1000


class NotAQueryableRun(ValueError):
    """A job or run id that is not one jobsched makes: it is never put into a query."""


def run_logs_query(job: str, run_id: str, *, limit: int = MAX_LINES) -> str:
    """Logs Insights: the run's lines, oldest first. Both values are checked against the shapes jobsched
    gives them before they are quoted into the query."""
    if not JOB.fullmatch(job) or not RUN_ID.fullmatch(run_id):
        raise NotAQueryableRun(f"not a run of jobsched: {job} {run_id}")
    return (
        "fields @timestamp, service, level, message, outcome, detail, attempt, task"
        f" | filter job = '{job}' and (run_id = '{run_id}' or @message like '{run_id}')"
        f" | sort @timestamp asc | limit {int(limit)}"
    )
