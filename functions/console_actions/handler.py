"""Console actions: a ``<cwdb-action>`` button's call (through a team's alias) -> the action's HTML result."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.console.actions import handle_action, team_of_alias
from jobsched.watch.observability import make_logger
from jobsched.wiring import console_action_stores, utc_now

logger = make_logger("console-actions")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> str:
    result = handle_action(
        event,
        invoked_function_arn=context.invoked_function_arn,
        request_id=context.aws_request_id,
        stores=console_action_stores(),
        now=utc_now(),
    )
    fields = {
        "action": event.get("action"),
        "job": event.get("job"),
        "run_id": event.get("run_id"),
        "team": team_of_alias(context.invoked_function_arn),
    }
    logger.info(
        "console action", extra=fields | {"status": result.status, "ok": result.ok, "via": context.invoked_function_arn}
    )
    return result.html()
