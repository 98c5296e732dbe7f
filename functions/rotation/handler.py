"""Secret rotation: Secrets Manager calls this for each step of rotating the callback-signing secret."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.adapters.aws.clients import client
from jobsched.adapters.aws.rotation import rotate
from jobsched.watch.observability import make_logger

logger = make_logger("rotation")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> None:
    logger.info("rotation step", extra={"step": event["Step"], "secret": event["SecretId"]})
    rotate(client("secretsmanager"), event["SecretId"], event["ClientRequestToken"], event["Step"])
