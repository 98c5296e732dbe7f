"""A run's trace as spans, from what its records say (``core.traces`` names them): the run (from its fire time to
its end), its wait in the queue (fire time to the last attempt's start), its last attempt, and each DAG task's
attempt nested under the run. The console's waterfall draws these for every run, sampled or not; the same ids are
what a target's own spans join under (its ``traceparent``)."""

from __future__ import annotations

from jobsched.core.run_records import Run, TaskState
from jobsched.core.runs import instant_text
from jobsched.core.traces import Span, attempt_span_id, run_span_id, trace_id

MAX_SPANS = 200  # a DAG run's map items beyond this are left out of the waterfall


def run_trace_id(run: Run) -> str:
    return trace_id(run.job, run.run_id, instant_text(run.scheduled_at))


def run_spans(run: Run, tasks: dict[str, TaskState]) -> list[Span]:
    """The run's spans, parents first, then its tasks' in start order."""
    root = run_span_id(run.job, run.run_id)
    spans = [Span(f"run {run.run_id}", root, None, run.fire_at, run.finished_at, run.status.value)]
    if run.started_at is not None:
        if run.started_at > run.fire_at:
            spans.append(Span("queued", f"{root[:12]}0000", root, run.fire_at, run.started_at, "waited"))
        if not tasks:
            attempt = attempt_span_id(run.job, run.run_id, run.attempt)
            spans.append(
                Span(f"attempt {run.attempt}", attempt, root, run.started_at, run.finished_at, run.status.value)
            )
    started = sorted((t for t in tasks.values() if t.started_at is not None), key=lambda t: (t.started_at, t.name))
    for task in started[:MAX_SPANS]:
        assert task.started_at is not None
        span = attempt_span_id(run.job, run.run_id, task.attempt, task.name)
        name = f"task {task.name}" + (f" (attempt {task.attempt})" if task.attempt > 1 else "")
        spans.append(Span(name, span, root, task.started_at, task.finished_at, task.status.value))
    return spans
