"""Registering and changing jobs: computes dispatch state from the spec and stores it with the change."""

from __future__ import annotations

from datetime import datetime

from jobsched.core.errors import WorkflowsNotConfigured
from jobsched.core.records import JobNotFound, StoredJob, VersionConflict
from jobsched.core.spec import JobSpec
from jobsched.ports import DagDeploymentPort, JobsPort, RegistryPort
from jobsched.schedule.fires import first_fire, next_fire
from jobsched.tenancy.quotas import QuotaExceeded


def put_job(
    store: RegistryPort,
    spec: JobSpec,
    *,
    now: datetime,
    principal: str,
    expected_version: int | None = None,
    dags: DagDeploymentPort | None = None,
    action: str = "replace",
    reason: str | None = None,
) -> tuple[StoredJob, bool]:
    """Create or replace; returns (stored job, created). ``expected_version`` guards a replace.

    A DAG job's state machine is deployed first, so no stored DAG job lacks one. If the store write then
    loses a race, the winner's definition is deployed again.
    """
    current = store.get(spec.key)
    if current is None and expected_version is not None:
        raise VersionConflict(f"{spec.key} does not exist (expected version {expected_version})")
    if current is not None and expected_version is not None and current.version != expected_version:
        raise VersionConflict(f"{spec.key} is at version {current.version}, not {expected_version}")
    if current is None:
        # Counted, not reserved: concurrent creates may pass the limit by as many as race (the API's
        # rate and concurrency bound that), and a deleted job frees its place at once.
        limit = store.team_limits(spec.team).max_jobs
        if store.count_team_jobs(spec.team, at_least=limit) >= limit:
            raise QuotaExceeded("max_jobs", f"team {spec.team} has {limit} jobs, its max_jobs; delete one first")
    if spec.dag is not None:
        if dags is None:
            raise WorkflowsNotConfigured("this deployment cannot run DAG jobs: Step Functions is not configured")
        dags.deploy(spec)
    try:
        return _store_job(store, spec, current, now=now, principal=principal, action=action, reason=reason)
    except Exception:
        winner = store.get(spec.key)
        if dags is not None and winner is not None and winner.spec.dag is not None:
            dags.deploy(winner.spec)
        raise


def delete_job(
    store: RegistryPort, stored: StoredJob, *, now: datetime, principal: str, dags: DagDeploymentPort | None
) -> None:
    store.delete(stored, now=now, principal=principal)
    store.drop_incidents(stored.key)
    if stored.spec.dag is not None and dags is not None:
        dags.remove(stored.key)


def _store_job(
    store: RegistryPort,
    spec: JobSpec,
    current: StoredJob | None,
    *,
    now: datetime,
    principal: str,
    action: str = "replace",
    reason: str | None = None,
) -> tuple[StoredJob, bool]:
    if current is None:
        stored = store.create(
            spec,
            now=now,
            principal=principal,
            cursor=now,
            next_visit_at=first_fire(spec, registered_at=now, after=now),
        )
        return stored, True
    # Dispatch restarts now under the new version: instants already sent under the old one are dropped by
    # the worker (version check) and sent again if the new schedule still has them (same run ids).
    state = store.get_state(spec.key)
    cursor = min(state.cursor, now) if state is not None else now
    next_fire = first_fire(spec, registered_at=current.created_at, after=cursor) if current.state == "ACTIVE" else None
    stored = store.replace(
        current,
        spec,
        now=now,
        principal=principal,
        cursor=cursor,
        next_visit_at=next_fire,
        action=action,
        reason=reason,
    )
    return stored, False


def pause_job(store: JobsPort, job: str, *, now: datetime, principal: str, reason: str) -> StoredJob:
    current = _existing(store, job)
    if current.state == "PAUSED":
        return current
    return store.set_state(
        current, "PAUSED", now=now, principal=principal, reason=reason, cursor=now, next_visit_at=None
    )


def resume_job(store: JobsPort, job: str, *, now: datetime, principal: str) -> StoredJob:
    """Instants that fell while paused are not run: pausing means not running."""
    current = _existing(store, job)
    if current.state == "ACTIVE":
        return current
    return store.set_state(
        current, "ACTIVE", now=now, principal=principal, reason=None, cursor=now, next_visit_at=next_fire(current, now)
    )


def _existing(store: JobsPort, job: str) -> StoredJob:
    current = store.get(job)
    if current is None:
        raise JobNotFound(job)
    return current
