"""Team limits: what one team may hold of a shared deployment, with the platform's defaults."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class TeamLimits:
    # Runs of the team running at once, across its jobs and priority classes. One team's hung target can
    # then hold at most this many worker invocations of a class (see WORK_QUEUES' max_concurrency).
    max_running: int = 20
    max_jobs: int = 1000  # jobs a team may register
    max_backfills: int = 5  # backfills running at once (and always at most one per job)
    requests_per_minute: int = 600  # API requests per principal, and per team on team routes
    max_bus_rules: int = 50  # rules on each bus every team shares (EventBridge allows 300 a bus)
    # Events of the team one intake process handles a minute (beyond, dropped before any store work and
    # counted): a storm of one team's events costs the shared intake little, and others' events wait behind
    # little. At most INTAKE_CONCURRENCY processes run, so the deployment's bound is that many times this.
    max_events_per_minute: int = 600

    @classmethod
    def parse(cls, text: str | None) -> TeamLimits:
        """``{"max_running": 50, ...}``: keys not given keep the built-in default."""
        return cls().with_overrides(json.loads(text) if text else {})

    def with_overrides(self, values: Mapping[str, Any]) -> TeamLimits:
        known = {f.name for f in fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown team limit(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        checked = {}
        for name, value in values.items():
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 1:
                raise ValueError(f"team limit {name} must be a whole number of at least 1 (got {value!r})")
            checked[name] = int(value)
        return replace(self, **checked)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
