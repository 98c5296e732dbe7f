"""The team API: a Powertools REST resolver with validation, one router per resource (``api.routes``),
one error mapping (``api.errors``), one access check (``api.access``).

Every error is ``{"error": {"code", "message", "field", "errors": [...]}}`` with a 4xx status for
anything a client sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types

from jobsched.api.access import Access, ApiServices
from jobsched.api.errors import (
    declare_error_responses,
    error_response,
    is_json_media_type,
    register_error_handlers,
    unsupported_media_type,
)
from jobsched.api.routes import (
    admin,
    approvals,
    backfills,
    breakers,
    callbacks,
    company,
    cost,
    dead_letters,
    dependencies,
    drills,
    explain,
    health,
    history,
    incidents,
    jobs,
    logs,
    run_events,
    runs,
    schedule,
    slo,
    stops,
    validation,
)
from jobsched.core.bounds import MAX_JSON_DEPTH, json_depth_exceeds, quoted
from jobsched.core.logs import RUN_ID
from jobsched.core.spec import NAME

MAX_BODY_BYTES = 256 * 1024

__all__ = ["ApiServices", "build_app", "build_handler"]


def build_app(services: Callable[[], ApiServices]) -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(enable_validation=True)
    register_error_handlers(app)
    access = Access(services, lambda: app.current_event.raw_event)

    @app.get("/health", operation_id="getServiceHealth", tags=["service"], summary="The API answers")
    def health_check() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/openapi.json", operation_id="getOpenApi", tags=["service"], summary="This document")
    def openapi() -> Response[dict[str, Any]]:
        # An object, declared as one (a string body declared the document a string: a schema check caught it).
        return Response(200, content_types.APPLICATION_JSON, json.loads(openapi_document(app)))

    for module in (
        validation,
        jobs,
        schedule,
        history,
        dependencies,
        health,
        runs,
        approvals,
        run_events,
        logs,
        backfills,
        callbacks,
        admin,
        breakers,
        explain,
        incidents,
        slo,
        drills,
        stops,
        dead_letters,
        company,
        cost,
    ):
        app.include_router(module.router(access))
    return app


def openapi_document(app: APIGatewayRestResolver) -> str:
    """/openapi.json: Powertools' document of the routes, with the error answers every operation can give."""
    document = json.loads(app.get_openapi_json_schema(title="jobsched", version="1"))
    return json.dumps(declare_error_responses(_optional_bodies(_path_patterns(document))))


def _path_patterns(document: dict[str, Any]) -> dict[str, Any]:
    """Each path identifier with the pattern ``path_refusal`` holds it to, so the document says what is refused."""
    patterns = dict(_PATH_IDENTIFIERS.values())
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                pattern = patterns.get(parameter.get("name")) if parameter.get("in") == "path" else None
                if pattern is not None:
                    parameter.setdefault("schema", {})["pattern"] = pattern.pattern
    return document


def _optional_bodies(document: dict[str, Any]) -> dict[str, Any]:
    """A body a route may omit (``RerunRequest | None``) as OpenAPI says it: not required, one model.

    Powertools documents it as a required ``anyOf [model, null]``; a generated client then sends its "unset"
    marker as the JSON body and fails before the request leaves."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            media = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            choices = media.get("schema", {}).get("anyOf", [])
            if len(choices) == 2 and {"type": "null"} in choices:
                [model] = [choice for choice in choices if choice != {"type": "null"}]
                media["schema"] = model
                operation["requestBody"]["required"] = False
    return document


def build_handler(services: Callable[[], ApiServices]) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The API entry point: limits before routing (Powertools validates bodies before any middleware)."""
    app = build_app(services)

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        body = event.get("body") or ""
        if len(body.encode()) > MAX_BODY_BYTES:
            return _proxy_result(
                error_response(413, "body_too_large", f"request bodies are limited to {MAX_BODY_BYTES} bytes")
            )
        # Every body is JSON: one error path for any other media type, before Powertools parses forms or
        # multipart (whose parser raised on a body without its boundary).
        content_type = next((v for k, v in (event.get("headers") or {}).items() if k.lower() == "content-type"), "")
        if body and not is_json_media_type(content_type or ""):
            return _proxy_result(unsupported_media_type(content_type))
        refused = path_refusal(event.get("path") or "")
        if refused is not None:  # an identifier no store could hold (DynamoDB keys are at most 2 KB)
            return _proxy_result(error_response(422, "invalid_path", refused[1], refused[0]))
        if json_depth_exceeds(body):  # before any recursive parser meets it
            return _proxy_result(
                error_response(422, "body_too_deep", f"JSON nests at most {MAX_JSON_DEPTH} deep", "body")
            )
        return app.resolve(event, context)

    handle.app = app  # type: ignore[attr-defined]
    return handle


# A backfill id is the instant it started and a random part (pipeline.manual_runs): 2027-01-04T08:59:00Z-22cb257c.
# Bounded in length and characters only, so an id of the right shape that names nothing is still a 404.
_BACKFILL_ID = re.compile(r"^[A-Za-z0-9:._-]{1,100}$")
# The identifiers in a path: the segment before each, its field, and what it must look like.
_PATH_IDENTIFIERS = {
    "teams": ("team", NAME),
    "jobs": ("name", NAME),
    "runs": ("run_id", RUN_ID),
    "backfills": ("backfill_id", _BACKFILL_ID),
}


def path_refusal(path: str) -> tuple[str, str] | None:
    """(field, why) for a path whose team, job name, run or backfill id is not one; None when all are."""
    segments = [unquote(segment) for segment in path.strip("/").split("/")]
    for position in range(len(segments) - 1):
        kind = _PATH_IDENTIFIERS.get(segments[position])
        if kind is None:
            continue
        field, pattern = kind
        value = segments[position + 1]
        if not pattern.fullmatch(value):
            return field, f"{field} {quoted(value)} is not one: {pattern.pattern}"
    return None


def _proxy_result(refused: Response[str]) -> dict[str, Any]:
    """An error answered before routing, as the proxy integration's result."""
    return {"statusCode": refused.status_code, "headers": {"Content-Type": "application/json"}, "body": refused.body}
