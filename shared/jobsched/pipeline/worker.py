"""The worker: one run message in, at most one execution per (run, attempt) out.

It walks a run message through three rooms, each with its own module:
1. ``claiming``: the job's and team's slots, then the conditional write that claims the attempt;
2. ``attempts``: the target's circuit, the claim, the execution and the circuit's count (shared with DAG tasks);
3. ``recording``: the result stored conditional on the attempt (the fencing token), a retry sent, a page raised.
Each module's docstring gives its order of writes and what a crash between them leaves. The message is deleted
only after the outcome is stored; until then SQS brings it back. A message that must wait is sent again with a
delay (a fresh message, so waiting never counts towards the dead-letter limit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import JsonValue

from jobsched.core.errors import WorkflowsNotConfigured
from jobsched.core.event_batches import batch_named, batch_payload, run_events_path
from jobsched.core.messages import AuditMessage, CallbackResult, DagTaskFailure, DagTaskMessage, WorkMessage
from jobsched.core.outcome import Action, Outcome
from jobsched.core.records import BreakerState, JobsSnapshot, StoredJob
from jobsched.core.run_records import Run, RunContext, StaleAttempt, TargetResult
from jobsched.core.runs import TERMINAL, RunMessage, RunStatus, parse_instant
from jobsched.core.spec import CONTAINER_TARGETS, JobSpec
from jobsched.paging.escalation_events import Alerts
from jobsched.pipeline.attempts import Attempts, Executed, Held
from jobsched.pipeline.claiming import Claims, NotClaimed, ProvenEnds, SkipRun, TeamSlots
from jobsched.pipeline.dag.conductor import DagRuns
from jobsched.pipeline.decisions import already_settled, before_claim, on_existing
from jobsched.pipeline.ends import AttemptRef, Reported
from jobsched.pipeline.in_hand import drop_spec, hold_spec
from jobsched.pipeline.outside import OutsideEnds
from jobsched.pipeline.recording import Records
from jobsched.pipeline.run_ends import ENDED, RunEnds
from jobsched.pipeline.sent_audits import SentAudits
from jobsched.pipeline.spec_cache import SpecCache
from jobsched.pipeline.usage import UsageMeter, flush_held
from jobsched.pipeline.waiting import Met, Waits, WaitSignal
from jobsched.ports import (
    ContainersPort,
    DataChecksPort,
    EscalationsPort,
    EventBatchesPort,
    JobsPort,
    RunsPort,
    TargetsPort,
    TaskRunsPort,
    UsagePort,
    WaitersPort,
    WorkflowsPort,
    WorkQueuesPort,
)
from jobsched.watch.breaker import COOL_DOWN, FAILURES_TO_OPEN, Breakers, breaker_owner, target_key
from jobsched.watch.heartbeat import HeartbeatChecker

EARLY_TOLERANCE = timedelta(seconds=1)


@dataclass
class Crowding:
    """Whether runs may wait behind this one (``SlotsHeld.crowded``), learnt at its claim."""

    value: bool


@dataclass(frozen=True)
class WorkerBatch:
    """What the records of one delivered batch share (``Worker.start_batch``): its jobs' specs and STATE, its
    targets' breakers, and the team slots taken for its runs."""

    jobs: JobsSnapshot
    breakers: dict[str, BreakerState]
    team_slots: TeamSlots

    @property
    def specs(self) -> dict[str, StoredJob]:
        return self.jobs.specs


