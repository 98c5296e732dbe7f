"""Callback tokens: identify (job, run, attempt), unguessable, signed; no team credentials needed.

A token names one attempt. Once the run moves on (retried, timed out, cancelled), the store's fencing
refuses that attempt's heartbeats and results, so an old token changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass

SECRET_ENV = "JOBSCHED_CALLBACK_SECRET"  # the secret itself (local runtime, tests)
SECRET_NAME_ENV = "JOBSCHED_CALLBACK_SECRET_NAME"  # or its Secrets Manager name (AWS)


class InvalidToken(ValueError):
    pass


@dataclass(frozen=True)
class CallbackClaim:
    job: str
    run_id: str
    attempt: int
    task: str | None = None  # DAG runs: the task whose attempt this is


class CallbackTokens:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the callback signing secret must be at least 16 bytes")
        self.secret = secret

    @classmethod
    def from_env(cls) -> CallbackTokens:
        secret = os.environ.get(SECRET_ENV)
        if not secret and os.environ.get(SECRET_NAME_ENV):
            from aws_lambda_powertools.utilities.parameters import SecretsProvider

            from jobsched.aws.clients import client

            secret = str(SecretsProvider(boto3_client=client("secretsmanager")).get(os.environ[SECRET_NAME_ENV]))
        if not secret:
            raise RuntimeError(f"set {SECRET_ENV} or {SECRET_NAME_ENV}")
        return cls(secret.encode())

    def issue(self, job: str, run_id: str, attempt: int, task: str | None = None) -> str:
        fields: list[object] = [job, run_id, attempt, *([task] if task else [])]
        payload = _b64(json.dumps(fields, separators=(",", ":")).encode())
        return f"{payload}.{self._sign(payload)}"

    def verify(self, token: str) -> CallbackClaim:
        payload, _, signature = token.partition(".")
        if not payload or not hmac.compare_digest(signature, self._sign(payload)):
            raise InvalidToken("the run token is not valid")
        try:
            job, run_id, attempt, *task = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (ValueError, TypeError):
            raise InvalidToken("the run token is not valid") from None
        return CallbackClaim(str(job), str(run_id), int(attempt), str(task[0]) if task else None)

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self.secret, payload.encode(), hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
