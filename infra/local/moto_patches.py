"""Where moto's Step Functions interpreter differs from AWS in a way DAG runs depend on, made to match.

AWS issues a new task token for every attempt of a ``waitForTaskToken`` state, so a report to an old
attempt's token cannot complete the retry. moto 5.2 keeps one token across Retry attempts, and the
outcome reported for attempt 1 immediately completes attempt 2 as well. This gives each retry attempt a
fresh token, as AWS does. Applied by the tests and the local runtime's moto server; never in AWS.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

_applied = False


def fresh_task_token_per_attempt() -> None:
    global _applied
    if _applied:
        return
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )

    original = ExecutionState._evaluate_with_timeout

    @functools.wraps(original)
    def evaluate(self: Any, env: Any) -> None:
        context = env.states.context_object.context_object_data
        waits_for_token = (
            isinstance(self, StateTaskServiceCallback)
            and getattr(self.resource, "condition", None) == ResourceCondition.WaitForTaskToken
        )
        if waits_for_token and context.get("State", {}).get("RetryCount", 0) > 0:
            env.callback_pool_manager.add(env.states.context_object.update_task_token())
        original(self, env)

    ExecutionState._evaluate_with_timeout = evaluate  # type: ignore[method-assign]
    _applied = True


def serve() -> None:
    """``python -m infra.local.moto_patches -H HOST -p PORT``: moto's server with the patches applied."""
    fresh_task_token_per_attempt()
    from moto.server import main

    main(sys.argv[1:])


if __name__ == "__main__":
    serve()
