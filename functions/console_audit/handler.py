"""CloudTrail's records, through EventBridge: a console action's invocation -> the person named on the job's audit
entry; a change to a secret or an IAM role -> that resource's change history (a team's change history shows it)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.console.actions import confirm_identity
from jobsched.watch.observability import make_logger
from jobsched.watch.resource_changes import record_resource_change
from jobsched.wiring import console_audit_store

logger = make_logger("console-audit")
CHANGE_SOURCES = ("aws.secretsmanager", "aws.iam")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> None:
    if event.get("source") in CHANGE_SOURCES:
        change = record_resource_change(event, console_audit_store())
        if change is not None:
            logger.info(
                "resource change recorded",
                extra={"subject": change.subject, "action": change.action, "principal": change.principal},
            )
        return
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
