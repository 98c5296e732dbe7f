"""Example target: sleeps ``seconds``. Given a callback token and the API URL it works like an external
worker: heartbeats while it sleeps, then reports completion (signed with its role on AWS).
"""

from __future__ import annotations

import time
from typing import Any

HEARTBEAT_EVERY = 30.0


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    payload = event.get("payload") or {}
    seconds = float(payload.get("seconds", 1)) if isinstance(payload, dict) else 1.0
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        seconds = min(seconds, context.get_remaining_time_in_millis() / 1000 - 5)
    token, api_url = payload.get("callback_token"), payload.get("api_url")
    client = _client(api_url) if token and api_url else None
    deadline = time.monotonic() + max(seconds, 0)
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, HEARTBEAT_EVERY))
        if client is not None and deadline - time.monotonic() > 0:
            client.call("POST", "/callbacks/heartbeat", headers={"X-Jobsched-Token": token})
    if client is not None:
        done = {"status": "succeeded", "output": f"slept {seconds:.0f}s"}
        client.call("POST", "/callbacks/complete", done, headers={"X-Jobsched-Token": token})
    return {"slept_seconds": seconds}


def _client(api_url: str) -> Any:
    from jobsched.client import ApiClient, HttpTransport

    return ApiClient(HttpTransport(api_url))
