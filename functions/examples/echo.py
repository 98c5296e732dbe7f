"""Example target: returns its input (the run envelope and payload)."""

from __future__ import annotations

from typing import Any


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"echo": event}
