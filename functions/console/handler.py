"""Console: a CloudWatch dashboard custom widget -> the view's HTML (read-only on the tables)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.console.widget import render_widget, viewer_of
from jobsched.watch.observability import make_logger
from jobsched.wiring import console_controls, console_platform, console_stores, utc_now

logger = make_logger("console")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> str:
    jobs, runs = console_stores()
    params = (event.get("widgetContext") or {}).get("params") or {}
    viewer = viewer_of(context.invoked_function_arn)
    logger.info(
        "widget",
        extra={
            "view": params.get("view"),
            "team": params.get("team"),
            "job": params.get("job"),
            "viewer": (viewer.team or "oncall") if viewer else None,
        },
    )
    return render_widget(event, jobs, runs, utc_now(), console_controls(), viewer=viewer, platform=console_platform())
