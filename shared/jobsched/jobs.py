"""Registering and changing jobs: computes dispatch state from the spec and stores it with the change."""

from __future__ import annotations

from datetime import datetime

from jobsched.aws.jobs_store import JobNotFound, JobsStore, StoredJob, VersionConflict
from jobsched.runs import parse_instant
from jobsched.schedule.engine import compile_schedule
from jobsched.spec import JobSpec


def first_fire_after(spec: JobSpec, *, created_at: datetime, after: datetime) -> datetime | None:
    if spec.schedule is None:
        return None
    upcoming = compile_schedule(spec.schedule, hash_key=spec.key, anchor=created_at).next_fires(after, 1)
    return upcoming[0].at if upcoming else None


class Unsupported(ValueError):
    """A valid spec this deployment cannot run yet."""


def put_job(
    store: JobsStore, spec: JobSpec, *, now: datetime, principal: str, expected_version: int | None = None
) -> tuple[StoredJob, bool]:
    """Create or replace; returns (stored job, created). ``expected_version`` guards a replace."""
    if spec.dag is not None:
        # Validated today; registering waits for the Step Functions compiler (issue #7) so that no DAG
        # job is accepted that nothing can run.
        raise Unsupported("DAG jobs can be validated but not yet registered (issue #7)")
    current = store.get(spec.key)
    if current is None:
        if expected_version is not None:
            raise VersionConflict(f"{spec.key} does not exist (expected version {expected_version})")
        stored = store.create(
            spec,
            now=now,
            principal=principal,
            cursor=now,
            next_fire_at=first_fire_after(spec, created_at=now, after=now),
        )
        return stored, True
    if expected_version is not None and current.version != expected_version:
        raise VersionConflict(f"{spec.key} is at version {current.version}, not {expected_version}")
    # Dispatch restarts now under the new version: instants already sent under the old one are dropped by
    # the worker (version check) and sent again if the new schedule still has them (same run ids).
    state = store.get_state(spec.key) or {}
    old_cursor = parse_instant(state["cursor"]) if state.get("cursor") else now
    cursor = min(old_cursor, now)
    next_fire = (
        first_fire_after(spec, created_at=current.created_at, after=cursor) if current.state == "ACTIVE" else None
    )
    stored = store.replace(current, spec, now=now, principal=principal, cursor=cursor, next_fire_at=next_fire)
    return stored, False


def pause_job(store: JobsStore, job: str, *, now: datetime, principal: str, reason: str) -> StoredJob:
    current = _existing(store, job)
    if current.state == "PAUSED":
        return current
    return store.set_state(
        current, "PAUSED", now=now, principal=principal, reason=reason, cursor=now, next_fire_at=None
    )


def resume_job(store: JobsStore, job: str, *, now: datetime, principal: str) -> StoredJob:
    """Instants that fell while paused are not run: pausing means not running."""
    current = _existing(store, job)
    if current.state == "ACTIVE":
        return current
    next_fire = first_fire_after(current.spec, created_at=current.created_at, after=now)
    return store.set_state(
        current, "ACTIVE", now=now, principal=principal, reason=None, cursor=now, next_fire_at=next_fire
    )


def _existing(store: JobsStore, job: str) -> StoredJob:
    current = store.get(job)
    if current is None:
        raise JobNotFound(job)
    return current
