"""Company calendars and maintenance windows: every caller reads them (GET /company, the file the offline commands
take with --company); platform admins set and delete them, each change previewed (which jobs' next fires move),
refused if a job it moves would break the organisation's policy, and kept in the company's history
(``planning.company``)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, Field

from jobsched.api.access import MAX_PAGE, Access
from jobsched.api.errors import ApiError, detail
from jobsched.api.models import ErrorDetail, HistoryPage
from jobsched.api.routes.history import entry_view, from_token, to_token
from jobsched.core.errors import SpecError
from jobsched.core.spec.base import NAME
from jobsched.core.spec.company import CompanyCalendar, CompanyKind, MaintenanceWindow, ref
from jobsched.core.spec.schedule import COMPANY_PREFIX
from jobsched.planning.company import CHANGE_HISTORY, CompanyChange, EntryInUse, TooManyJobs, change_company_entry

ENTRY = Path(pattern=NAME.pattern, description="the entry's name (jobs name it company/NAME)")
REASON = Query(min_length=1, max_length=500, description="why (kept in the company's history)")
log = logging.getLogger(__name__)


class CompanyView(BaseModel):
    # Documents as stored (dicts: the request bodies' models stay input-only, one model each in a generated client).
    calendars: dict[str, dict[str, Any]] = Field(description="by name: schedule.calendar: company/NAME")
    maintenance: dict[str, dict[str, Any]] = Field(description="by name: maintenance: [company/NAME]")


class MovedJobView(BaseModel):
    job: str
    before: list[str] = Field(description="its next fire times now")
    after: list[str] = Field(description="its next fire times with the change")


class CompanyChangeView(BaseModel):
    entry: str
    applied: bool = Field(description="false: a dry run, or refused (see refused)")
    reached: int = Field(description="jobs the change reaches (naming it, or matched by its selector)")
    moved: list[MovedJobView] = Field(description="the jobs whose next fires it moves")
    refused: list[ErrorDetail] = Field(description="what a job it reaches would break (the change is refused)")


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services = access.services

    @router.get(
        "/company",
        operation_id="getCompany",
        tags=["company"],
        summary="The company calendars and maintenance windows jobs may name (company/NAME)",
    )
    def get_company() -> CompanyView:
        access.principal()
        company = services().company()
        return CompanyView(
            calendars={
                name.removeprefix(COMPANY_PREFIX): entry.model_dump(mode="json", exclude_none=True)
                for name, entry in company.calendars.items()
            },
            maintenance={
                name.removeprefix(COMPANY_PREFIX): entry.model_dump(mode="json", exclude_none=True)
                for name, entry in company.windows.items()
            },
        )

    @router.put(
        "/admin/company/calendars/<name>",
        operation_id="putCompanyCalendar",
        tags=["company"],
        summary="Set a company calendar (dry_run: only show which jobs' next fires move); 422 if a job breaks policy",
    )
    def put_calendar(
        name: Annotated[str, ENTRY],
        body: Annotated[CompanyCalendar, Body()],
        reason: Annotated[str, REASON],
        dry_run: Annotated[bool, Query()] = False,
    ) -> CompanyChangeView:
        return change(access, "calendar", name, body.model_dump(mode="json", exclude_none=True), reason, dry_run)

    @router.put(
        "/admin/company/maintenance/<name>",
        operation_id="putMaintenanceWindow",
        tags=["company"],
        summary="Set a maintenance window (dry_run: only show which jobs' next fires move); 422 if a job breaks policy",
    )
    def put_window(
        name: Annotated[str, ENTRY],
        body: Annotated[MaintenanceWindow, Body()],
        reason: Annotated[str, REASON],
        dry_run: Annotated[bool, Query()] = False,
    ) -> CompanyChangeView:
        return change(access, "maintenance", name, body.model_dump(mode="json", exclude_none=True), reason, dry_run)

    @router.delete(
        "/admin/company/calendars/<name>",
        operation_id="deleteCompanyCalendar",
        tags=["company"],
        summary="Delete a company calendar (409 while jobs name it)",
    )
    def delete_calendar(name: Annotated[str, ENTRY], reason: Annotated[str, REASON]) -> CompanyChangeView:
        return change(access, "calendar", name, None, reason, False)

    @router.delete(
        "/admin/company/maintenance/<name>",
        operation_id="deleteMaintenanceWindow",
        tags=["company"],
        summary="Delete a maintenance window (409 while jobs name it)",
    )
    def delete_window(name: Annotated[str, ENTRY], reason: Annotated[str, REASON]) -> CompanyChangeView:
        return change(access, "maintenance", name, None, reason, False)

    @router.get(
        "/admin/company/history",
        operation_id="getCompanyHistory",
        tags=["company"],
        summary="Changes to the company calendars and maintenance windows, newest first",
    )
    def company_history(
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        next_token: Annotated[str | None, Query(max_length=200, pattern="^[A-Za-z0-9_-]+$")] = None,
    ) -> HistoryPage:
        access.admin()
        before = from_token(next_token) if next_token else None
        entries, last = services().jobs.history(CHANGE_HISTORY, limit=limit, before=before)
        now = services().clock()
        return HistoryPage(entries=[entry_view(entry, now) for entry in entries], next_token=to_token(last))

    return router


def view(change: CompanyChange) -> CompanyChangeView:
    return CompanyChangeView(
        entry=change.reference,
        applied=change.applied,
        reached=change.reached,
        moved=[MovedJobView(job=m.job, before=m.before, after=m.after) for m in change.moved],
        refused=[detail(error) for error in change.refused],
    )


def change(
    access: Access, kind: CompanyKind, name: str, document: dict[str, Any] | None, reason: str, dry_run: bool
) -> CompanyChangeView:
    caller = access.admin()
    try:
        result = change_company_entry(
            access.services().jobs,
            kind,
            ref(name),
            document,
            policy=access.services().policy,
            now=access.services().clock(),
            principal=caller.arn,
            reason=reason,
            dry_run=dry_run,
        )
    except EntryInUse as error:
        raise ApiError(409, "in_use", str(error)) from None
    except TooManyJobs as error:
        raise ApiError(409, "too_many_jobs", str(error)) from None
    if result.refused and not dry_run:
        raise SpecError(result.refused)
    log.info(
        "company entry changed" if result.applied else "company entry previewed",
        extra={"entry": result.reference, "principal": caller.arn, "moved": len(result.moved)},
    )
    return view(result)
