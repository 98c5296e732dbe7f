"""boto3 clients, built on first use (never at import time) and shared per process.

``JOBSCHED_AWS_ENDPOINT`` points every client at one endpoint (the local moto server); unset, boto3's
normal resolution applies. Tests and the local runtime may also inject their own clients.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from jobsched.adapters.aws.moves.client import moving_client
from jobsched.core.names import Env
from jobsched.core.tz import UTC

_lock = threading.Lock()
_CONFIG = Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=32)
LOCAL_POOL_CONNECTIONS = 256


def client_config(read_timeout: int | None = None) -> Config:
    """Our retry and pool settings; ``read_timeout`` for calls that wait on a target (up to 15 minutes)."""
    return _CONFIG.merge(Config(read_timeout=read_timeout)) if read_timeout else _CONFIG


@cache
def client(service: str, read_timeout: int | None = None) -> Any:
    """The process-wide client for ``service`` (boto3 clients are thread-safe; creation is not)."""
    with _lock:
        endpoint = os.environ.get(Env.AWS_ENDPOINT) or None
        config = client_config(read_timeout)
        if endpoint:
            # Locally one process plays every invocation of every function: more connections, or urllib3
            # discards and reopens them under load.
            config = config.merge(Config(max_pool_connections=LOCAL_POOL_CONNECTIONS))
        made = boto3.session.Session().client(service, endpoint_url=endpoint, config=config)
        # A stage moving to new tables: every store's calls go through the move (adapters.aws.moves).
        return moving_client(made, os.environ, lambda: datetime.now(UTC)) if service == "dynamodb" else made


def reset_clients() -> None:
    """Forget cached clients (tests switch endpoints and credentials)."""
    client.cache_clear()
