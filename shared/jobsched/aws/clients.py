"""boto3 clients, built on first use (never at import time) and shared per process.

``JOBSCHED_AWS_ENDPOINT`` points every client at one endpoint (the local moto server); unset, boto3's
normal resolution applies. Tests and the local runtime may also inject their own clients.
"""

from __future__ import annotations

import os
import threading
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

ENDPOINT_ENV = "JOBSCHED_AWS_ENDPOINT"
_lock = threading.Lock()
_CONFIG = Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=32)


@cache
def client(service: str, read_timeout: int | None = None) -> Any:
    """The process-wide client for ``service`` (boto3 clients are thread-safe; creation is not).

    ``read_timeout`` for calls that wait on the target (synchronous Lambda invokes up to 15 minutes).
    """
    with _lock:
        endpoint = os.environ.get(ENDPOINT_ENV) or None
        config = _CONFIG.merge(Config(read_timeout=read_timeout)) if read_timeout else _CONFIG
        return boto3.session.Session().client(service, endpoint_url=endpoint, config=config)


def reset_clients() -> None:
    """Forget cached clients (tests switch endpoints and credentials)."""
    client.cache_clear()
