"""The ``jobsched`` CLI: importing the package registers every command on the group."""

from jobsched.cli import local, offline, remote
from jobsched.cli.app import cli, main

__all__ = ["cli", "local", "main", "offline", "remote"]
