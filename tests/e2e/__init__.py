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

    from infra.iam.recording import RECORD_DIR_ENV, Recorder, dump_deployment
    from infra.local.machine import free_port
    from infra.local.runtime import LocalRuntime

    saved = dict(os.environ)
    record_dir = os.environ.get(RECORD_DIR_ENV)
    recorder = Recorder()
    if record_dir:  # every AWS call the handlers make, for the permissions' evaluation (make iam)
        recorder.install()
    started = LocalRuntime(port=free_port(), state_dir=state_dir, **options)
    try:
        started.start()
        yield started
        started.stop()
    finally:
        recorder.uninstall()
    if record_dir and started.deployment is not None:
        name = f"{state_dir.name}-{os.getpid()}"
        roles = {function: found["role"] for function, found in started.deployment.functions.items()}
        dump_deployment(
            Path(record_dir) / f"{name}.deployment.json", started.template, started.deployment.physical, roles
        )
        recorder.dump(Path(record_dir) / f"{name}.calls.jsonl")
    os.environ.clear()
    os.environ.update(saved)
    from jobsched import wiring
    from jobsched.adapters.aws.clients import reset_clients

    reset_clients()
    wiring.reset()
