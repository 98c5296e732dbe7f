"""End-to-end tests: the local runtime over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infra.local.runtime import LocalRuntime


def running_stack(state_dir: Path, **options: Any) -> Iterator[LocalRuntime]:
    """A local runtime for one test module (``yield from`` it in a module-scoped fixture): started on a free port,
    stopped afterwards with the process's environment and clients as they were."""
    import os

    from infra.local.runtime import LocalRuntime, free_port

    saved = dict(os.environ)
    started = LocalRuntime(port=free_port(), state_dir=state_dir, **options)
    started.start()
    yield started
    started.stop()
    os.environ.clear()
    os.environ.update(saved)
    from jobsched import wiring
    from jobsched.adapters.aws.clients import reset_clients

    reset_clients()
    wiring.reset()
