"""'Run Finished' events on the deployment's bus: what users (and job dependencies) build on.

Put once after the conditional write that ended the run succeeded: a subscriber of ``pipeline.lifecycle``
(subscribed in the wiring).
Best effort: a failed put is logged and counted (``RunEventsUnpublished``), never allowed to fail the run's
own recording; a process that dies between the write and the put loses the event (the run record stays the
truth, and `jobsched runs` shows it).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.adapters.aws.clients import client
from jobsched.core.events import RUN_FINISHED, RUN_FINISHED_SOURCE
from jobsched.core.run_records import Run
from jobsched.core.runs import instant_text, moment_text

log = logging.getLogger(__name__)

SOURCE = RUN_FINISHED_SOURCE
DETAIL_TYPE = RUN_FINISHED


def run_finished_detail(run: Run) -> dict[str, Any]:
    """The event's detail (documented in docs/guide/job-files.md, "The Run Finished event")."""
    team, _, name = run.job.partition("/")
    duration = (
        round((run.finished_at - run.started_at).total_seconds(), 3)
        if run.started_at is not None and run.finished_at is not None
        else None
    )
    return {
        "team": team,
        "job": name,
        "run_id": run.run_id,
        "logical_instant": instant_text(run.scheduled_at),
        "status": run.status.value,
        "attempt": run.attempt,
        "trigger": run.trigger,
        "started_at": moment_text(run.started_at) if run.started_at else None,
        "finished_at": moment_text(run.finished_at) if run.finished_at else None,
        "duration_seconds": duration,
        "correlation_id": run.correlation_id,
        "output_ref": f"/teams/{team}/jobs/{name}/runs/{run.run_id}",
    }


class RunEvents:
    def __init__(self, bus: str = "default", events: Any | None = None) -> None:
        self.bus, self._client = bus, events

    def publish(self, run: Run) -> bool:
        entry: dict[str, Any] = {
            "Source": SOURCE,
            "DetailType": DETAIL_TYPE,
            "Detail": json.dumps(run_finished_detail(run), separators=(",", ":")),
            "EventBusName": self.bus,
            "Resources": [],
        }
        if run.finished_at is not None:
            entry["Time"] = (
                run.finished_at
            )  # the event's time is the run's end (a downstream's lateness counts from it)
        try:
            response = (self._client or client("events")).put_events(Entries=[entry])
        except (ClientError, BotoCoreError):
            log.warning("Run Finished not published", exc_info=True, extra={"job": run.job, "run_id": run.run_id})
            return False
        if response.get("FailedEntryCount"):
            log.warning(
                "Run Finished refused", extra={"job": run.job, "run_id": run.run_id, "entries": response.get("Entries")}
            )
            return False
        return True
