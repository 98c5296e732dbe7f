"""The ``jobsched`` CLI: importing the package registers every command on the group."""

from jobsched.cli import (
    admin,
    apply,
    checks,
    dead_letters,
    drills,
    history,
    incidents,
    local,
    logs,
    offline,
    remote,
    reruns,
    slo,
    stops,
)
from jobsched.cli.app import cli, main

__all__ = [
    "admin",
    "apply",
    "checks",
    "cli",
    "dead_letters",
    "drills",
    "history",
    "incidents",
    "local",
    "logs",
    "main",
    "offline",
    "remote",
    "reruns",
    "slo",
    "stops",
]
