"""Incidents in memory: the same items and conditions as ``aws.jobs.incidents``."""

from __future__ import annotations

import contextlib

from jobsched.adapters.memory.table import ConditionFailed, Item, MemoryTable
from jobsched.core.names import JobsKeys
from jobsched.core.records import (
    StoredIncident,
    VersionConflict,
)


class MemoryIncidents:
    table: MemoryTable

    # ---------------------------------------------------------------- breakers and incidents

    def open_incidents(self, job: str) -> set[str]:
        item = self.table.get(job, JobsKeys.STATE, consistent=False) or {}
        return set(item.get(JobsKeys.INCIDENTS) or ())

    def mark_incident(self, job: str, incident_class: str, *, is_open: bool) -> None:
        def mark(item: Item | None) -> Item | None:
            if item is None:
                return None  # the job is gone: nothing to mark (DynamoDB's update would create a stub)
            classes = set(item.get(JobsKeys.INCIDENTS) or ())
            classes = classes | {incident_class} if is_open else classes - {incident_class}
            item[JobsKeys.INCIDENTS] = classes or None
            return item

        self.table.update(job, JobsKeys.STATE, mark)

    def get_incident(self, subject: str, incident_class: str) -> StoredIncident | None:
        item = self.table.get(subject, f"{JobsKeys.INCIDENT_PREFIX}{incident_class}")
        return StoredIncident.from_values(item) if item else None

    def put_incident(self, incident: StoredIncident, *, expected_version: int) -> StoredIncident:
        stored = StoredIncident(incident.values, expected_version + 1, incident.unsent, incident.resolved)
        values = stored.to_values()

        def put(item: Item | None) -> Item:
            if (item is not None) if expected_version == 0 else (item is None or item["version"] != expected_version):
                raise ConditionFailed
            return {name: value for name, value in values.items() if value is not None}

        try:
            self.table.update(values[JobsKeys.PK], values[JobsKeys.SK], put)
        except ConditionFailed:
            raise VersionConflict(f"incident {stored.values['subject']} changed meanwhile") from None
        return stored

    def clear_incident_outbox(self, incident: StoredIncident) -> None:
        def clear(item: Item | None) -> Item | None:
            if item is None or item["version"] != incident.version:
                raise ConditionFailed  # changed meanwhile: the next writer sends or keeps what is unsent
            if incident.resolved:
                return None
            item.pop("unsent", None)
            return item

        sk = JobsKeys.INCIDENT_PREFIX + incident.values["incident_class"]
        with contextlib.suppress(ConditionFailed):
            self.table.update(incident.values["subject"], sk, clear)

    def incidents(self, subject: str) -> list[StoredIncident]:
        return [
            StoredIncident.from_values(item)
            for item in self.table.partition(subject)
            if item[JobsKeys.SK].startswith(JobsKeys.INCIDENT_PREFIX)
        ]

    def drop_incidents(self, subject: str) -> None:
        for incident in self.incidents(subject):
            self.table.delete(subject, JobsKeys.INCIDENT_PREFIX + incident.values["incident_class"])
