"""The dead-letter queues in memory: the same answers as ``aws.dead_letters`` (the contract suite runs both)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobsched.ports import DeadLetter


class MemoryDeadLetters:
    def __init__(self, queues: Sequence[str], clock: Callable[[], datetime]) -> None:
        self.clock = clock
        self.messages: dict[str, dict[str, tuple[str, int]]] = {queue: {} for queue in queues}  # id -> (body, receives)
        self.hidden: dict[str, datetime] = {}  # id -> visible again at
        self._receipts = itertools.count()

    def put(self, queue: str, body: str) -> str:
        message_id = uuid.uuid4().hex
        self.messages[queue][message_id] = (body, 0)
        return message_id

    def names(self) -> tuple[str, ...]:
        return tuple(self.messages)

    def count(self, queue: str) -> int:
        return len(self.messages[queue])

    def receive(self, queue: str, *, max_messages: int, hold: timedelta) -> list[DeadLetter]:
        now = self.clock()
        found: list[DeadLetter] = []
        for message_id, (body, receives) in list(self.messages[queue].items()):
            if len(found) == min(max_messages, 10):
                break
            if self.hidden.get(message_id, now) > now:
                continue
            self.messages[queue][message_id] = (body, receives + 1)
            if hold > timedelta(0):
                self.hidden[message_id] = now + hold
            found.append(DeadLetter(message_id, f"{message_id}:{next(self._receipts)}", body, receives + 1))
        return found

    def delete(self, queue: str, letters: Sequence[DeadLetter]) -> None:
        for letter in letters:
            self.messages[queue].pop(letter.message_id, None)

    def release(self, queue: str, letters: Sequence[DeadLetter]) -> None:
        for letter in letters:
            self.hidden.pop(letter.message_id, None)
