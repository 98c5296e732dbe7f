"""Approvals: a DAG task that waits for a person of the team (``type: approval``).

The task's state waits on its token like a callback task, holding no Lambda; the team's channel is paged
with the question and a link (``Alerts.approval_requested``). A member of the team approves or rejects it
through the API, ``jobsched approve/reject`` or the console; the state's timeout ends an unanswered wait
(TIMED_OUT, its downstream tasks skipped). The answer is the task's outcome, fenced by its attempt: of two
people answering at once, one decides and the other gets 409. Approved: SUCCEEDED, with the decision, the
approver and the comment as its output (downstream tasks may read them). Rejected: FAILED, not retried, and
the run ends CANCELLED with who rejected it and why: a decision, not a failure, so nobody is paged (unless
the task says ``page_on_reject``: then the run fails and pages as failures do).
The approver is in the task's output and in the job's history.
"""

from __future__ import annotations

import json
from datetime import datetime

from jobsched.core.records import JobNotFound
from jobsched.core.run_records import Run
from jobsched.core.runs import TaskStatus
from jobsched.core.spec import ApprovalTarget
from jobsched.pipeline.dag.conductor import DagRuns
from jobsched.pipeline.dag.run_end import REJECTED_BY
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.reruns import RunNotFound
from jobsched.ports import JobsPort

MAX_COMMENT = 1000


class NotAnApproval(ValueError):
    """The named task is not an approval task of the job (422 on ``task``)."""


class NothingToDecide(Exception):
    """The approval task is not waiting for an answer (409): not started yet, or decided, or timed out."""


def decide(
    jobs: JobsPort,
    dags: DagRuns,
    job: str,
    run_id: str,
    task_name: str,
    *,
    approved: bool,
    principal: str,
    comment: str = "",
    now: datetime,
) -> Run:
    """Approve or reject the waiting approval ``task_name`` of a DAG run, as ``principal``; the run after it."""
    stored = jobs.get(job)
    if stored is None:
        raise JobNotFound(job)
    task = next((t for t in (stored.spec.dag.tasks if stored.spec.dag else []) if t.name == task_name), None)
    if task is None or not isinstance(task.target, ApprovalTarget):
        raise NotAnApproval(f"{job} has no approval task {task_name}")
    if dags.runs.get(job, run_id) is None:
        raise RunNotFound(f"no run {run_id} of {job}")
    state = dags.runs.tasks(job, run_id).get(task_name)
    if state is None or state.status is not TaskStatus.RUNNING:
        now_is = state.status.value if state is not None else "not started"
        raise NothingToDecide(f"{job} {run_id} task {task_name} is {now_is}: it is not waiting for an answer")
    decision = "approved" if approved else "rejected"
    said = comment[:MAX_COMMENT]
    answer = Reported(
        succeeded=approved,
        output=json.dumps({"decision": decision, "by": principal, "comment": said}),
        error=f"{REJECTED_BY}{principal}" + (f": {said}" if said else ""),
        decision=True,
    )
    run = dags.ends.complete(AttemptRef(job, run_id, state.attempt, task_name), answer)
    details = {"run_id": run_id, "task": task_name, "attempt": state.attempt, "comment": said}
    jobs.record_action(job, version=stored.version, now=now, principal=principal, action=decision, details=details)
    dags.alerts.approval_decided(run, task_name, f"{decision} by {principal}")
    return run
