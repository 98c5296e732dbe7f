"""Patches to moto for the tests and the local runtime; never in AWS.

- Where moto's Step Functions interpreter differs from AWS in a way DAG runs depend on, made to match.
  AWS issues a new task token for every attempt of a ``waitForTaskToken`` state, so a report to an old
  attempt's token cannot complete the retry. moto 5.2 keeps one token across Retry attempts, and the
  outcome reported for attempt 1 immediately completes attempt 2 as well. This gives each retry attempt a
  fresh token, as AWS does.
- Speed, for the local runtime's moto server (profiled with py-spy under 60 runs a minute): moto finds
  the backend of every request by matching its host against every service's URL patterns, one regex
  after another, under a lock; that was half of the server's CPU. The answer depends on the host alone,
  so it is remembered per host. Then SQS: every SendMessage computes the queue's attributes, which asks
  every message in the queue (runs sent ahead included) whether it is visible and delayed, each by
  converting "now" through naive datetimes; the clock is read with ``time.time()`` instead (the same
  value, without the conversions). And a long poll woke only when a message was sent, not when a delayed
  one became visible, so runs due at :00 were received up to a second late; it now looks every 0.1 s.
- A race in moto's SQS that AWS does not have: DeleteMessage rebuilds the queue's message list without
  the lock SendMessage appends under, so a message sent during a delete could vanish. Seen locally as
  runs never started (no record, nothing on the queue) once the dispatcher sent in parallel while
  workers deleted; DeleteMessage now takes the lock.
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


def backend_lookup_per_host() -> None:
    """Remember moto's host -> backend answer (a linear scan of every service's URL regexes)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.get_backend_for_host
    if getattr(original, "_remembered", False):
        return
    found: dict[str | None, Any] = {}

    @functools.wraps(original)
    def lookup(self: Any, host: str | None) -> Any:
        if host not in found:
            backend = original(self, host)
            if backend is None:
                return None  # not remembered: moto goes on to infer the service another way
            found[host] = backend
        return found[host]

    lookup._remembered = True  # type: ignore[attr-defined]
    DomainDispatcherApplication.get_backend_for_host = lookup  # type: ignore[method-assign]


def fast_sqs_clock() -> None:
    """moto's SQS reads "now" in milliseconds per message per request; read it directly."""
    import time

    from moto.sqs import models

    original = getattr(models, "unix_time_millis")  # noqa: B009 (not exported: mypy checks exports)

    def unix_time_millis(dt: Any = None) -> float:
        return time.time() * 1000.0 if dt is None else float(original(dt))

    setattr(models, "unix_time_millis", unix_time_millis)  # noqa: B010


def prompt_long_polls() -> None:
    """A long-polling ReceiveMessage notices delayed messages becoming visible within 0.1 s."""
    import time

    from moto.sqs.models import Queue

    def wait_for_messages(self: Any, timeout: int) -> None:
        deadline = time.monotonic() + timeout
        with self._messages_lock:
            while not self.messages and (left := deadline - time.monotonic()) > 0:
                self._messages_lock.wait(min(left, 0.1))

    Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]


def atomic_sqs_delete() -> None:
    """moto's Queue.delete_message under the queue's lock, as add_message already is."""
    from moto.sqs.models import Queue

    original = Queue.delete_message
    if getattr(original, "_locked", False):
        return

    @functools.wraps(original)
    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            original(self, receipt_handle)

    delete_message._locked = True  # type: ignore[attr-defined]
    Queue.delete_message = delete_message  # type: ignore[method-assign]


def serve() -> None:
    """``python -m infra.local.moto_patches -H HOST -p PORT``: moto's server with the patches applied."""
    fresh_task_token_per_attempt()
    backend_lookup_per_host()
    fast_sqs_clock()
    prompt_long_polls()
    atomic_sqs_delete()
    from moto.server import main

    main(sys.argv[1:])


if __name__ == "__main__":
    serve()
