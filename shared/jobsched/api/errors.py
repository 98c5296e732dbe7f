"""Errors as the API answers them: one body, a stable code, the field, and the right 4xx."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from jobsched.api.identity import Forbidden, Unauthenticated
from jobsched.api.models import ErrorBody, ErrorDetail, ErrorResponse, JobBody
from jobsched.api.tokens import TOKEN_HEADER, InvalidToken
from jobsched.core.errors import FieldError, SpecError, WorkflowsNotConfigured, field_errors_from
from jobsched.core.records import JobExists, JobNotFound, StaleAttempt, VersionConflict
from jobsched.pipeline.reruns import RerunRefused, RerunUnsupported, RunInFlight, RunNotFound
from jobsched.pipeline.triggers import BackfillLimit, BackfillTooLarge, NoSchedule
from jobsched.schedule.engine import ScheduleTooExpensive
from jobsched.tenancy.quotas import QuotaExceeded


class Throttled(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many requests for this team; retry in {retry_after} s")
        self.retry_after = retry_after


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, field: str | None = None, errors: list[FieldError] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.errors = status, code, message, field, errors or []


def error_response(
    status: int, code: str, message: str, field: str | None = None, errors: list[FieldError] | None = None
) -> Response[str]:
    """The one error body: ``{"error": {"code", "message", "field", "errors": [...]}}``."""
    body = ErrorResponse(
        error=ErrorBody(code=code, message=message, field=field, errors=[detail(e) for e in errors or []])
    )
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body.model_dump_json())


# Domain exceptions a client's request can cause: (status, stable code, field, message). Anything not
# here is a bug and stays a 500.
MAPPED: dict[type[Exception], tuple[int, str, str | None, Callable[[Any], str]]] = {
    Unauthenticated: (401, "unauthenticated", None, str),
    Forbidden: (403, "forbidden", "team", str),
    JobNotFound: (404, "not_found", None, lambda error: f"no such job or backfill: {error}"),
    InvalidToken: (404, "unknown_run_token", TOKEN_HEADER, str),
    JobExists: (409, "job_exists", None, lambda error: f"{error} was created concurrently; retry"),
    StaleAttempt: (409, "attempt_superseded", None, str),
    VersionConflict: (412, "version_mismatch", "If-Match", str),
    WorkflowsNotConfigured: (422, "unsupported", "dag", str),
    ScheduleTooExpensive: (422, "schedule_too_expensive", "schedule", str),
    BackfillTooLarge: (422, "backfill_too_large", "to", str),
    NoSchedule: (422, "no_schedule", "schedule", str),
    BackfillLimit: (429, "backfill_limit", None, str),
    RunNotFound: (404, "run_not_found", "run_id", str),
    RunInFlight: (409, "run_in_flight", None, str),
    RerunRefused: (409, "rerun_refused", "force", str),
    RerunUnsupported: (422, "unsupported", "dag", str),
}


def register_error_handlers(app: APIGatewayRestResolver) -> None:
    """Every exception the domain raises for bad input, mapped once to its status and stable code."""
    for kind, (status, code, field, message) in MAPPED.items():
        app.exception_handler(kind)(_mapped(status, code, field, message))

    @app.exception_handler(RequestValidationError)
    def _invalid_request(error: RequestValidationError) -> Response[str]:
        found = request_errors(error.errors())
        first = found[0] if found else FieldError("", "invalid_request", "invalid request")
        return error_response(422, "invalid_request", str(first), first.path or None, found)

    @app.exception_handler(ApiError)
    def _api_error(error: ApiError) -> Response[str]:
        return error_response(error.status, error.code, error.message, error.field, error.errors)

    @app.exception_handler(Throttled)
    def _throttled(error: Throttled) -> Response[str]:
        response = error_response(429, "throttled", str(error))
        response.headers["Retry-After"] = str(error.retry_after)
        return response

    @app.exception_handler(SpecError)
    def _spec_error(error: SpecError) -> Response[str]:
        first = error.errors[0]
        return error_response(422, "invalid_job", str(first), first.path or None, error.errors)

    @app.exception_handler(QuotaExceeded)
    def _quota(error: QuotaExceeded) -> Response[str]:
        return error_response(429, "quota_exceeded", str(error), error.limit)

    @app.not_found
    def _no_route(_: Exception) -> Response[str]:
        event = app.current_event
        return error_response(404, "no_route", f"no route {event.http_method} {event.path}")


def _mapped(
    status: int, code: str, field: str | None, message: Callable[[Any], str]
) -> Callable[[Exception], Response[str]]:
    def handle(error: Exception) -> Response[str]:
        return error_response(status, code, message(error), field)

    return handle


def detail(error: FieldError) -> ErrorDetail:
    return ErrorDetail(field=error.path, code=error.code, message=error.message)


def request_errors(errors: Any) -> list[FieldError]:
    """Powertools' request validation errors in our form: the location prefix dropped, messages explained."""
    stripped = []
    for detail in errors:
        location = tuple(detail.get("loc", ()))
        if location and location[0] in ("body", "query", "path", "header"):
            location = location[1:]
        stripped.append({**detail, "loc": location})
    return field_errors_from(stripped, JobBody)
