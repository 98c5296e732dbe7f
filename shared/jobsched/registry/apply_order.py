"""The order a folder of job files is applied in: every job after the jobs of the folder it runs after or waits for
(the API refuses a dependency on a job not registered yet), otherwise the files' order; pruned jobs go the other way
round (a job before the jobs it depends on). A cycle keeps the files' order: the API and `jobsched lint` name it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def upstreams_first(items: Sequence[T], key: Callable[[T], str], upstreams: Callable[[T], list[str]]) -> list[T]:
    present = {key(item) for item in items}
    placed: set[str] = set()
    ordered: list[T] = []
    waiting = list(items)
    while waiting:
        ready = [item for item in waiting if all(u in placed or u not in present for u in upstreams(item))]
        if not ready:  # a cycle: the rest in the files' order
            ready = waiting
        for item in ready:
            ordered.append(item)
            placed.add(key(item))
        waiting = [item for item in waiting if key(item) not in placed]
    return ordered


def downstreams_first(items: Sequence[T], key: Callable[[T], str], upstreams: Callable[[T], list[str]]) -> list[T]:
    return list(reversed(upstreams_first(items, key, upstreams)))
