"""Secret rotation: Secrets Manager calls this for each step of rotating the callback-signing secret."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.watch.observability import make_logger
from jobsched.wiring import rotate_callback_secret

logger = make_logger("rotation")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> None:
    logger.info("rotation step", extra={"step": event["Step"], "secret": event["SecretId"]})
    rotate_callback_secret(event["SecretId"], event["ClientRequestToken"], event["Step"])
