"""A job's dependencies: the jobs it runs after and the jobs that run after it, with their last runs."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.models import DependenciesView, DependencyView, LastRunView
from jobsched.core.runs import instant_text
from jobsched.registry.dependencies import Dependency, dependencies


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.get(
        "/teams/<team>/jobs/<name>/dependencies",
        operation_id="getJobDependencies",
        tags=["jobs"],
        summary="The jobs this job runs after, and the jobs that run after it, with their last runs",
    )
    def get_dependencies(team: str, name: str) -> DependenciesView:
        member(team)
        stored = existing(team, name)
        s = services()
        upstreams, downstreams = dependencies(s.jobs, s.runs, stored)
        return DependenciesView(
            job=stored.key, upstreams=[_view(d) for d in upstreams], downstreams=[_view(d) for d in downstreams]
        )

    return router


def _view(dependency: Dependency) -> DependencyView:
    run = dependency.last_run
    last = (
        LastRunView(run_id=run.run_id, status=run.status.value, scheduled_at=instant_text(run.scheduled_at))
        if run is not None
        else None
    )
    return DependencyView(job=dependency.job, how=dependency.how, exists=dependency.exists, last_run=last)
