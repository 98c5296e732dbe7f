"""The dispatcher's specs by version (``pipeline.spec_cache``): a version read once is not read again, a new
version is, and the least recently planned are forgotten beyond the bound."""

from __future__ import annotations

from jobsched.adapters.memory import MemoryJobs
from jobsched.core.records import StoredJob
from jobsched.core.runs import parse_instant
from jobsched.core.spec import JobSpec
from jobsched.pipeline.spec_cache import SpecCache, weight

NOW = parse_instant("2027-01-04T09:00:00Z")


class CountingJobs(MemoryJobs):
    def __init__(self) -> None:
        super().__init__()
        self.read: list[list[str]] = []

    def get_many(self, jobs: list[str]) -> dict[str, StoredJob]:
        self.read.append(sorted(jobs))
        return super().get_many(jobs)


def spec(name: str, expression: str = "0 * * * *", payload: object = None) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": name,
            "team": "data",
            "schedule": {"expression": expression},
            "target": {"type": "lambda", "function": "f"} | ({"payload": payload} if payload is not None else {}),
        }
    )


def test_a_version_read_once_is_not_read_again_and_a_new_version_is() -> None:
    jobs, cache = CountingJobs(), SpecCache(limit=2)
    a = jobs.create(spec("a"), now=NOW, principal="t", next_visit_at=None, cursor=NOW)
    b = jobs.create(spec("b"), now=NOW, principal="t", next_visit_at=None, cursor=NOW)
    assert set(cache.specs(jobs, {a.key: 1, b.key: 1})) == {a.key, b.key}
    assert cache.specs(jobs, {a.key: 1, b.key: 1}) == {a.key: a, b.key: b} and jobs.read == [[a.key, b.key]]
    changed = jobs.replace(a, spec("a", "30 * * * *"), now=NOW, principal="t", next_visit_at=None, cursor=NOW)
    assert cache.specs(jobs, {a.key: changed.version})[a.key].spec.schedule == changed.spec.schedule
    assert jobs.read[-1] == [a.key]
    # Bounded: a's first version (the least recently planned) was forgotten when its new one came in; b is kept.
    reads = len(jobs.read)
    cache.specs(jobs, {b.key: 1})
    assert len(jobs.read) == reads
    assert cache.specs(jobs, {a.key: 1})[a.key].version == changed.version  # read: the caller sees the mismatch
    assert jobs.read[-1] == [a.key]


def test_large_specs_are_forgotten_by_their_weight_not_only_their_number() -> None:
    """A team's specs with large payloads cannot fill a shared process's memory: the cache holds what its byte bound
    allows, the least recently used forgotten, and a spec heavier than the whole bound is never kept."""
    jobs = CountingJobs()
    big = {"blob": "x" * 60_000}  # within the payload bound
    stored = [
        jobs.create(spec(f"big{n}", payload=big), now=NOW, principal="t", next_visit_at=None, cursor=NOW)
        for n in range(6)
    ]  # fmt: skip
    each = weight(stored[0])
    assert each > 120_000
    cache = SpecCache(max_bytes=3 * each)
    for one in stored:
        cache.specs(jobs, {one.key: one.version})
    assert cache.held_bytes <= 3 * each
    reads = len(jobs.read)
    cache.specs(jobs, {one.key: one.version for one in stored[-3:]})  # the three most recent: kept
    assert len(jobs.read) == reads
    cache.specs(jobs, {stored[0].key: 1})  # forgotten: read again
    assert jobs.read[-1] == [stored[0].key]
    tiny = SpecCache(max_bytes=each - 1)
    tiny.specs(jobs, {stored[0].key: 1})
    tiny.specs(jobs, {stored[0].key: 1})
    assert tiny.held_bytes == 0 and jobs.read[-2:] == [[stored[0].key]] * 2
