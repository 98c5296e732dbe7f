"""DAG jobs' state machines: compiled from the spec when the job is registered, removed with it."""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.core.spec import JobSpec
from jobsched.dag.definition import compile_definition, definition_text
from jobsched.ports import WorkflowsPort


@dataclass(frozen=True)
class DagDeployer:
    """Compiles DAG jobs to state machines sending to the work queue of the job's priority class."""

    workflows: WorkflowsPort
    queue_urls: dict[str, str]

    def deploy(self, spec: JobSpec) -> bool:
        """Create or update the job's state machine; True if anything changed."""
        definition = compile_definition(spec, queue_url=self.queue_urls[spec.priority])
        return self.workflows.ensure(spec.key, spec.team, definition_text(definition))[1]

    def remove(self, job: str) -> None:
        self.workflows.delete(job)
