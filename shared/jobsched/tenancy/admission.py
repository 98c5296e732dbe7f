"""What a job may name, checked when it is stored: 422 with the field, before anything is written.

Resources that are visibly another team's or jobsched's own are refused here, and URLs whose literal
address this stage may never reach. Both are checked again at every use (a resource can change hands,
a name can resolve elsewhere later): this is the early, clear answer, not the wall.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from jobsched.core.errors import FieldError
from jobsched.core.names import OWNER_TAG
from jobsched.core.spec import HttpTarget, JobSpec
from jobsched.core.urls import UrlRefused, parse_url
from jobsched.schedule.company import CompanySettings, company_reference_error
from jobsched.schedule.cost_check import schedule_cost_problem
from jobsched.tenancy.egress import AddressPolicy
from jobsched.tenancy.ownership import (
    BucketEventsReader,
    OwnershipGuard,
    ResourceKind,
    ResourceRef,
    shared_bus_sources,
    spec_resources,
)


def admission_errors(spec: JobSpec, guard: OwnershipGuard | None, egress: AddressPolicy | None) -> list[FieldError]:
    errors: list[FieldError] = []
    if guard is not None:
        for resource in spec_resources(spec):
            refused = guard.visibly_foreign(resource, spec.team)
            if refused is not None:
                errors.append(FieldError(resource.field, "resource_not_owned", str(refused)))
        for field, source in shared_bus_sources(spec):
            reason = guard.source_refusal(source, spec.team)
            if reason is not None:
                errors.append(FieldError(field, "source_not_owned", reason))
    if egress is not None:
        for field, url in _urls(spec):
            try:
                parsed = parse_url(url)
            except UrlRefused as error:
                errors.append(FieldError(field, error.code, str(error)))
                continue
            address = parsed.literal_address
            reason = egress.refusal(parsed.host, address) if address is not None else None
            if reason is not None:
                errors.append(FieldError(field, "address_not_allowed", f"'{url}': {reason}; use a public address"))
    return errors


def admission_warnings(spec: JobSpec, guard: OwnershipGuard | None) -> list[FieldError]:
    """What the job names that cannot work yet, though it may later (a bucket or topic created after the job):
    accepted, and said in PUT's answer and by `jobsched apply`, never silent (#46)."""
    if guard is None:
        return []
    warnings: list[FieldError] = []
    for resource in spec_resources(spec):
        if resource.kind is ResourceKind.BUCKET and _listens(resource.field):
            warnings += _bucket_warnings(resource, spec.team, guard)
        elif resource.kind is ResourceKind.TOPIC and not guard.exists(resource, spec.team):
            message = (
                f"topic {resource.name} does not exist or team {spec.team} cannot see it: pages go to the"
                " deployment's own topic until it does"
            )
            warnings.append(FieldError(resource.field, "topic_not_found", message))
    return warnings


def _listens(field: str) -> bool:
    """A bucket whose events the job waits for (an s3 trigger, a wait), not one it only reads (a map)."""
    return field.startswith("triggers[") or field.endswith(".s3")


def _bucket_warnings(resource: ResourceRef, team: str, guard: OwnershipGuard) -> list[FieldError]:
    what = "the trigger never fires" if resource.field.startswith("triggers[") else "the wait is met only by polls"
    if not guard.exists(resource, team):
        message = (
            f"bucket {resource.name} does not exist or team {team} cannot see it: {what} until it exists, is tagged"
            f" {OWNER_TAG}={team} and sends its events to EventBridge"
        )
        return [FieldError(resource.field, "bucket_not_found", message)]
    reader = guard.reader
    if isinstance(reader, BucketEventsReader) and reader.bucket_sends_events(team, resource.name) is False:
        message = (
            f"bucket {resource.name} does not send its events to EventBridge: {what}; turn it on with"
            f" aws s3api put-bucket-notification-configuration --bucket {resource.name}"
            """ --notification-configuration '{"EventBridgeConfiguration": {}}'"""
        )
        return [FieldError(resource.field, "bucket_events_off", message)]
    return []


def priority_errors(spec: JobSpec, granted: tuple[str, ...]) -> list[FieldError]:
    """Priority classes are the platform's to grant: a team picking "high" for itself would starve the others."""
    if spec.priority in granted:
        return []
    message = (
        f"team {spec.team} may use priority {', '.join(granted)}; "
        f"'{spec.priority}' is granted by a platform admin (membership \"priorities\")"
    )
    return [FieldError("priority", "priority_not_granted", message)]


def schedule_cost_errors(spec: JobSpec, now: datetime, company: CompanySettings) -> list[FieldError]:
    """A schedule whose next fire costs unbounded work would stall the dispatcher for every team (with the company
    calendar it names and the maintenance windows that apply to it), or names a company entry not defined."""
    missing = company.missing(spec)
    if missing:
        return [company_reference_error(company, path, reference) for path, reference in missing]
    errors = []
    for index, schedule in enumerate(company.effective(spec)):
        problem = schedule_cost_problem(schedule, hash_key=spec.key, now=now)
        if problem:
            errors.append(FieldError("schedule" if index == 0 else f"schedules[{index - 1}]", "schedule_too_expensive",
                                     problem))  # fmt: skip
    return errors


def _urls(spec: JobSpec) -> Iterator[tuple[str, str]]:
    for path, target in spec.targets():
        if isinstance(target, HttpTarget):
            yield f"{path}.url", target.url
    if spec.escalation is not None:
        if spec.escalation.webhook:
            yield "escalation.webhook", spec.escalation.webhook
        if spec.escalation.secondary is not None and spec.escalation.secondary.webhook:
            yield "escalation.secondary.webhook", spec.escalation.secondary.webhook
