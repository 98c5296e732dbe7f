"""Claiming a run's attempt: the job's and the team's slots, then the conditional write that admits one claimer.

"Claim" means this one thing in the code: taking the right to execute one attempt (of a run here, of a DAG
task in ``dag_tasks``), by a conditional write whose condition is the attempt before it.

Order of writes, and what a crash between them leaves:
1. job slot (and team slot), holder = run id: a crash here leaves a slot that expires with its lease;
2. the claim: a conditional create RUNNING for a first attempt, else ``RunsPort.claim_attempt`` from the
   state the message expects (SCHEDULED, RETRYING, MISSED-as-lost, or RUNNING with an expired lease).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from jobsched.core.names import JobsKeys
from jobsched.core.outcome import Outcome
from jobsched.core.records import AttemptClaim, Run, StaleAttempt, StoredJob
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.pipeline.containers import stop_started_task
from jobsched.pipeline.decisions import claim_transition, is_external, lease_until, overlap_policy
from jobsched.ports import ContainersPort, JobsPort, RunsPort

WAIT_WHEN_FULL = timedelta(seconds=30)  # the longest a message for a job or team at max_running waits to look again
# Slots usually free within seconds (most runs are short): a run that found them full looks again after 1 s, 1 s,
# 2 s, 4 s... up to WAIT_WHEN_FULL, so the 21st run of a team limited to 20 starts about a second after a slot
# frees, not 30 s later, and a long wait still costs a delivery only every 30 s.
SLOT_WAITS = (1, 1, 2, 4, 8, 16)


def slot_wait(waits: int) -> timedelta:
    """How long a run that found its slots full ``waits`` times before waits now."""
    return timedelta(seconds=SLOT_WAITS[waits]) if waits < len(SLOT_WAITS) else WAIT_WHEN_FULL


def waiting_for_slots(message: RunMessage, detail: str) -> Outcome:
    again = message.model_copy(update={"slot_waits": message.slot_waits + 1})
    return Outcome("waiting", detail, wait=slot_wait(message.slot_waits), resend=again)


@dataclass(frozen=True)
class SkipRun:
    """The job's overlap policy is ``skip`` and a run holds its slot: this run is recorded SKIPPED."""

    reason: str


@dataclass(frozen=True)
class NotClaimed:
    """The run exists in a state this message cannot claim: a duplicate, a crash to recover, a retry to resend."""

    existing: Run


@dataclass
class Claims:
    jobs: JobsPort
    runs: RunsPort
    containers: ContainersPort | None = None  # a replaced container run's task is stopped, not left running

    # -------------------------------------------------------------------------------- slots

    def take_slots(self, message: RunMessage, stored: StoredJob, now: datetime) -> Outcome | SkipRun | None:
        """The job's slot (max_running, by its overlap policy) and the team's: None when both are held."""
        spec = stored.spec
        lease = lease_until(spec, now)
        limit = spec.concurrency.max_running
        ended = partial(self.ended_runs, job=message.job)
        taken = self.jobs.acquire_slot(
            message.job, JobsKeys.STATE, holder=message.run_id, lease_until=lease, limit=limit, now=now, ended=ended
        )
        if not taken.acquired:
            policy = overlap_policy(message, spec)
            others = ", ".join(sorted(taken.holders)) or "?"
            if policy == "skip":
                return SkipRun(f"overlap: skip (still running: {others})")
            if policy == "replace":
                self._cancel_holders(message.job, taken.holders, now)
                taken = self.jobs.acquire_slot(
                    message.job,
                    JobsKeys.STATE,
                    holder=message.run_id,
                    lease_until=lease,
                    limit=limit,
                    now=now,
                    ended=ended,
                )
            if not taken.acquired:
                return waiting_for_slots(message, f"max_running {limit} reached ({others})")
        # The team's share: one team's backlog or hung target holds at most max_running of the workers.
        quota = self.jobs.team_limits(spec.team).max_running
        team = self.jobs.acquire_slot(
            f"{JobsKeys.TEAM_PREFIX}{spec.team}",
            JobsKeys.QUOTA,
            holder=f"{message.job}/{message.run_id}",
            lease_until=lease,
            limit=quota,
            now=now,
            ended=self.ended_runs,
        )
        if not team.acquired:
            self.jobs.release_slot(message.job, JobsKeys.STATE, holder=message.run_id)
            return waiting_for_slots(message, f"team {spec.team} max_running {quota} reached")
        return None

    def ended_runs(self, holders: list[str], *, job: str | None = None) -> set[str]:
        """Which slot holders' runs have ended (slots are released lazily, see ``JobsPort.acquire_slot``).
        A job's slots are held by run ids; a team's by ``<team>/<name>/<run id>``."""
        keys = {holder: (job, holder) if job else tuple(holder.rsplit("/", 1)) for holder in holders}
        ended = self.runs.ended({(key[0], key[1]) for key in keys.values()})
        return {holder for holder, key in keys.items() if key in ended}

    def _cancel_holders(self, job: str, holders: dict[str, str], now: datetime) -> None:
        """overlap: replace: the running runs are cancelled (their late results will be refused)."""
        for run_id in holders:
            run = self.runs.get(job, run_id)
            if run is not None and run.status in (RunStatus.RUNNING, RunStatus.RETRYING):
                with contextlib.suppress(StaleAttempt):
                    self.runs.finish(
                        job,
                        run_id,
                        attempt=run.attempt,
                        status=RunStatus.CANCELLED,
                        now=now,
                        error="replaced by a newer run (overlap: replace)",
                        from_status=run.status,
                    )
                    stop_started_task(self.containers, run, "jobsched: replaced by a newer run (overlap: replace)")
            self.jobs.release_slot(job, JobsKeys.STATE, holder=run_id)

    # -------------------------------------------------------------------------------- the claim

    def claim(self, message: RunMessage, stored: StoredJob, now: datetime) -> Run | NotClaimed | Outcome:
        """The run RUNNING at the message's attempt, claimed by this call; or the run as it stands when another
        claimer (or an earlier delivery) got there first; or an outcome when there is no run to claim."""
        spec = stored.spec
        lease = lease_until(spec, now)
        external = is_external(spec)
        if message.attempt == 1:
            created = self.runs.create(
                message,
                status=RunStatus.RUNNING,
                now=now,
                retention=spec.run_retention,
                lease_until=lease,
                external=external,
                deadline=spec.deadline,
            )
            if created is not None:
                return created
        existing = self.runs.get(message.job, message.run_id)
        if existing is None:
            return Outcome("duplicate", "run vanished (retention expired)")
        transition = claim_transition(existing, message)
        try:
            if transition == "first":  # created SCHEDULED while it waited, or MISSED by the lost-message audit
                waited = int((now - parse_instant(message.fire_at)).total_seconds() * 1000)
                claim = AttemptClaim(1, existing.status, 1, now, lease, external, lateness_ms=waited)
                return self.runs.claim_attempt(existing.job, existing.run_id, claim)
            if transition == "retry":
                claim = AttemptClaim(message.attempt, RunStatus.RETRYING, existing.attempt, now, lease, external)
                return self.runs.claim_attempt(existing.job, existing.run_id, claim)
        except StaleAttempt:
            existing = self.runs.get(message.job, message.run_id) or existing
        return NotClaimed(existing)
