"""Keeping each job's freshness (``core.freshness``): set when its policy is (the registry), moved by its
successes (the lifecycle), judged when due (the heartbeat checker, from the sparse freshness index).

Every change of the state is one conditional write on the job's health item (its version): a success and a
judgement that race are ordered, the loser reads again and judges what the winner wrote. A judgement counts once
in the tier's budget (the write that made it is the one that counts), a job that goes stale is paged by its tier
through the escalation path (``job_stale``), and one made fresh again resolves it (``job_fresh``). The team's
freshness board (one item a team) changes with the state, so a team's page reads one item.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from jobsched.core.baseline import Baseline
from jobsched.core.freshness import (
    FreshnessPolicy,
    FreshnessState,
    Judgement,
    judge,
    policy_of,
    started,
    succeeded,
)
from jobsched.core.names import LEASE_SHARDS
from jobsched.core.runs import instant_text
from jobsched.core.slo import FRESHNESS_JUDGED, FRESHNESS_STALE
from jobsched.core.spec import JobSpec
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.ports import HealthPort, JobsPort, SloLedgerPort
from jobsched.registry.freshness import ATTEMPTS, board_view, policy_changed
from jobsched.watch.signals import emit


class FreshnessJobs(JobsPort, HealthPort, SloLedgerPort, Protocol):
    """The jobs store as freshness uses it: specs, health items, the ledger."""


@dataclass
class FreshnessKeeper:
    jobs: FreshnessJobs
    publish: Callable[[EscalationEvent], None]

    def succeeded(
        self, spec: JobSpec, finished_at: datetime, now: datetime, *, baseline: Baseline | None = None
    ) -> None:
        """A run of ``spec``'s job succeeded at ``finished_at``; ``baseline``: written in the same write."""
        policy = policy_of(spec)
        if policy is None:
            if baseline is not None:
                self.jobs.put_health(spec.key, baseline=baseline)
            return
        for _ in range(ATTEMPTS):
            health = self.jobs.health(spec.key)
            current = health.freshness or started(policy, now)
            judgement = succeeded(policy, current, finished_at, now)
            if judgement.state == health.freshness and baseline is None:
                return
            if self.jobs.put_health(spec.key, freshness=judgement.state, version=health.version, baseline=baseline):
                self._announce(spec, policy, current, judgement, now)
                return
        raise RuntimeError(f"{spec.key}: freshness kept changing under {ATTEMPTS} writes")  # the message returns

    def check(self, now: datetime) -> int:
        """Judge every job whose judgement is due; the number found stale."""
        stale = 0
        for shard in range(LEASE_SHARDS):
            for job in self.jobs.freshness_due(shard, now):
                stale += self._judge(job, now)
        return stale

    def _judge(self, job: str, now: datetime) -> int:
        stored = self.jobs.get(job, consistent=False)
        policy = policy_of(stored.spec) if stored is not None else None
        if stored is None or policy is None:
            self.jobs.drop_freshness(job)  # a deleted job's, or a dropped policy's: off the index
            return 0
        spec = stored.spec
        for _ in range(ATTEMPTS):
            health = self.jobs.health(job)
            current = health.freshness
            if current is None:
                policy_changed(self.jobs, spec, None, now=now)
                return 0
            judgement = judge(policy, current, now)
            if judgement.state == current:
                return 0  # not due (the index is eventually consistent) or judged by another checker
            if not self.jobs.put_health(job, freshness=judgement.state, version=health.version):
                continue
            if judgement.counted:
                count = FRESHNESS_STALE if judgement.stale else FRESHNESS_JUDGED
                day = (current.check_at or now).date()
                self.jobs.count_run(spec.team, spec.tier, day, count, job=spec.key)
                self.jobs.note_team_day(spec.team, day)
                emit("TierRunsEnded", 1, tier=spec.tier, outcome="bad" if judgement.stale else "good")
            self._announce(spec, policy, current, judgement, now)
            return int(judgement.stale)
        return 0

    def _announce(
        self, spec: JobSpec, policy: FreshnessPolicy, before: FreshnessState, judgement: Judgement, now: datetime
    ) -> None:
        state = judgement.state
        about = {"subject": spec.key, "occurred_at": instant_text(now), "team": spec.team, "job": spec.key}
        if judgement.became_stale:
            due = instant_text(before.check_at or now)  # one event per judgement: its id names the instant judged
            detail = f"freshness: {policy.describe()}"
            self.publish(
                EscalationEvent(kind="job_stale", scheduled_at=due, error=state.reason, detail=detail, **about)
            )
        elif judgement.became_fresh:
            detail = f"succeeded at {instant_text(state.last_success_at or now)}"
            self.publish(EscalationEvent(kind="job_fresh", detail=detail, **about))
        if state.state != before.state or judgement.became_stale:
            self.jobs.note_team_freshness(spec.team, spec.name, board_view(policy, state, changed_at=now))
