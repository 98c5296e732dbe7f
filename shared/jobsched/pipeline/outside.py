"""The door for ends from outside: one ``Ends`` that sends each to the run's side or the task's, by the attempt
it names (``AttemptRef.task``). The callbacks routes, container results and approvals use only this."""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.core.errors import WorkflowsNotConfigured
from jobsched.core.run_records import ProgressReport, Run
from jobsched.pipeline.dag.ends import TaskEnds
from jobsched.pipeline.ends import AttemptRef, Ends, Reported
from jobsched.pipeline.run_ends import RunEnds


@dataclass(frozen=True)
class OutsideEnds:
    run_ends: RunEnds
    task_ends: TaskEnds | None  # None: this deployment runs no DAG jobs

    def side(self, ref: AttemptRef) -> Ends:
        if ref.task is None:
            return self.run_ends
        if self.task_ends is None:
            raise WorkflowsNotConfigured("this worker has no Step Functions access configured")
        return self.task_ends

    def complete(self, ref: AttemptRef, reported: Reported) -> Run:
        return self.side(ref).complete(ref, reported)

    def heartbeat(self, ref: AttemptRef, report: ProgressReport | None = None) -> Run:
        return self.side(ref).heartbeat(ref, report)

    def stop(self, ref: AttemptRef, cause: str) -> Run:
        return self.side(ref).stop(ref, cause)
