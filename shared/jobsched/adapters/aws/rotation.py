"""Rotation of the callback-signing secret: Secrets Manager's four steps for a secret no other system uses.

createSecret stores a new random value as AWSPENDING (once per rotation token), setSecret has nothing
to configure, testSecret checks the pending value is a usable key, finishSecret makes it AWSCURRENT (the
old one becomes AWSPREVIOUS, which still verifies tokens issued before; see ``jobsched.api.tokens``).
Each step is idempotent: Secrets Manager may call a step again.
"""

from __future__ import annotations

from typing import Any, Literal

from botocore.exceptions import ClientError

Step = Literal["createSecret", "setSecret", "testSecret", "finishSecret"]
KEY_LENGTH = 48


class RotationError(RuntimeError):
    pass


def rotate(secrets: Any, secret_id: str, token: str, step: Step) -> None:
    described = secrets.describe_secret(SecretId=secret_id)
    stages = described.get("VersionIdsToStages", {})
    if "AWSCURRENT" in stages.get(token, ()):
        return  # this version is already current: nothing to do
    if step != "createSecret" and "AWSPENDING" not in stages.get(token, ()):
        raise RotationError(f"version {token} of {secret_id} is not pending rotation")
    if step == "createSecret":
        if "AWSPENDING" not in stages.get(token, ()) or not _has_value(secrets, secret_id, token):
            value = secrets.get_random_password(PasswordLength=KEY_LENGTH, ExcludePunctuation=True)["RandomPassword"]
            secrets.put_secret_value(
                SecretId=secret_id, ClientRequestToken=token, SecretString=value, VersionStages=["AWSPENDING"]
            )
    elif step == "testSecret":
        value = secrets.get_secret_value(SecretId=secret_id, VersionId=token, VersionStage="AWSPENDING")["SecretString"]
        if len(value) < 32:
            raise RotationError("the pending signing key is shorter than 32 characters")
    elif step == "finishSecret":
        current = next((version for version, labels in stages.items() if "AWSCURRENT" in labels), None)
        if current == token:
            return
        secrets.update_secret_version_stage(
            SecretId=secret_id, VersionStage="AWSCURRENT", MoveToVersionId=token, RemoveFromVersionId=current
        )
    elif step != "setSecret":
        raise RotationError(f"unknown rotation step {step}")


def _has_value(secrets: Any, secret_id: str, token: str) -> bool:
    try:
        secrets.get_secret_value(SecretId=secret_id, VersionId=token, VersionStage="AWSPENDING")
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("ResourceNotFoundException", "InvalidRequestException"):
            return False
        raise
    return True
