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

MAX_SPECS = 10_000  # the least recently used forgotten beyond this
# And beyond this much memory: a spec may be hundreds of kilobytes (a team's payloads), and the cache is the
# shared dispatcher's and worker's, so its size is bounded by what its specs weigh, not by their number alone.
MAX_BYTES = 48 * 1024 * 1024
SPEC_OVERHEAD = 10 * 1024  # a parsed spec's objects beyond its text (measured: about 9 KB for a small one)


def weight(stored: StoredJob) -> int:
    """What a spec is counted as holding in memory: its JSON text twice (the parsed strings and their objects) and
    a parsed spec's fixed overhead."""
    text = stored.spec_bytes if stored.spec_bytes is not None else len(stored.spec.model_dump_json(exclude_none=True))
    return SPEC_OVERHEAD + 2 * text


@dataclass
class SpecCache:
    limit: int = MAX_SPECS
    max_bytes: int = MAX_BYTES
    _specs: OrderedDict[tuple[str, int], tuple[StoredJob, int]] = field(default_factory=OrderedDict)
    _bytes: int = 0

    def specs(self, jobs: JobsPort, wanted: Mapping[str, int]) -> dict[str, StoredJob]:
        """Each job's spec at the version ``wanted`` names where it is known; the others read at once (their
        stored spec, whatever its version: the caller compares)."""
        found: dict[str, StoredJob] = {}
        for job, version in wanted.items():
            cached = self._specs.get((job, version))
            if cached is not None:
                self._specs.move_to_end((job, version))
                found[job] = cached[0]
        unread = [job for job in wanted if job not in found]
        for job, stored in (jobs.get_many(unread) if unread else {}).items():
            found[job] = stored
            self._keep(stored)
        return found

    def _keep(self, stored: StoredJob) -> None:
        key = (stored.key, stored.version)
        if key in self._specs:
            return
        size = weight(stored)
        if size > self.max_bytes:
            return  # never kept: read each time
        self._specs[key] = (stored, size)
        self._bytes += size
        while len(self._specs) > self.limit or self._bytes > self.max_bytes:
            _, (_, dropped) = self._specs.popitem(last=False)
            self._bytes -= dropped

    @property
    def held_bytes(self) -> int:
        return self._bytes
