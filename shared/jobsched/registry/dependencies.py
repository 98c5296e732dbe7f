"""A job's dependencies: the jobs it runs after (its after triggers) or waits for (its job waits), and the jobs
that run after it or wait for it, each with its last run. What ``jobsched deps`` and the API's dependencies route show.

Downstreams are found through the reverse edges the registry writes when a job is stored
(``RegistryPort.downstreams``), each checked against the downstream's current spec, so an edge a crash left
behind shows nothing. Another team's downstream is shown by name only: its runs are that team's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from jobsched.core.durations import format_duration
from jobsched.core.records import StoredJob
from jobsched.core.run_records import Run
from jobsched.core.spec import AfterTrigger

MAX_DOWNSTREAMS = 100  # shown per job


@dataclass(frozen=True)
class Dependency:
    job: str
    how: str  # "all of 2, on succeeded"
    exists: bool
    last_run: Run | None = None


def describe(after: AfterTrigger) -> str:
    form = f"all of {len(after.upstreams)}" if after.needs_all else "any of" if after.any else "after"
    return f"{form}, on {' or '.join(after.status)}"


class DependencyStore(Protocol):
    def get(self, job: str, *, consistent: bool = True) -> StoredJob | None: ...
    def downstreams(self, job: str) -> list[str]: ...


class RunHistory(Protocol):
    def history(self, job: str, *, limit: int = 50, newest_first: bool = True) -> list[Run]: ...


def dependencies(
    store: DependencyStore, runs: RunHistory, stored: StoredJob
) -> tuple[list[Dependency], list[Dependency]]:
    """(upstreams, downstreams) of the job."""
    team = stored.spec.team

    def last_run(job: str) -> Run | None:
        found = runs.history(job, limit=1)
        return found[0] if found else None

    upstreams = []
    for trigger in stored.spec.triggers:
        if trigger.after is None:
            continue
        for upstream in trigger.after.upstreams:
            found = store.get(upstream)
            # Another team's upstream shares its runs with this team (share_with), or shows nothing of them.
            visible = found is not None and (found.spec.team == team or team in found.spec.share_with)
            upstreams.append(
                Dependency(
                    upstream, describe(trigger.after), found is not None, last_run(upstream) if visible else None
                )
            )
    for _, condition in stored.spec.wait_conditions():
        if condition.job is None:
            continue
        found = store.get(condition.job)
        visible = found is not None and (found.spec.team == team or team in found.spec.share_with)
        last = last_run(condition.job) if visible else None
        upstreams.append(Dependency(condition.job, waits_for(condition.window), found is not None, last))
    downstreams = []
    for downstream in store.downstreams(stored.key)[:MAX_DOWNSTREAMS]:
        found = store.get(downstream)
        how = _how_it_depends(found, stored.key) if found else None
        if how is None:
            continue  # an edge left behind: the job no longer runs after this one, nor waits for it
        own = downstream.split("/", 1)[0] == team
        downstreams.append(Dependency(downstream, how, True, last_run(downstream) if own else None))
    return upstreams, downstreams


def waits_for(window: timedelta) -> str:
    return f"waits for a succeeded run within {format_duration(window)}"


def _how_it_depends(downstream: StoredJob, upstream: str) -> str | None:
    naming = [t.after for t in downstream.spec.triggers if t.after and upstream in t.after.upstreams]
    if naming:
        return describe(naming[0])
    waits = [c for _, c in downstream.spec.wait_conditions() if c.job == upstream]
    return waits_for(waits[0].window) if waits else None


def cycle_through(
    job: str, upstreams: Iterable[str], upstreams_of: Callable[[str], Iterable[str]], *, limit: int
) -> list[str] | None:
    """``[job, u1, ..., job]`` when ``job``, running after ``upstreams``, would run after itself through the
    after triggers ``upstreams_of`` tells (breadth first, without recursion, at most ``limit`` jobs looked at)."""
    came_from: dict[str, str | None] = {}
    queue: list[str] = []
    for upstream in upstreams:
        if upstream == job:
            return [job, job]
        if upstream not in came_from:
            came_from[upstream] = None
            queue.append(upstream)
    while queue and len(came_from) <= limit:
        current = queue.pop(0)
        for upstream in upstreams_of(current):
            if upstream == job:
                chain = [current]
                while (previous := came_from[chain[-1]]) is not None:
                    chain.append(previous)
                return [job, *reversed(chain), job]
            if upstream not in came_from:
                came_from[upstream] = current
                queue.append(upstream)
    return None
