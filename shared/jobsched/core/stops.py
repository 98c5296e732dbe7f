"""An emergency stop as recorded: its selector, what it paused and cancelled, and its resume (``pipeline.stops``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from jobsched.core.runs import instant_text, parse_instant
from jobsched.core.spec import JobSpec

Catchup = Literal["none", "latest", "all"]


@dataclass(frozen=True)
class Selector:
    teams: tuple[str, ...]
    tags: dict[str, str] = field(default_factory=dict)
    target_types: tuple[str, ...] = ()

    def matches(self, spec: JobSpec) -> bool:
        if spec.team not in self.teams:
            return False
        if any(spec.tags.get(key) != value for key, value in self.tags.items()):
            return False
        if self.target_types:
            kinds = {getattr(target, "type", "") for _, target in spec.targets()}
            return bool(kinds & set(self.target_types))
        return True


@dataclass(frozen=True)
class Stop:
    stop_id: str
    reason: str
    principal: str
    at: datetime
    selector: Selector
    stopped: tuple[str, ...] = ()  # the jobs this stop paused
    already_paused: tuple[str, ...] = ()  # matched, but paused before: left alone
    cancelled: tuple[str, ...] = ()  # "team/name run_id" of runs cancelled with it
    resumed_at: datetime | None = None
    resumed_by: str | None = None
    catchup: Catchup | None = None
    resumed: tuple[dict[str, str], ...] = ()  # per job: what the resume did

    @property
    def pause_reason(self) -> str:
        return f"emergency stop {self.stop_id}: {self.reason}"

    def as_values(self) -> dict[str, Any]:
        values = asdict(self)
        values["at"] = instant_text(self.at)
        values["resumed_at"] = instant_text(self.resumed_at) if self.resumed_at else None
        return values

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Stop:
        selector = values["selector"]
        return cls(
            stop_id=values["stop_id"],
            reason=values["reason"],
            principal=values["principal"],
            at=parse_instant(values["at"]),
            selector=Selector(tuple(selector["teams"]), dict(selector["tags"]), tuple(selector["target_types"])),
            stopped=tuple(values.get("stopped") or ()),
            already_paused=tuple(values.get("already_paused") or ()),
            cancelled=tuple(values.get("cancelled") or ()),
            resumed_at=parse_instant(values["resumed_at"]) if values.get("resumed_at") else None,
            resumed_by=values.get("resumed_by"),
            catchup=values.get("catchup"),
            resumed=tuple(dict(entry) for entry in values.get("resumed") or ()),
        )
