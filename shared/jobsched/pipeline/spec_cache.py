"""The dispatcher's specs by version, kept for its process's life: a job's spec at a version never changes (every
change writes a new version, and a job created again under a deleted one's name goes on counting:
``adapters.items.first_version``), so a due job whose entry names a version read before is planned without reading
its SPEC item again (half a read unit a visit: an hourly job's every visit). The entry's version comes from the
job's STATE item, which a change writes last: while a change is pending the entry still names the version before
it, as the read did (the dispatcher skipped such a job only when its read caught the newer spec; the worker reads
the spec itself and drops a run of a version replaced or paused since).
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
