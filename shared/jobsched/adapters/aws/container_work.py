"""The containers port over every kind of container work: ECS tasks, Batch jobs and Kubernetes Jobs (their
executions), chosen by the target, or by what the run keeps of the work (``Run.work``)."""

from __future__ import annotations

from jobsched.adapters.aws.batch_jobs import BatchJobs
from jobsched.adapters.aws.ecs_tasks import EcsTasks
from jobsched.adapters.aws.kubernetes_jobs import KubernetesJobs
from jobsched.core.containers import TaskOutcome
from jobsched.core.spec import BatchTarget, ContainerTarget, KubernetesTarget


class ContainerWork:
    """The containers port over the target adapters of the three kinds (by target, or by the work's ids)."""

    def __init__(self, ecs: EcsTasks, batch: BatchJobs, kubernetes: KubernetesJobs) -> None:
        self.ecs, self.batch, self.kubernetes = ecs, batch, kubernetes

    def find(self, team: str, target: ContainerTarget, token: str) -> dict[str, str] | None:
        if isinstance(target, BatchTarget):
            return self.batch.find(team, target, token)
        if isinstance(target, KubernetesTarget):
            return self.kubernetes.find(team, target, token)
        return self.ecs.find(team, target, token)

    def describe(self, team: str, work: dict[str, str]) -> TaskOutcome | None:
        return self._of(work).describe(team, work)

    def stop(self, team: str, work: dict[str, str], reason: str) -> None:
        self._of(work).stop(team, work, reason)

    def task_role(self, team: str, work: dict[str, str]) -> str | None:
        if "execution_arn" in work:
            return None  # a pod's identity is its service account's (IRSA), which no AWS API names here
        return self.batch.task_role(team, work) if "job_id" in work else self.ecs.task_role(team, work)

    def _of(self, work: dict[str, str]) -> EcsTasks | BatchJobs | KubernetesJobs:
        if "execution_arn" in work:
            return self.kubernetes
        return self.batch if "job_id" in work else self.ecs
