"""One typed door for what ends an attempt from outside the worker's own execution: a callback's result, a
container's state change, a person's answer to an approval, a heartbeat, a stop by request.

The same three verbs for a run's attempt (``run_ends.RunEnds``) and a DAG task's (``dag.ends.TaskEnds``); the
callbacks routes, container results and approvals name the attempt (``AttemptRef``) and ``outside.OutsideEnds``
picks the side. Each end is fenced by its attempt like a target's own result: StaleAttempt if that attempt is
no longer the one running (retried, timed out, cancelled, finished).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from jobsched.core.run_records import ProgressReport, Run


@dataclass(frozen=True)
class AttemptRef:
    """The attempt an end from outside is about: a run's, or (``task``) one task's of a DAG run."""

    job: str
    run_id: str
    attempt: int | None = None  # None: whichever attempt is running (a stop by request)
    task: str | None = None


@dataclass(frozen=True)
class Reported:
    """A result reported from outside. ``decision``: a person's answer to an approval task, which only
    ``approvals.decide`` gives (it checks the person); a callback token can never answer an approval."""

    succeeded: bool
    output: str | None = None
    error: str | None = None
    retryable: bool = True
    decision: bool = False


class Ends(Protocol):
    def complete(self, ref: AttemptRef, reported: Reported) -> Run:
        """The attempt's result, judged by the same rules (checks, retry, fail, page, release) as a target's."""
        ...

    def heartbeat(self, ref: AttemptRef, report: ProgressReport | None = None) -> Run:
        """The attempt is alive: its lease moves on (and a run keeps what it reported)."""
        ...

    def stop(self, ref: AttemptRef, cause: str) -> Run:
        """End the attempt by request (CANCELLED), with what it started stopped."""
        ...
