"""Console audit: CloudTrail's record of a console action's invocation (EventBridge) -> the person named on
the job's audit entry."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.console.actions import confirm_identity
from jobsched.watch.observability import make_logger
from jobsched.wiring import console_audit_store

logger = make_logger("console-audit")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> None:
    confirmed = confirm_identity(event, console_audit_store())
    if confirmed is None:
        # The rule sends only Invoke records of the actions function: one that names nobody leaves its action
        # unconfirmed (the history flags it after an hour), so it is said loudly here.
        logger.warning("a console invocation named nobody on an audit entry", extra={"event_id": event.get("id")})
        return
    found, job = confirmed
    logger.info(
        "console action confirmed",
        extra={"job": job, "team": found.team, "request_id": found.request_id, "person": found.person},
    )
