"""What the worker did with one message: the answer every path of a run (worker, DAG tasks) gives back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from jobsched.core.messages import AuditMessage, DagTaskMessage
from jobsched.core.run_records import Run
from jobsched.core.runs import RunMessage

Action = Literal[
    "succeeded",
    "failed",
    "retrying",
    "pending",
    "skipped",
    "duplicate",
    "superseded",
    "waiting",
    "cancelled",
    "duplicate_execution",  # the same attempt ran twice: must never happen (M5, alarmed)
    "audited",  # an audit message (``pipeline.sent_audits``): its instant has a record, or is not its to judge
    "lost",  # an audit message: its instant had no record long enough to be recorded MISSED as lost
]


@dataclass(frozen=True)
class Outcome:
    """What happened to one message. ``wait`` set: the message was sent again to come back after that long."""

    action: Action
    detail: str = ""
    wait: timedelta | None = None
    run: Run | None = None
    lateness: timedelta | None = None
    priority: str = "normal"  # the job's priority class, for metrics
    resend: RunMessage | DagTaskMessage | AuditMessage | None = (
        None  # what goes back on the queue for ``wait`` (default: the message)
    )
