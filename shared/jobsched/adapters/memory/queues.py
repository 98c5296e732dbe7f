"""The work queues and the escalation queue in memory, on an injected clock.

A message becomes visible after its delay, rounded up to whole seconds and capped at 15 minutes as SQS
does (``delay_seconds``); receiving takes it off the queue (the caller acknowledges by not sending it back).
Requests are counted as SQS bills them: one per batch of up to ten sent or received.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.errors import QueueSendError
from jobsched.core.messages import WorkMessage
from jobsched.ports import delay_seconds


@dataclass(order=True)
class QueuedMessage:
    visible_at: datetime
    sequence: int
    message: WorkMessage = field(compare=False)
    sent_at: datetime = field(compare=False)


class MemoryWorkQueues:
    def __init__(self, clock: Callable[[], datetime], *, refuse: Callable[[WorkMessage], bool] | None = None) -> None:
        self.clock = clock
        self.refuse = refuse or (lambda message: False)  # fault injection: messages "not accepted"
        self.requests = 0
        self._queues: dict[str, list[QueuedMessage]] = defaultdict(list)
        self._sequence = itertools.count()
        self._lock = threading.Lock()

    def send(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> None:
        failed = self.send_each(priority, messages)
        if failed:
            raise QueueSendError(f"{len(failed)} messages not accepted by the {priority} queue")

    def send_each(self, priority: str, messages: Sequence[tuple[WorkMessage, timedelta]]) -> set[int]:
        now = self.clock()
        failed: set[int] = set()
        with self._lock:
            self.requests += math.ceil(len(messages) / 10)
            for index, (message, delay) in enumerate(messages):
                if self.refuse(message):
                    failed.add(index)
                    continue
                visible_at = now + timedelta(seconds=delay_seconds(delay))
                heapq.heappush(self._queues[priority], QueuedMessage(visible_at, next(self._sequence), message, now))
        return failed

    def receive(self, priority: str, *, limit: int = 10, now: datetime | None = None) -> list[QueuedMessage]:
        """Up to ``limit`` messages visible at ``now`` (the clock by default), oldest visibility first."""
        moment = now or self.clock()
        with self._lock:
            queue = self._queues[priority]
            taken: list[QueuedMessage] = []
            while queue and len(taken) < limit and queue[0].visible_at <= moment:
                taken.append(heapq.heappop(queue))
            self.requests += 1
            return taken

    def backlog(self, priority: str) -> int:
        """Messages visible now and not taken yet."""
        now = self.clock()
        with self._lock:
            return sum(1 for queued in self._queues[priority] if queued.visible_at <= now)

    def next_visible(self, priority: str) -> datetime | None:
        with self._lock:
            queue = self._queues[priority]
            return queue[0].visible_at if queue else None

    def depth(self, priority: str | None = None) -> int:
        with self._lock:
            if priority is not None:
                return len(self._queues[priority])
            return sum(len(queue) for queue in self._queues.values())


class MemoryEscalations:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def publish(self, event: dict[str, Any]) -> None:
        self.events.append(event)
