"""What the platform team defines once for every team: company calendars (holidays, business days, freezes) and
maintenance windows, which jobs name as ``company/NAME`` (``schedule.calendar``, ``maintenance``).

A maintenance window applies to the jobs that opt in (``maintenance: [company/NAME]``) and to those its selector
matches (teams, tags, target types); while it is open their instants are skipped, deferred to its end (as a job's
own blackout would) or run as usual, and their pages are held (recorded on the incident, not sent).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, model_validator

from jobsched.core.durations import Duration
from jobsched.core.spec.base import Name, StrictModel, _bounded
from jobsched.core.spec.job import JobSpec
from jobsched.core.spec.schedule import COMPANY_PREFIX, Blackout, CalendarPolicy

MAX_CALENDARS = 100
MAX_WINDOWS = 100
CompanyKind = Literal["calendar", "maintenance"]


class CompanyCalendar(CalendarPolicy):
    """A named calendar jobs share: ``calendar: company/NAME``."""

    description: str = Field(default="", max_length=500)


class WindowSelector(StrictModel):
    """Jobs a window applies to without opting in: of these teams, with these tags, calling these target types."""

    teams: list[Name] = Field(min_length=1, max_length=50)
    tags: dict[str, str] = Field(default_factory=dict, max_length=10)
    target_types: list[str] = Field(default_factory=list, max_length=20)

    def matches(self, spec: JobSpec) -> bool:
        if spec.team not in self.teams or any(spec.tags.get(k) != v for k, v in self.tags.items()):
            return False
        kinds = {getattr(target, "type", "") for _, target in spec.targets()}
        return not self.target_types or bool(kinds & set(self.target_types))


class MaintenanceWindow(StrictModel):
    """A named window (recurring: cron + duration in its zone; or one start-end) in which the jobs it applies to do
    not start runs (skip, or defer to its end) and their pages are held."""

    description: str = Field(default="", max_length=500)
    cron: str | None = None
    duration: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] | None = None
    timezone: str = "UTC"
    start: AwareDatetime | None = None
    end: AwareDatetime | None = None
    action: Literal["skip", "defer", "run"] = Field(
        default="defer",
        description="the instants in it: skipped, deferred to its end, or run as usual (pages held all the same)",
    )
    suppress_pages: bool = True
    applies_to: WindowSelector | None = None

    @model_validator(mode="after")
    def _as_blackout(self) -> MaintenanceWindow:
        self.blackout("check")  # the same forms and bounds as a job's blackout
        return self

    def blackout(self, name: str) -> Blackout:
        return Blackout(
            cron=self.cron,
            duration=self.duration,
            start=self.start,
            end=self.end,
            action="skip" if self.action == "run" else self.action,  # "run": only whether it is open counts
            timezone=self.timezone,
            name=f"maintenance {name}",
        )


def ref(name: str) -> str:
    """``company/NAME`` for a bare name (a name given with the prefix is kept)."""
    return name if name.startswith(COMPANY_PREFIX) else COMPANY_PREFIX + name
