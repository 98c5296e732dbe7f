"""A job's schedule: pause it (with a reason), resume it, and preview its next fire times."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.models import JobView, PauseView, PreviewEntry, SkippedInstant
from jobsched.api.requests import PauseRequest
from jobsched.api.views import job_view
from jobsched.core.bounds import Instant
from jobsched.core.runs import instant_text, job_key
from jobsched.registry.jobs import pause_job, resume_job
from jobsched.schedule.fires import schedule_of


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, member, existing = access.services, access.member, access.existing

    @router.post(
        "/teams/<team>/jobs/<name>/pause",
        operation_id="pauseJob",
        tags=["schedule"],
        summary="Pause a job, with a reason",
    )
    def pause(team: str, name: str, body: Annotated[PauseRequest, Body()]) -> PauseView:
        caller = member(team)
        existing(team, name)
        key = job_key(team, name)
        stored = pause_job(services().jobs, key, now=services().clock(), principal=caller.arn, reason=body.reason)
        cancelled = services().worker.run_ends.stop_holders(key) if body.cancel_running else []
        for run in cancelled:
            services().jobs.record_action(
                key,
                version=stored.version,
                now=services().clock(),
                principal=caller.arn,
                action="cancel",
                details={"run_id": run.run_id, "attempt": run.attempt, "why": "paused with cancel_running"},
            )
        view = job_view(stored, services().clock(), services().company())
        return PauseView(**view.model_dump(), cancelled_runs=[run.run_id for run in cancelled])

    @router.post(
        "/teams/<team>/jobs/<name>/resume",
        operation_id="resumeJob",
        tags=["schedule"],
        summary="Resume a paused job",
    )
    def resume(team: str, name: str) -> JobView:
        caller = member(team)
        existing(team, name)
        stored = resume_job(services().jobs, job_key(team, name), now=services().clock(), principal=caller.arn)
        return job_view(stored, services().clock(), services().company())

    @router.get(
        "/teams/<team>/jobs/<name>/preview",
        operation_id="previewJob",
        tags=["schedule"],
        summary="The job's next fire times",
    )
    def preview(
        team: str,
        name: str,
        count: Annotated[int, Query(ge=1, le=100)] = 10,
        after: Annotated[Instant | None, Query()] = None,
    ) -> list[PreviewEntry]:
        member(team)
        stored = existing(team, name)
        compiled = schedule_of(stored, services().company())
        if compiled is None:
            return []
        start = after if after and after.tzinfo else services().clock()
        entries = []
        for fire, skipped in compiled.preview(start, count):
            entries.append(
                PreviewEntry(
                    utc=instant_text(fire.at),
                    local=fire.at.astimezone(compiled.zone_of(fire)).isoformat(),
                    schedule=fire.schedule,
                    reason=fire.reason,
                    fire_at=instant_text(fire.fire_at) if fire.fire_at != fire.at else None,
                    moved_from=[wall.isoformat() for wall in fire.moved_from] or None,
                    skipped=[
                        SkippedInstant(
                            utc=instant_text(skip.at) if skip.exists else None,
                            local=(
                                skip.at.astimezone(compiled.zone_of(skip)) if skip.exists else skip.wall
                            ).isoformat(),
                            reason=skip.reason,
                        )
                        for skip in skipped
                    ]
                    or None,
                )
            )
        return entries

    return router
