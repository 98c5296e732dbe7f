"""Metering: each executed attempt's usage (``core.usage``) added to its job's item of the day, the scheduler's
modelled share and what the target reported. One write an attempt; a failed write costs the attempt nothing (the
run is never worth less than its bill: the error is logged and counted, ``UsageUnrecorded``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from jobsched.core.records import RunContext, TargetResult
from jobsched.core.spec import JobSpec
from jobsched.core.usage import attempt_usage, dag_run_usage
from jobsched.pipeline.lifecycle import Change, StateChange
from jobsched.ports import JobsPort, UsagePort
from jobsched.watch.signals import emit

log = logging.getLogger(__name__)


@dataclass
class UsageMeter:
    store: UsagePort
    clock: Callable[[], datetime]

    def attempt(self, spec: JobSpec, target: Any, context: RunContext, result: TargetResult) -> None:
        """The attempt ``context`` executed ``target`` with ``result``: its usage, on the job's item of today (UTC)."""
        counters = attempt_usage(result.usage or {}, first_attempt=context.attempt == 1 and context.task is None)
        try:
            self.store.add_usage(
                spec.team,
                spec.key,
                self.clock().date(),
                counters,
                tier=spec.tier,
                target_type=str(getattr(target, "type", "")),
            )
        except Exception:
            log.exception("usage not recorded", extra={"job": spec.key, "team": spec.team, "run_id": context.run_id})
            emit("UsageUnrecorded", 1)


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
