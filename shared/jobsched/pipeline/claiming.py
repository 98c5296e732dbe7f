"""Claiming a run's attempt: the job's and the team's slots, then the conditional write that admits one claimer.

"Claim" means this one thing in the code: taking the right to execute one attempt (of a run here, of a DAG
task in ``pipeline.dag``), by a conditional write whose condition is the attempt before it.

Order of writes, and what a crash between them leaves:
1. job slot (and team slot), holder = run id: a crash here leaves a slot that expires with its lease;
2. the claim: a conditional create RUNNING for a first attempt, else ``RunsPort.claim_attempt`` from the
   state the message expects (SCHEDULED, RETRYING, MISSED-as-lost, or RUNNING with an expired lease).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from jobsched.core.names import JobsKeys
from jobsched.core.outcome import Outcome
from jobsched.core.records import SlotLease, StoredJob, live_by_lease
from jobsched.core.run_records import AttemptClaim, Run, StaleAttempt
from jobsched.core.runs import RunMessage, RunStatus, parse_instant
from jobsched.pipeline.containers import stop_started_task
from jobsched.pipeline.decisions import claim_transition, is_external, lease_until, overlap_policy
from jobsched.pipeline.lifecycle import Change, StateChange
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


def team_holder(message: RunMessage) -> str:
    """Who holds a team slot for a run: ``<team>/<name>/<run id>`` (``ended_runs`` splits it back)."""
    return f"{message.job}/{message.run_id}"


def _holders_to_evict(
    runs: list[tuple[RunMessage, StoredJob]], job_slots: dict[str, dict[str, str]], now: datetime
) -> dict[str, str]:
    """The job slot holders whose ends the runs' job slots will ask for (as ``<job>/<run id>``: a team holder's
    form): where a job's slots are full, as many as a new run is short of, in the judgement's own order
    (``live_by_lease``)."""
    wanted: dict[str, str] = {}
    for message, stored in runs:
        holders = job_slots.get(message.job) or {}
        live = live_by_lease(holders, now)
        short = len(live) + 1 - stored.spec.concurrency.max_running
        if message.run_id in holders or short <= 0:
            continue
        wanted |= {f"{message.job}/{holder}": holders[holder] for holder in live[:short]}
    return wanted


def _run_key(holder: str) -> tuple[str, str]:
    job, _, run_id = holder.rpartition("/")
    return job, run_id


@dataclass
class TeamSlots:
    """The team slots a worker batch took for its runs, one write per team instead of one per run.

    A run that reaches its claim takes its slot from here (``use``); the slots of runs that did not (they had
    to wait for their job's slot, or were duplicates) are released when the batch ends, in one write per team.
    A crash before that leaves them to expire with their lease, as a crash between a run's slot and its claim
    always has."""

    granted: dict[str, list[str]] = field(default_factory=dict)  # team -> holders this batch's write took
    used: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)  # teams some of whose runs found no slot: runs wait behind

    def use(self, team: str, holder: str) -> bool:
        if holder not in self.granted.get(team, ()):
            return False
        self.used.add(holder)  # a set's add is atomic: records of a batch run on threads
        return True

    def unused(self) -> dict[str, list[str]]:
        left = {team: [h for h in holders if h not in self.used] for team, holders in self.granted.items()}
        return {team: holders for team, holders in left.items() if holders}


@dataclass(frozen=True)
class SlotsHeld:
    """Both slots are held. ``crowded``: runs of its team were refused a slot in its batch, so they wait behind
    it: when it ends it wakes the next (``Records.wake_next``). (Slots are released lazily, so a full slots map
    does not say that anyone waits: it is full of ended runs most of the time.)"""

    crowded: bool


@dataclass(frozen=True)
class SkipRun:
    """The job's overlap policy is ``skip`` and a run holds its slot: this run is recorded SKIPPED."""

    reason: str


@dataclass(frozen=True)
class NotClaimed:
    """The run exists in a state this message cannot claim: a duplicate, a crash to recover, a retry to resend."""

    existing: Run


class ProvenEnds:
    """Runs this process found ended, or ended itself: (job, run id) -> the highest attempt an end was proven at.
    A fact for good: an end at an attempt ends every slot holding at that attempt or before, and a rerun's holding
    names a later attempt. At most ``limit`` runs, the least recently proven forgotten (a forgotten end is read
    again)."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self._ends: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()  # a batch's records run on threads

    def covers(self, key: tuple[str, str], attempt: int) -> bool:
        with self._lock:
            return self._ends.get(key, 0) >= attempt

    def add(self, key: tuple[str, str], attempt: int) -> None:
        with self._lock:
            self._ends[key] = max(self._ends.pop(key, 0), attempt)
            while len(self._ends) > self.limit:
                self._ends.popitem(last=False)

    def heard(self, change: StateChange) -> None:
        """A lifecycle subscriber: a run this process's write ended is proven ended at its attempt, so the job's
        next run here frees its slot without reading its record (half a read unit: a minutely job's every run,
        whose run before still holds the slot by its lease; an hourly one's has usually outlived it).
        Not a MISSED run (the audit's ``lost:`` may still be claimed at the same attempt, as ``RunsPort.ended``
        proves nothing by it either)."""
        run = change.run
        ended = change.change is Change.FINISHED and change.task is None
        if ended and run is not None and run.status is not RunStatus.MISSED:
            self.add((run.job, run.run_id), run.attempt)


@dataclass
class Claims:
    jobs: JobsPort
    runs: RunsPort
    containers: ContainersPort | None = None  # a replaced container run's task is stopped, not left running
    proven: ProvenEnds = field(default_factory=ProvenEnds)

    # -------------------------------------------------------------------------------- slots

    def take_team_slots(
        self,
        runs: list[tuple[RunMessage, StoredJob]],
        now: datetime,
        job_slots: dict[str, dict[str, str]] | None = None,
    ) -> TeamSlots:
        """The team slots of a batch's runs that are ready to claim, earliest first, as many as the team has
        room for: one write per team with two or more such runs (a lone run takes its own, nothing saved).
        ``job_slots``: their jobs' slot holders as the batch read them: the ends the runs' job slots will ask
        for are read first, in one request, and the team's judgement and each job's reuse them (``ProvenEnds``)."""
        by_team: dict[str, dict[str, SlotLease]] = {}
        per_job: dict[str, int] = {}
        for message, stored in sorted(runs, key=lambda run: run[0].fire_at):
            # No more than the job's own max_running: the rest would wait for the job's slot holding the team's.
            per_job[message.job] = per_job.get(message.job, 0) + 1
            if per_job[message.job] <= stored.spec.concurrency.max_running:
                lease = SlotLease(lease_until(stored.spec, now), message.attempt)
                by_team.setdefault(stored.spec.team, {})[team_holder(message)] = lease
        slots = TeamSlots()
        ended = self.ended_runs
        if job_slots:
            holders = _holders_to_evict(runs, job_slots, now)
            if holders:
                ended(holders)
        for team, leases in by_team.items():
            if len(leases) < 2:
                continue
            quota = self.jobs.team_limits(team).max_running
            key = f"{JobsKeys.TEAM_PREFIX}{team}"
            taken = self.jobs.acquire_slots(key, JobsKeys.QUOTA, leases=leases, limit=quota, now=now, ended=ended)
            slots.granted[team] = taken.added
            if len(taken.granted) < len(leases):
                slots.refused.add(team)
        return slots

    def release_team_slots(self, slots: TeamSlots) -> None:
        """The slots a batch took for runs that did not claim (see ``TeamSlots``)."""
        for team, holders in slots.unused().items():
            self.jobs.release_slots(f"{JobsKeys.TEAM_PREFIX}{team}", JobsKeys.QUOTA, holders=holders)

    def take_slots(
        self,
        message: RunMessage,
        stored: StoredJob,
        now: datetime,
        team_slots: TeamSlots | None = None,
        *,
        read: dict[str, str] | None = None,
    ) -> Outcome | SkipRun | SlotsHeld:
        """The job's slot (max_running, by its overlap policy) and the team's (from the batch's ``team_slots``
        when it took one for this run). ``read``: the job's slot holders as its batch read them."""
        spec = stored.spec
        lease = lease_until(spec, now)
        limit = spec.concurrency.max_running
        ended = partial(self.ended_runs, job=message.job)
        take = partial(
            self.jobs.acquire_slot,
            message.job,
            JobsKeys.STATE,
            holder=message.run_id,
            lease_until=lease,
            limit=limit,
            now=now,
            ended=ended,
            attempt=message.attempt,
        )
        taken = take(read=read)
        if not taken.acquired:
            policy = overlap_policy(message, spec)
            others = ", ".join(sorted(taken.holders)) or "?"
            if policy == "skip":
                return SkipRun(f"overlap: skip (still running: {others})")
            if policy == "replace":
                self._cancel_holders(message.job, taken.holders, now)
                taken = take()
            if not taken.acquired:
                return waiting_for_slots(message, f"max_running {limit} reached ({others})")
        # The team's share: one team's backlog or hung target holds at most max_running of the workers.
        if team_slots is not None and team_slots.use(spec.team, team_holder(message)):
            return SlotsHeld(spec.team in team_slots.refused)
        quota = self.jobs.team_limits(spec.team).max_running
        team = self.jobs.acquire_slot(
            f"{JobsKeys.TEAM_PREFIX}{spec.team}",
            JobsKeys.QUOTA,
            holder=team_holder(message),
            lease_until=lease,
            limit=quota,
            now=now,
            ended=self.ended_runs,
            attempt=message.attempt,
        )
        if not team.acquired:
            if team_slots is not None:
                team_slots.refused.add(spec.team)
            self.jobs.release_slot(message.job, JobsKeys.STATE, holder=message.run_id)
            return waiting_for_slots(message, f"team {spec.team} max_running {quota} reached")
        return SlotsHeld(team_slots is not None and spec.team in team_slots.refused)

    def ended_runs(self, holders: dict[str, str], *, job: str | None = None) -> set[str]:
        """Which slot holders' runs have ended (slots are released lazily, see ``JobsPort.acquire_slot``), from
        the holders and their slots' values (the attempt each names). A job's slots are held by run ids; a
        team's by ``<team>/<name>/<run id>``. An end this process proved already is not read again
        (``ProvenEnds``): a run's end is asked for by its job's next run and by its team's, usually apart."""
        keys = {holder: (job, holder) if job else _run_key(holder) for holder in holders}
        asked = {keys[holder]: SlotLease.parse(value).attempt for holder, value in holders.items()}
        settled = {key for key, attempt in asked.items() if attempt is not None and self.proven.covers(key, attempt)}
        unsettled = {key: attempt for key, attempt in asked.items() if key not in settled}
        ended = self.runs.ended(unsettled) if unsettled else {}
        for key, proof in ended.items():
            if proof is not None:  # the attempt the run ended at: a MISSED run's may still be claimed at it
                self.proven.add(key, proof)
        return {holder for holder, key in keys.items() if key in ended or key in settled}

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