@dataclass
class Worker:
    jobs: JobsPort
    runs: RunsPort
    queues: WorkQueuesPort
    escalations: EscalationsPort
    targets: TargetsPort
    clock: Callable[[], datetime]
    # Hooks for crash-injection tests: called right after the named step.
    after_step: Callable[[str], None] = field(default=lambda step: None)
    workflows: WorkflowsPort | None = None  # DAG jobs run on Step Functions
    batches: EventBatchesPort | None = None  # batched triggers' events (the jobs store)
    checks: DataChecksPort | None = None  # wait_for's objects (the team's buckets)
    waiters: WaitersPort | None = None  # runs and tasks waiting for data (the jobs store)
    containers: ContainersPort | None = None  # container targets' tasks: described and stopped
    usage: UsagePort | None = None  # each attempt's usage, for the teams' chargeback (pipeline.usage)
    wait_signal: Callable[[WaitSignal, timedelta], None] = field(default=lambda kind, waited: None)
    breaker_failures: int = FAILURES_TO_OPEN  # consecutive failures of one target that open its circuit
    breaker_cool_down: timedelta = COOL_DOWN
    proven_ends: ProvenEnds = field(default_factory=ProvenEnds)  # slot holders' ends, for the process's life
    specs: SpecCache = field(default_factory=SpecCache)  # each job's spec at a version, for the process's life

    @property
    def alerts(self) -> Alerts:
        return Alerts(self.escalations, self.jobs, self.clock)

    @property
    def breakers(self) -> Breakers:
        # Built on use: tests tune breaker_failures on a running worker.
        return Breakers(self.jobs, self.alerts, self.clock, self.breaker_failures, self.breaker_cool_down)

    @property
    def claims(self) -> Claims:
        return Claims(self.jobs, self.runs, self.containers, self.proven_ends)

    @property
    def attempts(self) -> Attempts:
        return Attempts(self.targets, self.breakers, self.after_step)

    def _metered(self, spec: JobSpec, target: Any) -> Callable[[RunContext, TargetResult], None] | None:
        """What records an attempt's usage of ``target`` (None: this deployment keeps none)."""
        if self.usage is None:
            return None
        meter = UsageMeter(self.usage, self.clock, hold_for_end=True)  # ``process`` writes what is left held
        return lambda context, result: meter.attempt(spec, target, context, result)

    @property
    def records(self) -> Records:
        return Records(
            self.jobs,
            self.runs,
            self.queues,
            self.alerts,
            self.clock,
            self.after_step,
            stop_dag=lambda run, spec, cause: self.dags.ends.stop_execution(run, spec, cause),
        )

    @property
    def waits(self) -> Waits:
        if self.checks is None or self.waiters is None:
            raise WorkflowsNotConfigured("this worker has no data checks configured: jobs with wait_for cannot run")
        return Waits(self.jobs, self.waiters, self.runs, self.checks, self.alerts, self.wait_signal)

    @property
    def dags(self) -> DagRuns:
        if self.workflows is None:
            raise WorkflowsNotConfigured("this worker has no Step Functions access configured")
        if not isinstance(self.runs, TaskRunsPort):
            raise WorkflowsNotConfigured("this worker's run store keeps no DAG task records")
        return DagRuns(
            jobs=self.jobs,
            runs=self.runs,
            queues=self.queues,
            workflows=self.workflows,
            attempts=self.attempts,
            alerts=self.alerts,
            clock=self.clock,
            after_step=self.after_step,
            waits=self.waits if self.checks is not None and self.waiters is not None else None,
            objects=self.checks,
            meter=UsageMeter(self.usage, self.clock) if self.usage is not None else None,
        )

    def start_batch(self, messages: Sequence[WorkMessage | DagTaskFailure]) -> WorkerBatch:
        """What the records of one delivered batch share: their jobs' STATE items (slot holders, open incidents,
        spec versions), read in one request, and their specs by those versions (``batch_snapshot``); their targets'
        breakers, in another; and the team slots of the runs ready to claim, taken in one write per team
        (``Claims.take_team_slots``). Every read is eventually consistent, as the reads of one record were: the
        writes' conditions guard what they decide. The batch is ended by ``end_batch`` once every record is
        processed."""
        now = self.clock()
        runs = [message for message in messages if isinstance(message, RunMessage)]
        snapshot = self.batch_snapshot(runs)
        specs = snapshot.specs
        ready = [
            (message, specs[message.job])
            for message in runs
            if message.job in specs
            and parse_instant(message.fire_at) - now <= EARLY_TOLERANCE
            and before_claim(message, specs[message.job]) is None
            and not specs[message.job].spec.wait_for
        ]
        targets = [(stored.spec.target, breaker_owner(stored.spec)) for _, stored in ready if stored.spec.target]
        keys = sorted({key for target, owner in targets if (key := target_key(target, owner))})
        breakers = self.jobs.breakers(keys) if keys else {}
        team_slots = self.claims.take_team_slots(ready, now, snapshot.slots) if ready else TeamSlots()
        return WorkerBatch(snapshot, breakers, team_slots)

    def batch_snapshot(self, runs: list[RunMessage]) -> JobsSnapshot:
        """The runs' jobs' STATE items, and each job's spec at the version its STATE item names, from this
        process's ``SpecCache`` where it read that version before (half a read unit a run: a job's spec at a
        version never changes, ``pipeline.spec_cache``), else read at once. A STATE item names the version a
        change settled at, written after its spec: while a change is pending, the batch runs by the version
        before it, as the dispatcher planned by it, and a change is acknowledged only once its STATE item is
        written. A message naming a later version than the STATE item read (a stale read) asks for that one.
        A job without a STATE item (deleted, or its creation not settled) has no spec here: its record reads it."""
        if not runs:
            return JobsSnapshot({}, {}, {})
        snapshot = self.jobs.snapshot(sorted({message.job for message in runs}), specs=False)
        wanted = dict(snapshot.versions)
        for message in runs:
            if message.job in wanted:
                wanted[message.job] = max(wanted[message.job], message.spec_version)
        snapshot.specs.update(self.specs.specs(self.jobs, wanted))
        return snapshot

    def end_batch(self, batch: WorkerBatch) -> None:
        self.claims.release_team_slots(batch.team_slots)

    def process_batch(self, messages: Sequence[WorkMessage | DagTaskFailure]) -> list[Outcome]:
        """One delivered batch, its records one after another (the Lambda handler runs them on threads)."""
        batch = self.start_batch(messages)
        try:
            return [self.process_any(message, batch) for message in messages]
        finally:
            self.end_batch(batch)

    def process_any(self, message: WorkMessage | DagTaskFailure, batch: WorkerBatch | None = None) -> Outcome:
        """One work-queue message of any kind: a run, a DAG task, a DAG task's failure report, a callback's result,
        an instant to audit."""
        if isinstance(message, CallbackResult):
            return self.callback_result(message)
        if isinstance(message, AuditMessage):
            return self._waited(message, SentAudits(self.jobs, self.runs, self.escalations, self.clock).audit(message))
        if isinstance(message, DagTaskMessage):
            return self._waited(message, self.dags.process_task(message))
        if isinstance(message, DagTaskFailure):
            return self.dags.task_failed(message)
        return self.process(message, batch)

    def _waited(self, message: DagTaskMessage | AuditMessage, outcome: Outcome) -> Outcome:
        """An outcome that must wait: its message (or what it says instead) sent back to come after ``wait``."""
        if outcome.wait is not None:
            self.queues.send(outcome.priority, [(outcome.resend or message, outcome.wait)])
        return outcome

    def process(self, message: RunMessage, batch: WorkerBatch | None = None) -> Outcome:
        """Handle one delivery. The message can always be deleted afterwards: one that must wait has been
        sent again with a delay."""
        try:
            return self._delivery(message, batch)
        finally:
            flush_held()  # an attempt's usage its run's end did not take (``pipeline.usage``)
            drop_spec()

    def _delivery(self, message: RunMessage, batch: WorkerBatch | None) -> Outcome:
        now = self.clock()
        fire_at = parse_instant(message.fire_at)
        # Eventually consistent (half the read cost): a version read a moment stale is caught by the checks
        # below or by the conditional writes, never lets a run happen twice. A batch read them all at once.
        if batch is not None and message.job in batch.specs:
            stored: StoredJob | None = batch.specs[message.job]
        else:
            stored = self.jobs.get(message.job, consistent=False)
        if stored is None:
            return Outcome("superseded", "the job no longer exists")
        hold_spec(stored)  # the lifecycle's subscribers take the job's terms from it (``pipeline.in_hand``)
        if fire_at - now > EARLY_TOLERANCE:
            outcome = Outcome("waiting", "before its instant", wait=fire_at - now)
        else:
            outcome = self._process(message, stored, now, fire_at, batch)
        if outcome.wait is not None:
            self.queues.send(stored.spec.priority, [(outcome.resend or message, outcome.wait)])
        return replace(outcome, priority=stored.spec.priority)

    def _process(
        self, message: RunMessage, stored: StoredJob, now: datetime, fire_at: datetime, batch: WorkerBatch | None
    ) -> Outcome:
        spec = stored.spec
        records = self.records
        settled = before_claim(message, stored)
        if settled is not None:
            if settled.action == "skip":
                return records.skip(message, spec, now, settled.detail)
            return Outcome("superseded", settled.detail)
        waited = self.waits.before_claim(message, stored, now) if spec.wait_for else None
        if isinstance(waited, Outcome):
            return waited
        existing = self.runs.get(message.job, message.run_id) if message.attempt > 1 else None
        if existing is not None and already_settled(existing, message):
            return self._resume_or_drop(existing, message, stored, now)

        def context(run: Run) -> RunContext:
            return RunContext(
                job=message.job,
                team=message.team,
                run_id=message.run_id,
                attempt=run.attempt,
                scheduled_at=message.scheduled_at,
                correlation_id=run.correlation_id,
                payload_override=self._payload(message),
                trigger=message.trigger,
                checkpoint=run.progress.checkpoint if run.progress is not None else None,
                critical=spec.tier == "critical",
            )

        # A run that waited for a slot, or took one while others of its batch were refused, has runs behind it.
        crowded = Crowding(message.slot_waits > 0)
        attempts = (
            Attempts(self.targets, replace(self.breakers, known=batch.breakers), self.after_step)
            if batch
            else self.attempts
        )
        attempt = attempts.execute(
            spec.target,
            breaker_owner(spec),
            now,
            claim=lambda: self._claim(message, stored, now, batch, crowded),
            context=context,
            checks=spec.checks,
            metered=self._metered(spec, spec.target),
        )
        if isinstance(attempt, Held):
            attempts.breakers.holding(attempt.breaker, f"{message.job}/{message.run_id}")
            return records.held_back(message, stored, now, attempt.outcome)
        if isinstance(attempt, Executed):
            # A run that waited for data is not late: its wait is measured as such (WaitSeconds).
            had_to_wait = isinstance(waited, Met) and waited.waited > timedelta(0)
            lateness = None if had_to_wait else (attempt.claimed.started_at or now) - fire_at
            incidents = batch.jobs.incidents.get(message.job) if batch else None
            outcome = records.result(
                message, stored, attempt.claimed, attempt.result, lateness, open_incidents=incidents
            )
            if crowded.value and outcome.action in ENDED:
                records.wake_next(spec.team)
            return outcome
        return attempt

    def _payload(self, message: RunMessage) -> JsonValue:
        """What the target receives besides its own payload: a batched run's events, read once its batch is
        closed (nothing is added to it after), so every attempt of the run receives the same list."""
        batch = batch_named(message.trigger_detail)
        if batch is None or self.batches is None:
            return message.payload_override
        events = self.batches.close_batch(message.job, *batch)
        detail = dict(message.trigger_detail or {})
        return batch_payload(detail, events, events_ref=run_events_path(message.job, message.run_id))

    def _claim(
        self, message: RunMessage, stored: StoredJob, now: datetime, batch: WorkerBatch | None, crowded: Crowding
    ) -> Run | Outcome:
        """Slots, then the claim. A DAG job's claimed run is handed to its state machine here (it executes no
        target itself): the outcome says the execution started."""
        if batch is None:
            slots = self.claims.take_slots(message, stored, now)
        else:
            read = batch.jobs.slots.get(message.job)
            slots = self.claims.take_slots(message, stored, now, batch.team_slots, read=read)
        if isinstance(slots, SkipRun):
            return self.records.skip(message, stored.spec, now, slots.reason)
        if isinstance(slots, Outcome):
            return self.records.held_back(message, stored, now, slots, for_slot=True)
        crowded.value = crowded.value or slots.crowded
        self.after_step("slots")
        claimed = self.claims.claim(message, stored, now)
        if isinstance(claimed, NotClaimed):
            return self._resume_or_drop(claimed.existing, message, stored, now)
        if isinstance(claimed, Run) and stored.spec.dag is not None:
            self.after_step("claim")
            return self.dags.start(message, stored, claimed)
        return claimed

    # ----------------------------------------------------- ends from outside (``ends``)

    @property
    def run_ends(self) -> RunEnds:
        stop_dag = self.records.stop_dag
        return RunEnds(self.jobs, self.runs, self.records, self.containers, stop_dag, self.clock)

    @property
    def ends(self) -> OutsideEnds:
        """Callbacks, container state changes, approvals, heartbeats and cancels, for runs and tasks alike."""
        dags = self.dags.ends if self.workflows is not None and isinstance(self.runs, TaskRunsPort) else None
        return OutsideEnds(self.run_ends, dags)

    def callback_result(self, result: CallbackResult) -> Outcome:
        """A callback's result the API accepted: judged here by the job's (or task's) checks, fenced by its
        attempt like any result (a redelivery, or an attempt that moved on since, changes nothing)."""
        ref = AttemptRef(result.job, result.run_id, result.attempt, result.task)
        try:
            run = self.ends.complete(ref, Reported(result.succeeded, result.output, result.error))
        except StaleAttempt as stale:
            return Outcome("superseded", str(stale))
        action: Action = "succeeded" if run.status is RunStatus.SUCCEEDED else "failed"
        return Outcome(action if run.status in TERMINAL else "pending", "a callback's result, judged", run=run)

    def _resume_or_drop(self, existing: Run, message: RunMessage, stored: StoredJob, now: datetime) -> Outcome:
        """A message for a run that already exists: a duplicate, a crash to recover, or a retry to resend."""
        verdict = on_existing(existing, message, stored.spec, now)
        if verdict.action == "resend_retry":
            self.records.send_retry(message, stored.spec, existing)
        elif verdict.action == "start_dag":
            return self.dags.start(message, stored, existing)
        elif verdict.action == "in_flight":
            assert existing.lease_until is not None
            return Outcome("waiting", verdict.detail, wait=existing.lease_until - now)
        elif verdict.action == "recover" and isinstance(stored.spec.target, CONTAINER_TARGETS):
            return self.run_ends.time_out(existing)  # its timeout watch: the task is stopped, the attempt timed out
        elif verdict.action == "recover":
            return self.records.lost_attempt(existing, message, stored, now)
        return Outcome("duplicate", verdict.detail, run=existing)

    def send_retry(self, message: RunMessage, spec: JobSpec, run: Run) -> bool:
        """The next attempt's message of a RETRYING run (recovery re-sends those a crash may have lost)."""
        return self.records.send_retry(message, spec, run)


def heartbeat_checker(
    runs: RunsPort,
    worker: Worker,
    *,
    freshness: Callable[[datetime], int] | None = None,
    budgets: Callable[[datetime], int] | None = None,
    sweep: Callable[[datetime], int] | None = None,
) -> HeartbeatChecker:
    """The heartbeat checker with the worker's collaborators: lost attempts are timed out by the worker's
    rules, parked DAG tasks kept alive by its DAG runner; with ``freshness``, jobs' freshness judged when due."""
    return HeartbeatChecker(
        runs,
        worker.jobs,
        worker.alerts,
        time_out=worker.run_ends.time_out,
        heartbeat_parked=lambda task: worker.dags.ends.heartbeat_parked(task),
        freshness=freshness,
        budgets=budgets,
        sweep=sweep,
    )
