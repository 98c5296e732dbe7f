"""Example target: fails the first ``fail_times`` attempts of each run (default 2), then succeeds.

The attempt number comes with every invocation, so no state is needed to know how often a run failed.
"""

from __future__ import annotations

from typing import Any


class FlakyFailure(RuntimeError):
    pass


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    envelope = event.get("jobsched", {})
    payload = event.get("payload") or {}
    fail_times = int(payload.get("fail_times", 2)) if isinstance(payload, dict) else 2
    attempt = int(envelope.get("attempt", 1))
    if attempt <= fail_times:
        raise FlakyFailure(f"attempt {attempt} of run {envelope.get('run_id')} fails on purpose ({fail_times} times)")
    return {"succeeded_on_attempt": attempt, "run_id": envelope.get("run_id")}
