"""How far a DAG run's tasks have got, in words people read: why a task has not started (the API's run view,
`jobsched run` and the console's run page say the same)."""

from __future__ import annotations

from jobsched.core.run_records import Run, TaskState
from jobsched.core.runs import TERMINAL, TaskStatus, instant_text
from jobsched.core.spec import JobSpec
from jobsched.core.waits import awaited

FINISHED_TASK = {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.SKIPPED}


def task_reason(
    name: str, state: TaskState | None, depends_on: list[str], states: dict[str, TaskState], spec: JobSpec, run: Run
) -> str | None:
    """Why a task has not started: the dependencies it waits for (with theirs), or the data it waits for."""
    status = state.status if state is not None else TaskStatus.PENDING
    if status not in (TaskStatus.PENDING, TaskStatus.WAITING) or run.status in TERMINAL:
        return None
    since = f" since {instant_text(state.parked_at)}" if state is not None and state.parked_at else ""
    unfinished = [
        f"{upstream} ({states[upstream].status.value if upstream in states else 'PENDING'})"
        for upstream in depends_on
        if upstream not in states or states[upstream].status not in FINISHED_TASK
    ]
    if unfinished:
        return "waiting for its dependencies: " + ", ".join(unfinished) + since
    task = next((task for task in (spec.dag.tasks if spec.dag else []) if task.name == name), None)
    if status is TaskStatus.WAITING and task is not None and task.wait_for:
        conditions = awaited(spec, task.wait_for, run.scheduled_at)
        return "waiting for data: " + ", ".join(condition.describe() for condition in conditions) + since
    return None
