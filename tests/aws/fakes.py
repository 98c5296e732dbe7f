"""Stand-ins the moto stack runs with: functions in-process, queues on a virtual clock, a webhook endpoint, and the
crash a test injects between two writes."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobsched.adapters.aws.queues import WorkQueues
from jobsched.core.messages import WorkMessage
from jobsched.core.run_records import Run, RunContext
from jobsched.core.runs import parse_instant
from jobsched.ports import delay_seconds
from tests.helpers import Clock as Clock  # re-exported: the moto tests take the stack and its clock from here


class Crash(BaseException):
    """Raised by crash-injection hooks: the process dies between two writes (a BaseException, so no
    error handling in the code under test can swallow it, as none could swallow a dead process)."""


class LambdaTimedOut(Exception):
    """Raised by a fake function: answered as Lambda answers a function that ran out of its time."""


@dataclass
class FakeLambdas:
    """In-process functions for Lambda targets (moto cannot run function code without Docker)."""

    functions: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, function: str, payload: bytes, timeout: timedelta) -> tuple[bytes, str | None]:
        name = function.rsplit(":", 1)[-1] if function.startswith("arn:") else function
        event = json.loads(payload)
        self.calls.append((name, event))
        handler = self.functions.get(name)
        if handler is None:
            return json.dumps({"errorMessage": f"Function not found: {name}"}).encode(), "Unhandled"
        try:
            return json.dumps(handler(event)).encode(), None
        except LambdaTimedOut:
            seconds = timeout.total_seconds()
            answer = {"errorType": "Sandbox.Timedout", "errorMessage": f"Task timed out after {seconds:.2f} seconds"}
            return json.dumps(answer).encode(), "Unhandled"
        except Exception as error:
            return json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)}).encode(), "Unhandled"

    def executions(self, name: str) -> list[tuple[str, str, int]]:
        """(job, run_id, attempt) of every invocation of ``name``."""
        return [
            (e["jobsched"]["job"], e["jobsched"]["run_id"], e["jobsched"]["attempt"])
            for n, e in self.calls
            if n == name
        ]


class VirtualDelayQueues(WorkQueues):
    """moto enforces DelaySeconds in real time; tests need virtual time. Messages go out with no delay
    (each carries its fire_at, and the pump holds it until then), and the delay SQS would have been asked
    for is recorded so tests can check it."""

    def __init__(self, queue_urls: dict[str, str], sqs: Any, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(queue_urls, sqs)
        self.requested_delays: list[tuple[str, int]] = []  # (run_id#attempt, DelaySeconds)
        self.clock = clock
        # A message re-sent to wait (a full slot, an open circuit) keeps its fire_at: the pump holds it until
        # the virtual time SQS would deliver it.
        self.not_before: dict[str, datetime] = {}

    def send_each(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> set[int]:
        for message, delay in messages:
            self.requested_delays.append((f"{message.run_id}#{message.attempt}", delay_seconds(delay)))
            if self.clock is not None:
                # Keyed by body: a copy sent now of a message also sent delayed (a run sent when its breaker
                # closed by hand) is due now; the delayed copy then comes as the duplicate it would be.
                self.not_before[message.model_dump_json(exclude_none=True)] = self.clock() + delay
        return super().send_each(priority, [(message, timedelta(0)) for message, _ in messages])


class InMemoryQueues(VirtualDelayQueues):
    """For tests that send thousands of messages: moto's ReceiveMessage scans every in-flight message, so
    the pump takes messages straight from here. SQS itself is exercised by the moto-backed tests."""

    def __init__(self, queue_urls: dict[str, str], sqs: Any, hold: dict[str, dict[str, dict[str, Any]]]) -> None:
        super().__init__(queue_urls, sqs)
        self.hold = hold
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def send_each(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> set[int]:
        with self._lock:
            for message, delay in messages:
                self.requested_delays.append((f"{message.run_id}#{message.attempt}", delay_seconds(delay)))
                message_id = f"mem-{next(self._ids)}"
                body = message.model_dump_json(exclude_none=True)
                if self.clock is not None:
                    self.not_before[body] = self.clock() + delay
                self.hold.setdefault(priority, {})[message_id] = {"MessageId": message_id, "Body": body}
        return set()


@dataclass
class RecordingHttp:
    """Webhook endpoint stand-in: records each POST; ``fail`` makes deliveries fail (HTTP 503)."""

    posts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    sent: list[tuple[dict[str, str], bytes]] = field(default_factory=list)  # each POST's headers and raw body
    fail: bool = False

    def request(
        self, method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None, **_: Any
    ) -> Any:
        if self.fail:
            return _Response(503)
        self.posts.append((url, json.loads(body or b"{}")))
        self.sent.append((dict(headers or {}), body or b""))
        return _Response(200)


@dataclass
class _Response:
    status: int
    data: bytes = b""


@dataclass
class FakeContext:
    function_name: str = "jobsched-test-worker"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-test-worker"
    aws_request_id: str = "req-1"


def run_context(run: Run) -> RunContext:
    """The context a target adapter gets for ``run``'s current attempt (to call an adapter again by hand)."""
    return RunContext(
        job=run.job,
        team=run.team,
        run_id=run.run_id,
        attempt=run.attempt,
        scheduled_at=run.scheduled_at.isoformat(),
        correlation_id=run.correlation_id,
    )


def at(text: str) -> datetime:
    return parse_instant(text)
