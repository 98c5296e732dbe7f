"""Validation: a job document checked as ``PUT`` would check it, and its next fire times, nothing stored."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.errors import detail
from jobsched.api.models import ValidationResult
from jobsched.api.views import next_fires
from jobsched.core.errors import SpecError
from jobsched.registry.jobfile import validate_document
from jobsched.tenancy.admission import schedule_cost_errors


def router(access: Access) -> APIGatewayRouter:
    router = APIGatewayRouter()
    services, principal = access.services, access.principal

    @router.post(
        "/validate",
        operation_id="validateJob",
        tags=["validation"],
        summary="Check a job document as PUT would, without storing it",
    )
    def validate(body: Annotated[dict[str, Any], Body()]) -> ValidationResult:
        principal()
        try:
            spec = validate_document(body)
        except SpecError as error:
            return ValidationResult(valid=False, errors=[detail(e) for e in error.errors])
        too_expensive = schedule_cost_errors(spec, services().clock())
        if too_expensive:
            return ValidationResult(valid=False, errors=[detail(e) for e in too_expensive])
        return ValidationResult(valid=True, next_fire_times=next_fires(spec, services().clock(), 5))

    return router
