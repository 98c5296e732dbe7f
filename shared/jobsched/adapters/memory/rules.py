"""Trigger rules in memory: what the AWS adapter would have put on each bus, with its refusals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.errors import TriggerRefused
from jobsched.core.events import (
    RULES_PER_BUS,
    TriggerRule,
    envelope_template,
    rule_name,
    rule_pattern,
    trigger_bus,
)
from jobsched.core.spec import DEFAULT_BUS


@dataclass
class MemoryRule:
    bus: str
    name: str
    pattern: dict[str, Any]
    template: str
    tags: dict[str, str]


@dataclass
class MemoryRules:
    stage: str = "test"
    buses: set[str] = field(default_factory=lambda: {DEFAULT_BUS})
    rules_per_bus: int = RULES_PER_BUS
    rules: dict[tuple[str, str], MemoryRule] = field(default_factory=dict)
    runs_bus: str = DEFAULT_BUS  # where Run Finished events go (after triggers' rules)

    def deploy(self, job: str, team: str, rules: Sequence[TriggerRule]) -> None:
        for rule in rules:
            trigger, index = rule.trigger, rule.path
            name, bus = rule_name(self.stage, job, rule), trigger_bus(trigger, self.runs_bus)
            where = rule.field
            if bus not in self.buses:
                raise TriggerRefused(index, where, "event_bus_not_found", f"event bus '{bus}' does not exist")
            if (bus, name) not in self.rules and self.rules_on_bus(bus) >= self.rules_per_bus:
                raise TriggerRefused(
                    index,
                    where,
                    "rule_quota_reached",
                    f"event bus '{bus}' holds its quota of rules ({self.rules_per_bus})",
                )
            self.rules[(bus, name)] = MemoryRule(
                bus,
                name,
                rule_pattern(trigger),
                envelope_template(job, rule),
                {"jobsched-team": team, "jobsched-job": job},
            )

    def remove(self, job: str, rules: Sequence[TriggerRule]) -> None:
        for rule in rules:
            self.rules.pop((trigger_bus(rule.trigger, self.runs_bus), rule_name(self.stage, job, rule)), None)

    def rules_on_bus(self, bus: str) -> int:
        return sum(1 for rule_bus, _ in self.rules if rule_bus == bus)
