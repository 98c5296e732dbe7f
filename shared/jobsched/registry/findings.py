"""What ``jobsched lint`` reports (a finding: a stable rule id, a severity, the file and the field, the fix), and a
job file as the checks read it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from jobsched.core.spec import JobSpec
from jobsched.schedule.engine import CompiledSchedule

Severity = Literal["error", "warning"]
INTERVAL_SAMPLE = 200  # consecutive fires looked at for a job's shortest interval


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    file: str
    path: str
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v != ""}


@dataclass
class LintedJob:
    file: str
    spec: JobSpec
    document: dict[str, Any]
    compiled: CompiledSchedule | None = None
    fires: list[datetime] = field(default_factory=list)  # the next INTERVAL_SAMPLE fires


def shortest_interval(fires: list[datetime]) -> timedelta | None:
    gaps = [later - earlier for earlier, later in itertools.pairwise(fires)]
    return min(gaps) if gaps else None
