"""The ``jobsched`` command group and its entry point; the commands live beside it, by what they need:
``offline`` (job files only), ``remote`` (an API), ``local`` (the runtime on this machine).

Exit codes: 0 ok, 1 the input is wrong (every problem is printed), 2 usage errors (click's own).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import click

from jobsched.core.tz import UTC

# The edge of the system reads the clock; everything below it takes ``now`` as an argument.
clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jobsched")
def cli() -> None:
    """jobsched: register, check and preview scheduled jobs."""


def main() -> None:
    cli()
