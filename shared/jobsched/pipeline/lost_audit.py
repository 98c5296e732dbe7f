"""Which sent instants of a job are lost: the audit's judgement, pure (the dispatcher reads and writes).

An instant the dispatcher sent has no run record some time after its fire time. It is lost (recorded MISSED,
paged) once either:
- ``lost_after`` (15 minutes) has passed: the workers are not that far behind, or the message is gone; or
- with a quick audit (its priority class's queues hold no backlog, at most ``QUIET_DEPTH`` messages visible),
  ``quick_after`` (4 minutes) has passed and the workers have already started a later instant of the same job
  that fired at least ``OVERTAKEN_BY`` after it: its message is not queued behind others, it was overtaken.
Under a deep backlog the quick audit is off, so an instant that is only queued is never recorded MISSED early.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.core.run_records import LOST_PREFIX
from jobsched.core.runs import instant_text, scheduled_run_id
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.schedule.engine import Occurrence

LOST_AFTER = timedelta(minutes=15)
QUICK_LOST_AFTER = timedelta(minutes=4)
QUIET_DEPTH = 100  # visible messages a class may hold and still count as no backlog (a poll takes them at once)
OVERTAKEN_BY = timedelta(minutes=2)  # a later instant this much younger started first: the earlier one is lost


@dataclass(frozen=True)
class AuditWait:
    lost_after: timedelta = LOST_AFTER
    quick_after: timedelta | None = None  # None: no backlog information, or a backlog: the long wait only


@dataclass(frozen=True)
class Judged:
    lost: list[Occurrence]
    audited_to: datetime | None  # the new audit mark (None: nothing settled)


def judge_lost(occurrences: Sequence[Occurrence], found: set[str], now: datetime, wait: AuditWait) -> Judged:
    """``occurrences``: the job's sent instants from its audit mark, oldest first, fired by ``now``; ``found``:
    the run ids among them (and later) that have a record. The mark moves over every settled instant and stops
    before the first one that may still be queued."""
    # The latest fire time among the instants that started: one pass, not one scan per unrecorded instant.
    latest_started = max((o.fire_at for o in occurrences if o.run_id in found), default=None)
    lost: list[Occurrence] = []
    mark: datetime | None = None
    settled_before: datetime | None = None  # the mark before the instant being settled (several schedules share one)
    for occurrence in occurrences:
        if mark is not None and occurrence.at > mark:
            settled_before = mark
        if occurrence.run_id in found:
            mark = occurrence.at
            continue
        waited = now - occurrence.fire_at
        overtaken = latest_started is not None and latest_started >= occurrence.fire_at + OVERTAKEN_BY
        quick = wait.quick_after is not None and waited >= wait.quick_after and overtaken
        if waited >= wait.lost_after or quick:
            lost.append(occurrence)
            mark = occurrence.at
            continue
        # May still be queued: judged at a later visit. The mark never covers an instant only partly settled
        # (another schedule's run of the same instant may be the one still queued).
        if mark == occurrence.at:
            mark = settled_before
        break
    return Judged(lost, mark)


def lost_reason(waited: str) -> str:
    """What a lost instant's MISSED record says (``waited``: how long after its fire time it was judged)."""
    return (
        f"{LOST_PREFIX}no run record {waited} after its fire time: the run message was lost (or the workers "
        "are that far behind; if it still arrives, the run starts)"
    )


def missed_event(job: str, team: str, missed: list[tuple[datetime, str]], now: datetime) -> EscalationEvent:
    first, last = missed[0][0], missed[-1][0]
    return EscalationEvent(
        kind="missed_schedule",
        subject=job,
        occurred_at=instant_text(now),
        team=team,
        job=job,
        run_id=scheduled_run_id(first),
        scheduled_at=instant_text(first),
        count=len(missed),
        lateness_seconds=round((now - first).total_seconds(), 3),
        error=f"{len(missed)} instant(s) {instant_text(first)}..{instant_text(last)} did not run: {missed[0][1]}",
    )
