"""API: API Gateway (REST, IAM auth) -> the team API. Services are built on first request."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.api.app import ApiServices, build_handler
from jobsched.core.settings import Settings
from jobsched.warm import warm
from jobsched.watch.observability import make_logger, make_tracer
from jobsched.wiring import build_api_services

logger = make_logger("api")
tracer = make_tracer("api")


@warm
def services() -> ApiServices:
    return build_api_services(Settings.from_env())


api = build_handler(services)


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return api(event, context)
