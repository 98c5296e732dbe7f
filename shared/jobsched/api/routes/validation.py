"""Validation: a job document checked as ``PUT`` would check it, and its next fire times, nothing stored; and the
organisation's policy that ``PUT`` enforces."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from jobsched.api.access import Access
from jobsched.api.errors import detail
from jobsched.api.models import ValidationResult
from jobsched.api.views import next_fires
from jobsched.core.errors import SpecError
from jobsched.planning.forecast import forecast
from jobsched.registry.jobfile import validate_document
from jobsched.registry.policy import OrgPolicy
from jobsched.registry.policy import admission_errors as policy_errors
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
        now, company = services().clock(), services().company()
        refused = schedule_cost_errors(spec, now, company) or policy_errors(
            body, spec, services().policy, now=now, company=company
        )
        if refused:
            return ValidationResult(valid=False, errors=[detail(e) for e in refused])
        expected = forecast(spec, now=now, company=company, prices=services().prices)
        return ValidationResult(
            valid=True,
            next_fire_times=next_fires(spec, now, 5, company),
            runs_per_month=expected.runs_per_month,
            usd_per_month=round(expected.usd_per_month, 4),
        )

    @router.get(
        "/policy",
        operation_id="getPolicy",
        tags=["validation"],
        summary="The organisation's policy for jobs, enforced at PUT (the file jobsched lint --policy reads)",
    )
    def get_policy() -> OrgPolicy:
        principal()
        return services().policy

    return router
