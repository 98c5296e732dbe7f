"""Metering: each executed attempt's usage (``core.usage``) added to its job's item of the day, the scheduler's
modelled share and what the target reported. One write an attempt; a failed write costs the attempt nothing (the
run is never worth less than its bill: the error is logged and counted, ``UsageUnrecorded``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobsched.core.records import RunContext, TargetResult
from jobsched.core.spec import JobSpec
from jobsched.core.usage import attempt_usage
from jobsched.ports import UsagePort
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
