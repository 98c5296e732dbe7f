"""Signed webhooks: how a receiver knows a page came from jobsched, and is not a replay.

The body is signed with HMAC-SHA256 over ``<timestamp>.<body>``, the timestamp in Unix seconds:

    X-Jobsched-Timestamp: 1796090735
    X-Jobsched-Signature: v1=<hex digest>

A receiver recomputes the digest with the shared secret, compares in constant time, and refuses a
timestamp more than ``TOLERANCE`` away from its clock (``verify`` does all three).
"""

from __future__ import annotations

import hashlib
import hmac

TIMESTAMP_HEADER = "X-Jobsched-Timestamp"
SIGNATURE_HEADER = "X-Jobsched-Signature"
TOLERANCE_SECONDS = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"v1={digest}"


def signed_headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signature(secret, timestamp, body)}


def verify(secret: str, headers: dict[str, str], body: bytes, *, now: float) -> bool:
    """What a receiver does: the signature matches and the timestamp is recent."""
    lowered = {name.lower(): value for name, value in headers.items()}
    stamp, given = lowered.get(TIMESTAMP_HEADER.lower(), ""), lowered.get(SIGNATURE_HEADER.lower(), "")
    if not stamp.isdigit() or abs(now - int(stamp)) > TOLERANCE_SECONDS:
        return False
    return hmac.compare_digest(given, signature(secret, int(stamp), body))
