"""IAM role ARNs, as callers and resources name them. Pure.

A role is named ``arn:PARTITION:iam::ACCOUNT:role/PATH/NAME``; a caller acting as it is
``arn:PARTITION:sts::ACCOUNT:assumed-role/NAME/SESSION`` (with no path). Who a caller is (the API's membership)
and whether a container's report comes from its task's role both ask here.
"""

from __future__ import annotations

import re

ASSUMED_ROLE = re.compile(r"^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/(.+)$")
ROLE = re.compile(r"^arn:(aws[a-z-]*):iam::(\d{12}):role/(?:.*/)?([^/]+)$")


def role_of(arn: str) -> tuple[str, str] | None:
    """(account, role name) of a role ARN or of an assumed-role session's; None for anything else."""
    match = ASSUMED_ROLE.fullmatch(arn) or ROLE.fullmatch(arn)
    return (match.group(2), match.group(3)) if match else None
