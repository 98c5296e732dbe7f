"""Changes to the resources a team's runs depend on, from CloudTrail (through EventBridge): a secret's new value,
version stage or deletion, and the policies, trust and tags of an IAM role. Pure: a CloudTrail record in, the change
as the team's change history shows it out (``console.changes_page``), or None for a record that is not one.

A change is kept under its resource (``resource_subject``), not under a team: CloudTrail does not say whose a
resource is, and the history reads the resources a team's jobs name (admission checked they are the team's), so a
team sees only its own. Only calls that succeeded are changes; what is kept is bounded (the names CloudTrail gives,
cut to ``MAX_TEXT``), never a secret's value (CloudTrail never records one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobsched.core.runs import parse_instant

SECRET_CHANGES = (
    "PutSecretValue",
    "UpdateSecret",
    "RotateSecret",
    "CancelRotateSecret",
    "UpdateSecretVersionStage",
    "DeleteSecret",
    "RestoreSecret",
    "PutResourcePolicy",
    "DeleteResourcePolicy",
)
ROLE_CHANGES = (
    "PutRolePolicy",
    "DeleteRolePolicy",
    "AttachRolePolicy",
    "DetachRolePolicy",
    "UpdateAssumeRolePolicy",
    "UpdateRole",
    "DeleteRole",
    "PutRolePermissionsBoundary",
    "DeleteRolePermissionsBoundary",
    "TagRole",
    "UntagRole",
)
SUBJECT_PREFIX = "CHANGE#"  # an audit subject (Jobs table partition) of one resource's changes
MAX_TEXT = 300
# A secret's ARN ends in its name and a random six characters Secrets Manager adds.
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:(.+)-[A-Za-z0-9]{6}$")
_DETAILS = ("versionId", "versionStage", "policyArn", "policyName", "permissionsBoundary", "tagKeys")


@dataclass(frozen=True)
class ResourceChange:
    subject: str  # resource_subject(kind, name)
    action: str  # the API call (PutSecretValue, AttachRolePolicy, ...)
    principal: str  # who made it, as CloudTrail names the caller
    at: datetime
    event_id: str  # CloudTrail's: the same record delivered twice is one change
    details: dict[str, str]


def resource_change_pattern() -> dict[str, Any]:
    """The EventBridge rule's pattern (CDK's EventPattern fields): the calls above that succeeded."""
    return {
        "source": ["aws.secretsmanager", "aws.iam"],
        "detail_type": ["AWS API Call via CloudTrail"],
        "detail": {
            "eventSource": ["secretsmanager.amazonaws.com", "iam.amazonaws.com"],
            "eventName": [*SECRET_CHANGES, *ROLE_CHANGES],
            "errorCode": [{"exists": False}],
        },
    }


def resource_subject(kind: str, name: str) -> str:
    """Where a resource's changes are kept: ``CHANGE#secret:NAME`` or ``CHANGE#role:NAME``."""
    return f"{SUBJECT_PREFIX}{kind}:{name}"


def secret_name(reference: str) -> str:
    """A secret's name, from its name or its ARN (as a job or CloudTrail gives it)."""
    found = _SECRET_ARN.fullmatch(reference)
    return found.group(1) if found else reference


def role_name(arn_or_name: str) -> str:
    """A role's name, from its name or its ARN (a path dropped)."""
    return arn_or_name.rsplit("/", 1)[-1]


def resource_change(event: dict[str, Any]) -> ResourceChange | None:
    """The change an EventBridge "AWS API Call via CloudTrail" event records, if it is one this history keeps."""
    detail = event.get("detail")
    if not isinstance(detail, dict) or detail.get("errorCode"):
        return None  # a call that failed changed nothing
    name, parameters = str(detail.get("eventName") or ""), detail.get("requestParameters") or {}
    if not isinstance(parameters, dict):
        return None
    if detail.get("eventSource") == "secretsmanager.amazonaws.com" and name in SECRET_CHANGES:
        secret = parameters.get("secretId") or (detail.get("responseElements") or {}).get("arn")
        subject = resource_subject("secret", secret_name(str(secret))) if secret else None
    elif detail.get("eventSource") == "iam.amazonaws.com" and name in ROLE_CHANGES:
        role = parameters.get("roleName")
        subject = resource_subject("role", role_name(str(role))) if role else None
    else:
        return None
    if subject is None:
        return None
    identity = detail.get("userIdentity") or {}
    principal = str(identity.get("arn") or identity.get("invokedBy") or identity.get("type") or "unknown")
    found = {key: _text(parameters[key]) for key in _DETAILS if parameters.get(key) is not None}
    response = detail.get("responseElements") or {}
    if isinstance(response, dict) and response.get("versionId"):
        found["versionId"] = _text(response["versionId"])  # PutSecretValue's new version
    return ResourceChange(
        subject=subject[: len(SUBJECT_PREFIX) + 600],
        action=name,
        principal=principal[:MAX_TEXT],
        at=parse_instant(str(detail.get("eventTime") or event.get("time"))),
        event_id=str(detail.get("eventID") or event.get("id") or "")[:100],
        details=found,
    )


def _text(value: Any) -> str:
    return str(value)[:MAX_TEXT]
