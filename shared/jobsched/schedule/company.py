"""The company's calendars and maintenance windows as one value, and what they make of a job's schedule
(``core.spec.company`` defines them; the dispatcher, previews and paging read them through here)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from jobsched.core.errors import FieldError
from jobsched.core.spec import JobSpec, Schedule, StrictModel
from jobsched.core.spec.base import _fail
from jobsched.core.spec.company import CompanyCalendar, CompanyKind, MaintenanceWindow, ref
from jobsched.core.spec.schedule import CalendarPolicy
from jobsched.schedule.engine import window_open

# The reverse edges from a company entry to the jobs that name it hang from "COMPANY#company/NAME" (a job key never
# has '#'), beside the after-trigger edges (``registry.jobs``).
COMPANY_LINK = "COMPANY#"


def company_reference_error(company: CompanySettings, path: str, reference: str) -> FieldError:
    """A job names a company calendar or maintenance window that is not defined."""
    kind, defined = (
        ("calendar", company.calendars) if path.startswith("schedule") else ("maintenance window", company.windows)
    )
    return FieldError(
        path,
        "unknown_company_reference",
        f"no company {kind} {reference}; defined: {', '.join(sorted(defined)) or 'none'} (GET /company)",
    )


class CompanyEntries(Protocol):
    def company_entries(self) -> dict[str, dict[str, Any]]: ...


@dataclass(frozen=True)
class CompanySettings:
    """Every company calendar and maintenance window of a deployment, as one value (``version``: a digest of them,
    so a compiled schedule cached under it is recompiled when any of them changes)."""

    calendars: dict[str, CompanyCalendar] = field(default_factory=dict)  # by reference, company/NAME
    windows: dict[str, MaintenanceWindow] = field(default_factory=dict)
    version: str = ""

    @classmethod
    def of(cls, calendars: dict[str, CompanyCalendar], windows: dict[str, MaintenanceWindow]) -> CompanySettings:
        text = json.dumps(
            [
                sorted((k, v.model_dump(mode="json")) for k, v in calendars.items()),
                sorted((k, v.model_dump(mode="json")) for k, v in windows.items()),
            ],
            sort_keys=True,
        )
        return cls(dict(calendars), dict(windows), hashlib.sha256(text.encode()).hexdigest()[:16])

    @classmethod
    def read(cls, store: CompanyEntries) -> CompanySettings:
        """The deployment's, now (one query)."""
        return cls.from_entries(store.company_entries())

    @classmethod
    def from_entries(cls, entries: dict[str, dict[str, Any]]) -> CompanySettings:
        """From the stored entries (``ports.CompanyPort.company_entries``); validated as stored."""
        calendars, windows = {}, {}
        for key, document in entries.items():
            kind, _, reference = key.partition("#")
            if kind == "calendar":
                calendars[reference] = CompanyCalendar.model_validate(document)
            elif kind == "maintenance":
                windows[reference] = MaintenanceWindow.model_validate(document)
        return cls.of(calendars, windows)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> CompanySettings:
        """``{calendars: {NAME: {...}}, maintenance: {NAME: {...}}}`` (a file for the offline commands)."""
        unknown = sorted(set(document) - {"calendars", "maintenance"})
        if unknown:
            raise _fail("invalid_company_file", "unknown section(s) {names}", names=", ".join(unknown))
        return cls.of(
            {ref(name): CompanyCalendar.model_validate(v) for name, v in (document.get("calendars") or {}).items()},
            {ref(name): MaintenanceWindow.model_validate(v) for name, v in (document.get("maintenance") or {}).items()},
        )

    def with_entry(self, kind: CompanyKind, reference: str, entry: StrictModel | None) -> CompanySettings:
        """These settings with one entry replaced (None: removed)."""
        calendars, windows = dict(self.calendars), dict(self.windows)
        chosen: dict[str, Any] = calendars if kind == "calendar" else windows
        if entry is None:
            chosen.pop(reference, None)
        else:
            chosen[reference] = entry
        return CompanySettings.of(calendars, windows)

    def windows_of(self, spec: JobSpec) -> list[tuple[str, MaintenanceWindow]]:
        """The windows that apply to ``spec``: those it names and those whose selector matches it."""
        named = [(name, self.windows[name]) for name in spec.maintenance if name in self.windows]
        matched = [
            (name, window)
            for name, window in sorted(self.windows.items())
            if name not in spec.maintenance and window.applies_to is not None and window.applies_to.matches(spec)
        ]
        return named + matched

    def missing(self, spec: JobSpec) -> list[tuple[str, str]]:
        """(field path, reference) of each company entry ``spec`` names that is not defined."""
        found = []
        calendar = spec.schedule.company_calendar if spec.schedule is not None else None
        if calendar is not None and calendar not in self.calendars:
            found.append(("schedule.calendar", calendar))
        found += [(f"maintenance[{i}]", name) for i, name in enumerate(spec.maintenance) if name not in self.windows]
        return found

    def effective(self, spec: JobSpec) -> list[Schedule]:
        """The job's schedules (none, one, or several), each with the company calendar it names in place and the
        maintenance windows that apply to the job as blackouts (an undefined reference is no calendar: admission
        refuses it, and a deleted one stops excluding days)."""
        windows = [(name, window) for name, window in self.windows_of(spec) if window.action != "run"]
        return [self._resolved(schedule, windows) for schedule in spec.all_schedules()]

    def _resolved(self, schedule: Schedule, windows: list[tuple[str, MaintenanceWindow]]) -> Schedule:
        calendar = schedule.company_calendar
        if calendar is None and not windows:
            return schedule
        changes: dict[str, Any] = {"blackouts": [*schedule.blackouts, *(w.blackout(n) for n, w in windows)]}
        if calendar is not None:
            company = self.calendars.get(calendar)
            changes["calendar"] = (
                CalendarPolicy.model_validate(company.model_dump(exclude={"description"}) | {"name": calendar})
                if company is not None
                else None
            )
        return schedule.model_copy(update=changes)

    def holding_pages(self, spec: JobSpec, now: datetime) -> str | None:
        """The open window that holds ``spec``'s pages at ``now`` (its reference), if any."""
        for name, window in self.windows_of(spec):
            if window.suppress_pages and window_open(window.blackout(name), now):
                return name
        return None


NO_COMPANY = CompanySettings()
