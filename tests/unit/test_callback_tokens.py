"""Callback tokens: key id, expiry, the previous key during rotation, and the rotation steps themselves."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.clients import reset_clients
from jobsched.adapters.aws.rotation import rotate
from jobsched.api.tokens import CallbackTokens, InvalidToken, KeyRing, key_id, secrets_manager_versions, token_expiry
from tests.aws.harness import FakeContext
from tests.helpers import utc

OLD, NEW = b"old-signing-key-0123456789abcdef", b"new-signing-key-0123456789abcdef"
NOW = utc("2027-01-04T10:00:00Z")


def test_a_token_names_its_key_and_expires() -> None:
    tokens = CallbackTokens(OLD)
    token = tokens.issue("a/job", "r1", 2, expires_at=NOW + timedelta(hours=1))
    version, kid, _, _ = token.split(".")
    assert version == "v3" and kid == key_id(OLD)
    claim = tokens.verify(token, now=NOW + timedelta(minutes=59))
    assert (claim.job, claim.run_id, claim.attempt, claim.task) == ("a/job", "r1", 2, None)
    with pytest.raises(InvalidToken, match="expired"):
        tokens.verify(token, now=NOW + timedelta(hours=1))


def test_a_tampered_token_is_refused() -> None:
    tokens = CallbackTokens(OLD)
    version, kid, payload, signature = tokens.issue("a/job", "r1", 1, expires_at=NOW + timedelta(days=1)).split(".")
    forged_payload = payload[:-2] + ("AA" if not payload.endswith("AA") else "BB")
    for forged in (
        f"{version}.{kid}.{forged_payload}.{signature}",
        f"{version}.{key_id(NEW)}.{payload}.{signature}",
        f"v1.{kid}.{payload}.{signature}",
        f"{payload}.{signature}",  # the old format, without key or expiry
    ):
        with pytest.raises(InvalidToken):
            tokens.verify(forged, now=NOW)


def test_the_previous_key_verifies_during_rotation_and_an_unknown_key_reloads() -> None:
    versions = [[OLD]]
    clock = [0.0]
    ring = KeyRing(lambda: versions[-1], monotonic=lambda: clock[0])
    before = CallbackTokens(ring)
    old_token = before.issue("a/job", "r1", 1, expires_at=NOW + timedelta(hours=2))

    versions.append([NEW, OLD])  # rotated: NEW is current, OLD previous
    issued_elsewhere = CallbackTokens(KeyRing(lambda: [NEW, OLD])).issue(
        "a/job", "r2", 1, expires_at=NOW + timedelta(hours=2)
    )
    clock[0] = 31.0  # an unknown key id makes this container reload (at most every 30 s)
    assert before.verify(issued_elsewhere, now=NOW).run_id == "r2"
    assert before.verify(old_token, now=NOW).run_id == "r1"
    assert before.issue("a/job", "r3", 1, expires_at=NOW + timedelta(hours=1)).split(".")[1] == key_id(NEW)

    versions.append([b"newest-signing-key-0123456789abc", NEW])  # rotated again: OLD is gone
    clock[0] = 400.0
    with pytest.raises(InvalidToken):
        before.verify(old_token, now=NOW)


def test_token_expiry_covers_the_attempts_timeout() -> None:
    started = NOW - timedelta(minutes=10)
    assert token_expiry(started, timedelta(hours=1), NOW) == started + timedelta(hours=2)
    assert token_expiry(NOW - timedelta(days=3), timedelta(hours=1), NOW) == NOW + timedelta(hours=1)


def test_rotation_makes_a_new_current_key_and_keeps_the_previous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        reset_clients()
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        arn = secrets.create_secret(Name="jobsched/dev/callback-signing", SecretString=OLD.decode())["ARN"]
        token = "0f4a6c1e-0b9e-4e8e-9d9a-7d0c2f5b1a11"
        rotate(secrets, arn, token, "createSecret")
        rotate(secrets, arn, token, "createSecret")  # Secrets Manager may repeat a step
        for step in ("setSecret", "testSecret", "finishSecret"):
            rotate(secrets, arn, token, step)
        rotate(secrets, arn, token, "finishSecret")  # a repeated step changes nothing
        current, previous = secrets_manager_versions(arn)
        assert previous == OLD and current != OLD and len(current) == 48
    reset_clients()


def test_the_rotation_handler_runs_the_sample_event(monkeypatch: pytest.MonkeyPatch) -> None:
    event: dict[str, Any] = json.loads((Path(__file__).parents[2] / "events" / "rotation_step.json").read_text())
    calls: list[tuple[str, str, str]] = []
    import functions.rotation.handler as rotation_handler
    from jobsched import wiring

    monkeypatch.setattr(wiring, "rotate", lambda client, secret, token, step: calls.append((secret, token, step)))
    monkeypatch.setattr(wiring, "client", lambda service: service)
    rotation_handler.handler(event, FakeContext())  # type: ignore[arg-type]
    assert calls == [(event["SecretId"], event["ClientRequestToken"], "createSecret")]


def test_a_token_carries_its_purpose_and_a_progress_token_may_not_complete() -> None:
    tokens = CallbackTokens(OLD)
    progress = tokens.verify(
        tokens.issue("a/job", "r1", 2, expires_at=NOW + timedelta(hours=1), purpose="progress"), now=NOW
    )
    callback = tokens.verify(tokens.issue("a/job", "r1", 2, "t", expires_at=NOW + timedelta(hours=1)), now=NOW)
    assert progress.purpose == "progress" and not progress.may_complete and progress.task is None
    assert callback.purpose == "callback" and callback.may_complete and callback.task == "t"
    # The purpose is signed: rewriting it breaks the signature.
    version, kid, payload, signature = tokens.issue(
        "a/job", "r1", 2, expires_at=NOW + timedelta(hours=1), purpose="progress"
    ).split(".")
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).replace(b"progress", b"callback")
    forged = base64.urlsafe_b64encode(decoded).decode().rstrip("=")
    with pytest.raises(InvalidToken):
        tokens.verify(f"{version}.{kid}.{forged}.{signature}", now=NOW)
