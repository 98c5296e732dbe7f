"""Each job's spec by version, kept for a process's life (the dispatcher's, and each worker's): a job's spec at a
version never changes (every change writes a new version, and a job created again under a deleted one's name goes
on counting: ``adapters.items.first_version``), so a job whose STATE item names a version read before is planned, or
run, without reading its SPEC item again (half a read unit: an hourly job's every visit and every run). The version
comes from the job's STATE item, which a change writes last: while a change is pending the STATE item still names
the version before it (the dispatcher plans by it, and the worker runs by it: the change is not acknowledged until
its STATE item is written; the dispatcher finishes one that crashed a minute later).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from jobsched.core.records import StoredJob
from jobsched.ports import JobsPort

MAX_SPECS = 10_000  # the least recently planned forgotten beyond this (a spec is a few kilobytes in memory)


@dataclass
class SpecCache:
    limit: int = MAX_SPECS
    _specs: OrderedDict[tuple[str, int], StoredJob] = field(default_factory=OrderedDict)

    def specs(self, jobs: JobsPort, wanted: Mapping[str, int]) -> dict[str, StoredJob]:
        """Each job's spec at the version ``wanted`` names where it is known; the others read at once (their
        stored spec, whatever its version: the caller compares)."""
        found: dict[str, StoredJob] = {}
        for job, version in wanted.items():
            cached = self._specs.get((job, version))
            if cached is not None:
                self._specs.move_to_end((job, version))
                found[job] = cached
        unread = [job for job in wanted if job not in found]
        for job, stored in (jobs.get_many(unread) if unread else {}).items():
            found[job] = stored
            self._specs[(job, stored.version)] = stored
            while len(self._specs) > self.limit:
                self._specs.popitem(last=False)
        return found
