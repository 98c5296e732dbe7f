"""The dead-letter queues, worked by people: what sits in each (per team, where the message names one) and its
redrive back to where it came from (``jobsched dlq list|redrive``).

A work queue's dead letter is a run, DAG task or callback message: it is sent again through the work queues (the
run's own queue of its class, as the dispatcher would), where the worker's fencing decides as for any redelivery:
a run that ended meanwhile is not run again. An escalation's is an event: published again to the escalation queue,
where a seen event id changes nothing. A message is taken off the dead-letter queue only after it was sent again
(a crash between leaves it there: sent twice at worst, which both paths absorb).

Bounded: a listing reads at most ``MAX_READ`` messages of a queue (SQS has no peek: each is received and made
visible again at once), a redrive moves at most ``MAX_REDRIVE``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from jobsched.core.messages import parse_work_message
from jobsched.core.names import PRIORITIES
from jobsched.ports import DeadLetter, DeadLettersPort, EscalationsPort, WorkQueuesPort

MAX_READ = 100
MAX_REDRIVE = 500
HOLD = timedelta(seconds=60)  # a message being redriven is out of sight this long (sent again well within)
WORK_PREFIX = "work-"
ESCALATIONS = "escalations"
QUEUES = (*(f"{WORK_PREFIX}{priority}" for priority in PRIORITIES), ESCALATIONS)


class UnknownQueue(ValueError):
    pass


def team_of(body: str) -> str | None:
    """The team a message names (``team``, or the owner of its ``job``); None for one that names none."""
    try:
        values = json.loads(body)
    except ValueError:
        return None
    if not isinstance(values, dict):
        return None
    if isinstance(values.get("team"), str):
        return str(values["team"])
    job = values.get("job")
    return job.split("/", 1)[0] if isinstance(job, str) and "/" in job else None


@dataclass
class QueueLetters:
    queue: str
    approximate: int  # SQS's count
    read: int = 0  # messages looked at (at most MAX_READ)
    by_team: Counter[str] = field(default_factory=Counter)  # of those read ("" for none named)
    samples: list[dict[str, Any]] = field(default_factory=list)  # a few, for the person deciding


@dataclass
class Redriven:
    queue: str
    moved: int = 0
    left: int = 0  # another team's, one naming none (only an admin moves those), or one that is not a message


@dataclass
class DeadLetters:
    letters: DeadLettersPort
    queues: WorkQueuesPort
    escalations: EscalationsPort

    def listing(self, *, team: str | None, samples: int = 5) -> list[QueueLetters]:
        """Each queue's dead letters; ``team``: only that team's are counted and shown (None: all, an admin)."""
        found = []
        for queue in (name for name in QUEUES if name in self.letters.names()):
            letters = self._peek(queue)
            listed = QueueLetters(queue, self.letters.count(queue), read=len(letters))
            for letter in letters:
                owner = team_of(letter.body) or ""
                if team is not None and owner != team:
                    continue
                listed.by_team[owner] += 1
                if len(listed.samples) < samples:
                    listed.samples.append(
                        {"id": letter.message_id, "team": owner, "receives": letter.receives, "body": letter.body[:500]}
                    )
            found.append(listed)
        return found

    def redrive(self, queue: str, *, team: str | None, limit: int = MAX_REDRIVE) -> Redriven:
        """Send ``team``'s dead letters of ``queue`` (None: every one) back to where they came from."""
        if queue not in QUEUES or queue not in self.letters.names():
            raise UnknownQueue(f"no dead-letter queue {queue}; there are {', '.join(self.letters.names())}")
        done = Redriven(queue)
        seen: set[str] = set()
        while done.moved < limit:
            batch = self.letters.receive(queue, max_messages=min(10, limit - done.moved), hold=HOLD)
            fresh = [letter for letter in batch if letter.message_id not in seen]
            self.letters.release(queue, [letter for letter in batch if letter not in fresh])  # judged: visible again
            if not fresh:
                break
            seen.update(letter.message_id for letter in fresh)
            keep = [letter for letter in fresh if team is not None and team_of(letter.body) != team]
            move = []
            for letter in fresh:
                if letter in keep:
                    continue
                try:
                    self._send_again(queue, letter.body)
                except (ValueError, TypeError):  # not a message of that queue's (pydantic's errors are ValueErrors)
                    keep.append(letter)
                    continue
                move.append(letter)
            self.letters.delete(queue, move)
            self.letters.release(queue, keep)
            done.moved += len(move)
            done.left += len(keep)
        return done

    def _send_again(self, queue: str, body: str) -> None:
        if queue == ESCALATIONS:
            self.escalations.publish(json.loads(body))
            return
        message = parse_work_message(body)
        self.queues.send(queue.removeprefix(WORK_PREFIX), [(message, timedelta(0))])  # type: ignore[list-item]

    def _peek(self, queue: str) -> list[DeadLetter]:
        seen: dict[str, DeadLetter] = {}
        for _ in range(MAX_READ // 10):
            batch = self.letters.receive(queue, max_messages=10, hold=timedelta(0))
            new = [letter for letter in batch if letter.message_id not in seen]
            if not new:
                break
            seen.update((letter.message_id, letter) for letter in new)
        return list(seen.values())[:MAX_READ]
