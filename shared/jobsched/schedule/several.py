"""A job's several schedules as one stream of instants (``JobSpec.schedules``: the EU close and the US close of one
job, each in its own zone, with its own payload). Pure.

Each schedule is compiled on its own (its zone, DST, calendar, blackouts, jitter) and the streams are merged in time
order; each occurrence says which schedule named it. Two schedules naming one instant make one run (the first
schedule's, in the job's order) unless a schedule says ``distinct: true``: its runs are then its own, their id the
instant and its name (``Occurrence.run_id``), so exactly one run exists per (job, schedule, instant) however often it
is reached. The job's catch-up is its first schedule's: the dispatcher keeps one cursor for the job.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

from jobsched.schedule.engine import CompiledSchedule, Occurrence


class SeveralSchedules(CompiledSchedule):
    """The merged stream of ``parts`` (each a compiled schedule of the job, in the job's order)."""

    def __init__(self, parts: list[CompiledSchedule]) -> None:
        first = parts[0]
        super().__init__(first.schedule, hash_key=first.hash_key, anchor=first.anchor, step_limit=first.step_limit)
        self.parts = parts

    def zone_of(self, occurrence: Occurrence) -> ZoneInfo:
        return next((part.zone for part in self.parts if part.schedule.name == occurrence.schedule), self.zone)

    def describe(self) -> str:
        return "; ".join(f"{part.schedule.name}: {part.describe()}" for part in self.parts)

    def irregular_spans(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]] | None:
        return None  # each part has spans of its own: a view steps the merged stream

    def occurrences(self, after: datetime, *, until: datetime | None = None) -> Iterator[Occurrence]:
        streams = [_named(part, after, until) for part in self.parts]
        shared_at: datetime | None = None
        shared_by: str | None = None  # the schedule whose run an instant shared by others is
        for occurrence in heapq.merge(*streams, key=lambda o: o.at):  # equal instants keep the job's order
            if not occurrence.fires or occurrence.distinct:
                yield occurrence
                continue
            if occurrence.at == shared_at:
                yield occurrence.skipped(f"the same instant as schedule {shared_by}: one run (distinct: false)")
                continue
            shared_at, shared_by = occurrence.at, occurrence.schedule
            yield occurrence


def _named(part: CompiledSchedule, after: datetime, until: datetime | None) -> Iterator[Occurrence]:
    name, distinct = part.schedule.name, part.schedule.distinct
    for occurrence in part.occurrences(after, until=until):
        yield replace(occurrence, schedule=name, distinct=distinct)
