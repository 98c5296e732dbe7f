"""The timing wheel (#51): where a sparse job waits for its next visit without its key moving.

On the due index a job's key is its next visit, so every visit moves it: two index writes a run for an hourly job,
as much as the run's own claim and result. An hourly job (and one every few hours) is visited at the same minute of
each hour, so it waits on the wheel instead: a keys-only index keyed by its due shard and that minute
(``names.wheel_slot``), written once when it arrives and never again while its minute stays. Each tick reads the
slots of the minutes since the last tick's, reads the jobs found there, and plans those due; the others
(a job every two hours, in its off hour) wait for their turn at a read's cost.

What makes it safe:
- a job goes on the wheel only for a visit beyond this tick's window and at most ``WHEEL_REACH`` ahead, so the
  minute it waits on is scanned after it is placed there (a daily job stays on the due index: 24 reads a run on the
  wheel would cost more than the two index writes);
- each shard's scan goes on from its mark (``JobsPort.wheel_marks``), over every minute since (all sixty after an
  outage of an hour or more); a shard's first mark is written before any job can be placed on its wheel; the mark
  moves only past minutes whose due jobs were all advanced: a job left over by
  an error, the tick's budget or a lost race holds its shard's mark at its minute, so the next tick reads it again;
- marks move conditionally on what was read (two ticks at once: one of them moves them);
- a job's state is read eventually consistently: a stale one plans from a stale cursor, whose conditional advance
  fails, which holds the mark like an error (what it sent again, the worker drops as duplicates);
- a job waits on the slot of the shard it was placed by, whatever the shard count later (``due_shards`` only grows);
  a job placed on a shard whose dispatcher part has not read its wheel yet (the count grew, that part is down) waits
  for its minute's next turn at worst;
- a pause, a change or a resume puts the job back on the due index (``JobsTable._state_update``), and recovery's
  rewind too (``advance`` without a slot): everything but the dispatcher's own visit uses the due index as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.core.names import JobsKeys, wheel_slot
from jobsched.core.records import DueEntry, due_shard
from jobsched.ports import JobsPort

WHEEL_REACH = timedelta(hours=3)  # a visit further ahead waits on the due index (its minute would be read in vain)
MINUTE = timedelta(minutes=1)
HOUR_OF_MINUTES = 60
SCAN_CONCURRENCY = 16  # slot queries of one scan in flight at once (I/O bound)


def minute_of(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def slot_for(job: str, next_visit: datetime | None, *, sparse: bool, now: datetime, until: datetime) -> str | None:
    """The wheel slot a sparse job waits on for ``next_visit`` (None: the due index). ``until``: how far this tick
    reads (a visit within it must be on the due index, which the next tick reads whatever the marks say)."""
    if not sparse or next_visit is None or next_visit < minute_of(until) + 2 * MINUTE:
        return None
    if next_visit - now > WHEEL_REACH:
        return None
    return wheel_slot(due_shard(job), next_visit.minute)


@dataclass(frozen=True)
class WheelScan:
    read: dict[int, datetime]  # the scanned shards' marks as read
    through: datetime  # every scanned shard's slots were read through this minute
    shards: tuple[int, ...]
    entries: list[DueEntry]  # the jobs found whose visit is due
    found_on: dict[str, int]  # job -> the shard whose slot it was found on (its slot's, whatever the shard count now)

    def marks(self, advanced: set[str]) -> dict[int, datetime]:
        """The marks to write: ``through``, or before the first minute of a due job not advanced on its shard."""
        held: dict[int, datetime] = {}
        for entry in self.entries:
            if entry.job not in advanced:
                shard = self.found_on[entry.job]
                before = minute_of(entry.next_visit_at) - MINUTE
                held[shard] = min(held.get(shard, before), before)
        # A hold never moves a mark back (every scanned shard has a mark read: ``_marks``).
        return {shard: max(min(self.through, held.get(shard, self.through)), self.read[shard]) for shard in self.shards}


def scan(jobs: JobsPort, shards: Iterable[int], until: datetime) -> WheelScan:
    """The wheel's slots of ``shards`` from their marks through ``until``'s minute, and the due jobs on them."""
    shards = tuple(shards)
    through = minute_of(until)
    read = _marks(jobs, shards, through)
    slots: dict[str, int] = {}
    for shard in shards:
        first = read[shard] + MINUTE
        count = min(HOUR_OF_MINUTES, max(0, int((through - first) / MINUTE) + 1))
        slots |= {wheel_slot(shard, (first + step * MINUTE).minute): shard for step in range(count)}
    # One query a slot: eight a tick, sixty times that after an outage, so they run at once as the due index's do.
    ordered = sorted(slots)
    with ThreadPoolExecutor(max_workers=min(len(ordered), SCAN_CONCURRENCY) or 1) as pool:
        listed = pool.map(jobs.wheel, ordered)
        found_on = {job: slots[slot] for slot, found in zip(ordered, listed, strict=True) for job in found}
    states = jobs.due_states(sorted(found_on)) if found_on else []
    entries = [entry for entry in states if entry.sk == JobsKeys.STATE and entry.next_visit_at <= until]
    return WheelScan(read, through, shards, entries, found_on)


def _marks(jobs: JobsPort, shards: tuple[int, ...], through: datetime) -> dict[int, datetime]:
    """The shards' marks; a shard never read gets its first mark now, before any job can be placed on its wheel
    (a job goes there only from a tick that has read its mark), so there is nothing before it to read."""
    read = jobs.wheel_marks()
    missing = [shard for shard in shards if shard not in read]
    if missing and not jobs.mark_wheel({shard: through - MINUTE for shard in missing}, read={}):
        read = jobs.wheel_marks()  # another tick wrote them first
    return {shard: read.get(shard, through - MINUTE) for shard in shards}
