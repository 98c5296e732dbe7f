"""Errors as the API answers them: one body, a stable code, the field, and the right 4xx."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from pydantic import BaseModel

from jobsched.api.identity import Forbidden, Unauthenticated
from jobsched.api.models import ErrorBody, ErrorDetail, ErrorResponse
from jobsched.api.requests import JobBody
from jobsched.api.tokens import TOKEN_HEADER, InvalidToken
from jobsched.core.errors import FieldError, SpecError, WorkflowsNotConfigured, field_errors_from
from jobsched.core.records import JobExists, JobNotFound, VersionConflict
from jobsched.core.run_records import StaleAttempt
from jobsched.pipeline.approvals import NotAnApproval, NothingToDecide
from jobsched.pipeline.dead_letters import UnknownQueue
from jobsched.pipeline.manual_runs import BackfillLimit, BackfillTooLarge, NoSchedule
from jobsched.pipeline.reruns import RerunRefused, RerunUnsupported, RunInFlight, RunNotFound
from jobsched.pipeline.stops import StopAlreadyResumed, StopNotFound, TooManyStopped
from jobsched.schedule.steps import ScheduleTooExpensive
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
    RerunUnsupported: (422, "invalid_rerun", "tasks", str),
    NotAnApproval: (422, "not_an_approval", "task", str),
    NothingToDecide: (409, "nothing_to_decide", "task", str),
    StopNotFound: (404, "stop_not_found", "stop_id", lambda error: f"no emergency stop {error}"),
    StopAlreadyResumed: (409, "stop_already_resumed", "stop_id", str),
    TooManyStopped: (422, "selector_too_wide", "teams", str),
    UnknownQueue: (404, "queue_not_found", "queue", str),
}


def register_error_handlers(app: APIGatewayRestResolver) -> None:
    """Every exception the domain raises for bad input, mapped once to its status and stable code."""
    for kind, (status, code, field, message) in MAPPED.items():
        app.exception_handler(kind)(_mapped(status, code, field, message))

    @app.exception_handler(RequestValidationError)
    def _invalid_request(error: RequestValidationError) -> Response[str]:
        found = request_errors(error.errors(), body_model(app))
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

    @app.exception_handler(RequestUnsupportedContentType)
    def _unsupported_content_type(_: RequestUnsupportedContentType) -> Response[str]:
        return unsupported_media_type(app.current_event.headers.get("content-type", ""))

    @app.not_found
    def _no_route(_: Exception) -> Response[str]:
        event = app.current_event
        allowed = methods_of(app, event.path)
        if not allowed:
            return error_response(404, "no_route", f"no route {event.http_method} {event.path}")
        response = error_response(
            405, "method_not_allowed", f"method {event.http_method} is not allowed here; use {', '.join(allowed)}"
        )
        response.headers["Allow"] = ", ".join(allowed)
        return response


# Every error answer an operation can give, with its one body (the handlers map every domain error above, the
# entry point adds 413 and 415): declared once here for every operation, so that clients generated from the
# document type their error bodies too.
ERROR_RESPONSES = {
    "401": "Not signed, or an unknown callback token",
    "403": "The caller is not a member of the team (or not a platform admin)",
    "404": "No such job, run, backfill or route",
    "409": "A conflicting state: exists, in flight, superseded",
    "412": "If-Match does not name the job's current version",
    "413": "The body is larger than 256 KiB",
    "415": "The body is not JSON",
    "422": "The request is malformed: every problem with its field and what is allowed",
    "429": "Too many requests, or a team limit reached (Retry-After says when to retry)",
}


def declare_error_responses(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with ``ERROR_RESPONSES`` on every operation, each the ErrorResponse body."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    error_schema = ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(error_schema.pop("$defs", {}))
    schemas["ErrorResponse"] = error_schema
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.get("204", {}).pop("content", None)  # No Content: Powertools documents a null body
            for status, description in ERROR_RESPONSES.items():
                responses[status] = {"description": description, "content": body}
    return document


def methods_of(app: APIGatewayRestResolver, path: str) -> list[str]:
    """The methods some route serves at this path (the document's methods for it), for 405 and Allow."""
    # Powertools keeps its route table private; it is the one place that knows which method matches a path.
    routes = [*app._static_routes, *app._dynamic_routes]
    return sorted({route.method.upper() for route in routes if route.rule.match(path)})


def is_json_media_type(content_type: str) -> bool:
    """application/json or a +json type, with any parameters; no header at all counts as JSON."""
    media = content_type.split(";", 1)[0].strip().lower()
    return not media or media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def unsupported_media_type(content_type: str) -> Response[str]:
    given = content_type.split(";", 1)[0].strip() or "none"
    return error_response(
        415,
        "unsupported_media_type",
        f"request bodies are JSON: send Content-Type: application/json (got {given})",
        "Content-Type",
    )


def body_model(app: APIGatewayRestResolver) -> type[BaseModel] | None:
    """The request body model of the route being served, so that errors list that body's own fields."""
    route = app.context.get("_route")
    for param in getattr(getattr(route, "dependant", None), "body_params", []):
        for kind in (param.type_, *typing.get_args(param.type_)):  # TriggerRequest | None: an optional body
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                return kind
    return None


def _mapped(
    status: int, code: str, field: str | None, message: Callable[[Any], str]
) -> Callable[[Exception], Response[str]]:
    def handle(error: Exception) -> Response[str]:
        # An error that knows its request field (RerunUnsupported: tasks or from_failure) names it.
        return error_response(status, code, message(error), getattr(error, "field", None) or field)

    return handle


def detail(error: FieldError) -> ErrorDetail:
    return ErrorDetail(field=error.path, code=error.code, message=error.message)


def request_errors(errors: Any, model: type[BaseModel] | None) -> list[FieldError]:
    """Powertools' request validation errors in our form: the location prefix dropped, messages explained in
    terms of ``model`` (the route's body; the job spec where a route has none)."""
    stripped = []
    for detail in errors:
        location = tuple(detail.get("loc", ()))
        if location and location[0] in ("body", "query", "path", "header"):
            location = location[1:]
        stripped.append({**detail, "loc": location})
    return field_errors_from(stripped, model or JobBody)
