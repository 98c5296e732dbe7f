"""The Lambda handlers: thin adapters from an event to ``jobsched``."""

from __future__ import annotations


def forget_services() -> None:
    """Handlers build their services once per process, as a warm Lambda does. Forget them all, so the next
    invocation builds them from the environment as it is now (tests and the local runtime switch stacks)."""
    from jobsched import wiring

    wiring.reset()  # every warm service, the handlers' own included
