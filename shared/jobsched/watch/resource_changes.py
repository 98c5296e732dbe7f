"""CloudTrail's record of a change to a secret or an IAM role -> that resource's change history (``core.changes``),
which a team's change history shows for the resources its jobs name. A record delivered twice is kept once (its
CloudTrail event id is looked up among the resource's newest changes first)."""

from __future__ import annotations

from typing import Any

from jobsched.core.changes import ResourceChange, resource_change
from jobsched.ports import JobsPort

RECENT = 20  # a resource's newest changes looked through for a redelivered record


def record_resource_change(event: dict[str, Any], store: JobsPort) -> ResourceChange | None:
    """Keep the change ``event`` records (None: not one this history keeps, or kept already)."""
    change = resource_change(event)
    if change is None:
        return None
    recent, _ = store.history(change.subject, limit=RECENT)
    if any((entry.details or {}).get("event_id") == change.event_id for entry in recent):
        return None
    store.record_action(
        change.subject,
        version=0,
        now=change.at,
        principal=change.principal,
        action=change.action,
        details={**change.details, "event_id": change.event_id},
    )
    return change
