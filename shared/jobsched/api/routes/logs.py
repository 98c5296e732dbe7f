"""Run logs: a run's lines from every component, through Logs Insights in AWS (captured lines locally)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.errors import ApiError
from jobsched.api.models import RunLogs
from jobsched.api.views import log_line_view
from jobsched.core.bounds import Instant
from jobsched.core.logs import MAX_LINES, run_logs_query
from jobsched.pipeline.containers import started_task


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.get(
        "/teams/<team>/jobs/<name>/runs/<run_id>/logs",
        operation_id="getRunLogs",
        tags=["runs"],
        summary="A run's log lines from every component (dispatcher, worker, target adapter, escalation)",
    )
    def logs(
        team: str,
        name: str,
        run_id: str,
        since: Annotated[Instant | None, Query(description="lines after this instant (default: the run's)")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LINES)] = 200,
    ) -> RunLogs:
        member(team)
        stored = existing(team, name)
        s = services()
        run = s.runs.get(stored.key, run_id)
        if run is None or s.logs is None:
            raise ApiError(404, "run_not_found", f"no run {run_id} of {stored.key}", "run_id")
        # From before the instant (the dispatcher sends up to 14 minutes ahead) to now.
        start = since if since is not None and since.tzinfo else run.scheduled_at - timedelta(minutes=15)
        now = s.clock()
        lines = s.logs.lines(stored.key, run_id, since=start, until=now, limit=limit)
        work = started_task(run, any_attempt=True)
        if s.container_logs is not None and work:  # the container's own lines, among the scheduler's
            own = s.container_logs.lines(stored.spec.team, work, since=start, until=now, limit=limit)
            lines = sorted([*lines, *own], key=lambda line: line.at)[-limit:]
        return RunLogs(
            job=stored.key,
            run_id=run_id,
            lines=[log_line_view(line) for line in lines],
            query=run_logs_query(stored.key, run_id, limit=limit),
        )

    return router
