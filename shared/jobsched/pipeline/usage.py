"""Metering: each executed attempt's usage (``core.usage``) added to its job's item of the day, the scheduler's
modelled share and what the target reported; a failed write costs the attempt nothing (the run is never worth less
than its bill: the error is logged and counted, ``UsageUnrecorded``).

A run's attempt in the worker is not written at once: its usage is held on the worker's thread until the write that
ends the run (or makes it retry), whose lifecycle subscriber (``slo_ledger``) adds it with the run's SLO counts in
one write (#51: one write a run's end instead of two). The worker writes whatever is still held when it is done
with the record (the attempt lost its race, or its container runs on), so nothing held is dropped but by a crash,
which loses an uncounted run's counts as it always could (never counted twice).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol

from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.slo import RunCount
from jobsched.core.spec import JobSpec
from jobsched.core.usage import attempt_usage, dag_run_usage
from jobsched.pipeline.lifecycle import Change, StateChange
from jobsched.ports import JobsPort, UsagePort
from jobsched.watch.signals import emit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeldUsage:
    """An attempt's usage waiting for its run's end to be written with it."""

    store: UsagePort
    team: str
    job: str
    run_id: str
    day: date
    counters: dict[str, float]
    tier: str
    target_type: str

    def write(self, *, count: RunCount | None = None, day: date | None = None) -> None:
        """Add the usage (and ``count``, a run's end: one write) to the job's item of ``day`` (the attempt's)."""
        self.store.add_usage(
            self.team,
            self.job,
            day or self.day,
            self.counters,
            tier=self.tier,
            target_type=self.target_type,
            count=count,
        )


_held = threading.local()  # a worker runs each record on one thread, its writes and their subscribers included


def hold(usage: HeldUsage) -> None:
    flush_held()  # one attempt at a time per thread: an earlier one not taken is written now
    _held.usage = usage


def take_held(job: str, run_id: str) -> HeldUsage | None:
    """The usage this thread holds for ``run_id`` of ``job``, taken (None: none held)."""
    held: HeldUsage | None = getattr(_held, "usage", None)
    if held is None or (held.job, held.run_id) != (job, run_id):
        return None
    _held.usage = None
    return held


def flush_held() -> None:
    """Write what this thread still holds (its run's end was not written by this record)."""
    held: HeldUsage | None = getattr(_held, "usage", None)
    _held.usage = None
    if held is not None:
        write_usage(held)


def write_usage(held: HeldUsage, *, count: RunCount | None = None, day: date | None = None) -> None:
    try:
        held.write(count=count, day=day)
    except Exception:
        log.exception("usage not recorded", extra={"job": held.job, "team": held.team, "run_id": held.run_id})
        emit("UsageUnrecorded", 1)
        if count is not None:
            raise  # the run's SLO count was in it: the ledger's write failed (``slo_ledger``)


@dataclass
class UsageMeter:
    store: UsagePort
    clock: Callable[[], datetime]
    hold_for_end: bool = False  # a run's attempt waits for its run's end write (the worker, which flushes)

    def attempt(self, spec: JobSpec, target: Any, context: RunContext, result: TargetResult) -> None:
        """The attempt ``context`` executed ``target`` with ``result``: its usage, on the job's item of today (UTC)."""
        counters = attempt_usage(result.usage or {}, first_attempt=context.attempt == 1 and context.task is None)
        usage = HeldUsage(
            self.store,
            spec.team,
            spec.key,
            context.run_id,
            self.clock().date(),
            counters,
            spec.tier,
            str(getattr(target, "type", "")),
        )
        if self.hold_for_end and context.task is None:
            hold(usage)
        else:
            write_usage(usage)


class UsageJobs(JobsPort, UsagePort, Protocol):
    """The jobs store as the DAG runs' metering uses it."""


@dataclass
class DagRunUsage:
    """A lifecycle subscriber: a DAG run's end adds the run and its state machine's transitions to its job's usage of
    the day (its tasks were metered as attempts)."""

    jobs: UsageJobs
    clock: Callable[[], datetime]

    def __call__(self, change: StateChange) -> None:
        run = change.run
        if change.change is not Change.FINISHED or run is None or not run.graph or change.task is not None:
            return
        stored = self.jobs.get(run.job, consistent=False)
        tier = stored.spec.tier if stored is not None else ""
        try:
            self.jobs.add_usage(run.team, run.job, self.clock().date(), dag_run_usage(len(run.graph)), tier=tier,
                                target_type="dag")  # fmt: skip
        except Exception:
            log.exception("usage not recorded", extra={"job": run.job, "team": run.team, "run_id": run.run_id})
            emit("UsageUnrecorded", 1)
