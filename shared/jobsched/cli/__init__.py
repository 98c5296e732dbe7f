"""The ``jobsched`` CLI: importing the package registers every command on the group."""

from jobsched.cli import admin, local, offline, remote, reruns
from jobsched.cli.app import cli, main

__all__ = ["admin", "cli", "local", "main", "offline", "remote", "reruns"]
