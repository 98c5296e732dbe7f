"""Callback tokens: identify (job, run, attempt[, task]), unguessable, signed, expiring; no team credentials.

``v3.<key id>.<payload>.<signature>``: the payload carries the expiry (the attempt's timeout plus an hour) and
the token's purpose, the key id names the signing key. A ``callback`` token (a callback target's, handed out by
the run's view) may heartbeat and complete its attempt; a ``progress`` token (a container's, in its
environment, where anyone who may describe the task can read it) may only heartbeat and report progress and
checkpoints: a container ends by its state change, never by ``/callbacks/complete``. ``v2`` tokens issued
before purposes existed still verify, as ``callback`` tokens; the complete route refuses any token for a
container's run. Tokens travel in the ``X-Jobsched-Token`` header, never in a URL (access
logs keep URLs). The signing secret rotates (Secrets Manager, every 30 days): the current version signs,
and the previous one still verifies, so tokens issued just before a rotation keep working until they
expire. A token whose key id is unknown makes the API reload the keys (at most every 30 seconds).

A token names one attempt. Once the run moves on (retried, timed out, cancelled), the store's fencing
refuses that attempt's heartbeats and results, so an old token changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from jobsched.core.names import CALLBACK_TOKEN_HEADER, Env
from jobsched.core.tz import UTC

TOKEN_HEADER = CALLBACK_TOKEN_HEADER
TOKEN_GRACE = timedelta(hours=1)  # beyond the attempt's timeout: a late result is still fenced by the store
KEY_CACHE_SECONDS = 300.0
RELOAD_AT_MOST_EVERY_SECONDS = 30.0
VERSION = "v3"
LEGACY_VERSION = "v2"  # before purposes: verified until the last of them expires (an hour past its timeout)
Purpose = Literal["callback", "progress"]
PURPOSES: tuple[Purpose, ...] = ("callback", "progress")


class InvalidToken(ValueError):
    pass


@dataclass(frozen=True)
class CallbackTokenSubject:
    """Whose attempt a verified callback token speaks for."""

    job: str
    run_id: str
    attempt: int
    task: str | None = None  # DAG runs: the task whose attempt this is
    purpose: Purpose = "callback"

    @property
    def may_complete(self) -> bool:
        return self.purpose == "callback"


def key_id(secret: bytes) -> str:
    return hashlib.sha256(secret).hexdigest()[:12]


class KeyRing:
    """Signing keys, newest first; reloaded every few minutes, or sooner when a token names an unknown key."""

    def __init__(self, load: Callable[[], Sequence[bytes]], *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.load, self.monotonic = load, monotonic
        self._keys: list[bytes] = []
        self._loaded_at = float("-inf")
        self._lock = threading.Lock()

    def keys(self, *, unknown: str | None = None) -> list[bytes]:
        now = self.monotonic()
        with self._lock:
            stale = now - self._loaded_at >= KEY_CACHE_SECONDS
            missing = unknown is not None and unknown not in {key_id(k) for k in self._keys}
            if stale or (missing and now - self._loaded_at >= RELOAD_AT_MOST_EVERY_SECONDS):
                keys = [bytes(k) for k in self.load() if k]
                for key in keys:
                    if len(key) < 16:
                        raise ValueError("a callback signing secret must be at least 16 bytes")
                if not keys:
                    raise RuntimeError("no callback signing secret")
                self._keys, self._loaded_at = keys, now
            return list(self._keys)


class CallbackTokens:
    def __init__(self, keys: bytes | KeyRing) -> None:
        if isinstance(keys, bytes):
            fixed = keys
            keys = KeyRing(lambda: [fixed])
        self.ring = keys
        self.ring.keys()  # fail at start, not at the first callback

    @classmethod
    def from_env(cls) -> CallbackTokens:
        secret = os.environ.get(Env.CALLBACK_SECRET)
        if secret:
            return cls(secret.encode())
        name = os.environ.get(Env.CALLBACK_SECRET_NAME)
        if not name:
            raise RuntimeError(f"set {Env.CALLBACK_SECRET} or {Env.CALLBACK_SECRET_NAME}")
        return cls(KeyRing(lambda: secrets_manager_versions(name)))

    def issue(
        self,
        job: str,
        run_id: str,
        attempt: int,
        task: str | None = None,
        *,
        expires_at: datetime,
        purpose: Purpose = "callback",
    ) -> str:
        key = self.ring.keys()[0]
        fields: list[object] = [job, run_id, attempt, int(expires_at.timestamp()), task, purpose]
        payload = _b64(json.dumps(fields, separators=(",", ":")).encode())
        kid = key_id(key)
        return f"{VERSION}.{kid}.{payload}.{_sign(key, f'{VERSION}.{kid}.{payload}')}"

    def verify(self, token: str, *, now: datetime) -> CallbackTokenSubject:
        if not token.isascii():  # compare_digest takes ASCII text only
            raise InvalidToken("the run token is not valid")
        parts = token.split(".")
        if len(parts) != 4 or parts[0] not in (VERSION, LEGACY_VERSION):
            raise InvalidToken("the run token is not valid")
        version, kid, payload, signature = parts
        keys = {key_id(k): k for k in self.ring.keys(unknown=kid)}
        key = keys.get(kid)
        if key is None or not hmac.compare_digest(signature, _sign(key, f"{version}.{kid}.{payload}")):
            raise InvalidToken("the run token is not valid")
        try:
            fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            if version == LEGACY_VERSION:  # [job, run, attempt, expires, task?]: a callback token
                job, run_id, attempt, expires, *rest = fields
                task, purpose = (rest[0] if rest else None), "callback"
            else:
                job, run_id, attempt, expires, task, purpose = fields
            expires_at = datetime.fromtimestamp(int(expires), UTC)
        except (ValueError, TypeError, OverflowError, OSError):
            raise InvalidToken("the run token is not valid") from None
        if purpose not in PURPOSES:
            raise InvalidToken("the run token is not valid")
        if now >= expires_at:
            raise InvalidToken(f"the run token expired at {expires_at.isoformat()}; get a new one from the run")
        named_task = str(task) if task else None
        return CallbackTokenSubject(str(job), str(run_id), int(attempt), named_task, purpose)


def token_expiry(started_at: datetime | None, timeout: timedelta, now: datetime) -> datetime:
    """When a token for an attempt stops being accepted: its timeout after it started, plus the grace."""
    return max((started_at or now) + timeout, now) + TOKEN_GRACE


def secrets_manager_versions(name: str) -> list[bytes]:
    """AWSCURRENT then AWSPREVIOUS (absent before the first rotation)."""
    from botocore.exceptions import ClientError

    from jobsched.adapters.aws.clients import client

    secrets = client("secretsmanager")
    found = [secrets.get_secret_value(SecretId=name, VersionStage="AWSCURRENT")["SecretString"].encode()]
    try:
        found.append(secrets.get_secret_value(SecretId=name, VersionStage="AWSPREVIOUS")["SecretString"].encode())
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
    return found


def _sign(key: bytes, message: str) -> str:
    return _b64(hmac.new(key, message.encode(), hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
