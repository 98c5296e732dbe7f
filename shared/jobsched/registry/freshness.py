"""A job's freshness as the registry keeps it: started when a policy is set, its next judgement moved when the
policy changes (a job already judged keeps its last success and state), dropped with the policy or the job; and
the job's line on its team's freshness board (``pipeline.freshness`` keeps both afterwards)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from jobsched.core.freshness import FreshnessPolicy, FreshnessState, policy_of, started
from jobsched.core.runs import instant_text
from jobsched.core.spec import JobSpec
from jobsched.ports import HealthPort

ATTEMPTS = 5  # conditional writes lost to a racing success or judgement before giving up


def board_view(policy: FreshnessPolicy, state: FreshnessState, *, changed_at: datetime) -> dict[str, str]:
    """A job's line on its team's freshness board: written when its state changes, not at every success (the
    job's own view has its last success)."""
    view = {"state": state.state.value, "policy": policy.describe(), "since": instant_text(changed_at)}
    if state.stale_since is not None:
        view["since"] = instant_text(state.stale_since)
    if state.reason:
        view["reason"] = state.reason
    return view


def policy_changed(jobs: HealthPort, spec: JobSpec, before: JobSpec | None, *, now: datetime) -> None:
    """The registry stored ``spec``: start, move or drop its freshness (a job already judged keeps its last
    success and state; its next judgement follows the new policy)."""
    policy, previous = policy_of(spec), policy_of(before) if before is not None else None
    if policy == previous:
        return
    if policy is None:
        jobs.drop_freshness(spec.key)
        jobs.note_team_freshness(spec.team, spec.name, None)
        return
    for _ in range(ATTEMPTS):
        health = jobs.health(spec.key)
        current = health.freshness
        if current is None:
            state = started(policy, now)
        else:
            moved = policy.next_deadline(now) if policy.deadline is not None else None
            expiry = (current.last_success_at or current.since) + policy.max_age
            state = replace(current, check_at=moved if moved is not None else max(expiry, now))
        if jobs.put_health(spec.key, freshness=state, version=health.version):
            jobs.note_team_freshness(spec.team, spec.name, board_view(policy, state, changed_at=now))
            return


def policy_dropped(jobs: HealthPort, spec: JobSpec) -> None:
    if spec.freshness is not None:
        jobs.drop_freshness(spec.key)
        jobs.note_team_freshness(spec.team, spec.name, None)
