"""What a warm Lambda keeps: services built once per function process, never at import time.

In AWS each function is its own process, so one cache per process is one per function. The local runtime runs
every function in one process; it names the function on whose behalf code runs (``use_function_scope``), and each
function then keeps its own services, as it would in AWS: a client, a session or a reloaded parameter built while
serving one function is not another's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable
from typing import Generic, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_scope: Callable[[], Hashable] = lambda: None  # noqa: E731 - one function per process: no scope needed
_caches: list[WarmCache[..., object]] = []


def use_function_scope(scope: Callable[[], Hashable]) -> None:
    """The local runtime's: which deployed function the code now runs for."""
    global _scope
    _scope = scope


class WarmCache(Generic[P, T]):
    def __init__(self, build: Callable[P, T]) -> None:
        self._build = build
        self._built: dict[Hashable, T] = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, build)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T:
        key = (_scope(), args, tuple(sorted(kwargs.items())))
        with self._lock:
            if key in self._built:
                return self._built[key]
        value = self._build(*args, **kwargs)  # outside the lock: a build may itself need another warm service
        with self._lock:
            return self._built.setdefault(key, value)

    def cache_clear(self) -> None:
        with self._lock:
            self._built.clear()


def warm(build: Callable[P, T]) -> WarmCache[P, T]:
    """Like ``functools.cache``, once per deployed function."""
    cached = WarmCache(build)
    _caches.append(cached)  # type: ignore[arg-type]
    return cached


def forget_all() -> None:
    """Every warm service is built again on next use (tests and the local runtime switch stacks)."""
    for cached in _caches:
        cached.cache_clear()
