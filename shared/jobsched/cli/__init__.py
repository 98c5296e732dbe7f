"""The ``jobsched`` CLI: importing the package registers every command on the group."""

from jobsched.cli import (
    admin,
    apply,
    checks,
    company,
    cost,
    dead_letters,
    drills,
    history,
    incidents,
    job_tests,
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
    "company",
    "cost",
    "dead_letters",
    "drills",
    "history",
    "incidents",
    "job_tests",
    "local",
    "logs",
    "main",
    "offline",
    "remote",
    "reruns",
    "slo",
    "stops",
]
