"""The worker: one run message in, at most one execution per (run, attempt) out.

Order of writes, and what a crash between them leaves:
1. job slot (and team slot), holder = run id: a crash here leaves a slot that expires with its lease;
2. claim: conditional create RUNNING (or a conditional attempt transition); a redelivery finds RUNNING
   with a live lease and waits, or an expired lease and takes over as the next attempt;
3. execute the target;
4. record the outcome conditional on (RUNNING, attempt), the fencing token; a stale worker's result
   is refused;
5. on failure: RETRYING first, then the retry message; a crash between them makes the redelivered
   message send the retry again (the next attempt's claim admits only one);
6. release the slots last: a crash before leaves a slot that expires with its lease.
The message is deleted only after the outcome is stored; until then SQS brings it back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial

from jobsched.core.errors import WorkflowsNotConfigured
from jobsched.core.messages import DagTaskFailure, DagTaskMessage
from jobsched.core.names import JobsKeys
from jobsched.core.outcome import Outcome
from jobsched.core.records import Run, RunContext, StaleAttempt, StoredJob, TargetResult
from jobsched.core.runs import MAX_SQS_DELAY, TERMINAL, RunMessage, RunStatus, instant_text, parse_instant, retry_delay
from jobsched.core.spec import JobSpec
from jobsched.dag.runs import DagRuns
from jobsched.pipeline.decisions import (
    already_settled,
    before_claim,
    claim_transition,
    is_external,
    lease_until,
    on_existing,
    on_lost_attempt,
    on_result,
    overlap_policy,
    ran_twice,
    target_of,
)
from jobsched.ports import EscalationsPort, JobsPort, RunsPort, TargetsPort, TaskRunsPort, WorkflowsPort, WorkQueuesPort
from jobsched.watch.alerts import Alerts
from jobsched.watch.breaker import COOL_DOWN, FAILURES_TO_OPEN, Breakers
from jobsched.watch.heartbeat import HeartbeatChecker

WAIT_WHEN_FULL = timedelta(seconds=30)  # a message for a job at max_running comes back after this
EARLY_TOLERANCE = timedelta(seconds=1)


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
    breaker_failures: int = FAILURES_TO_OPEN  # consecutive failures of one target that open its circuit
    breaker_cool_down: timedelta = COOL_DOWN

    @property
    def alerts(self) -> Alerts:
        return Alerts(self.escalations, self.jobs, self.clock)

    @property
    def breakers(self) -> Breakers:
        # Built on use: tests tune breaker_failures on a running worker.
        return Breakers(self.jobs, self.alerts, self.clock, self.breaker_failures, self.breaker_cool_down)

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
            targets=self.targets,
            workflows=self.workflows,
            breakers=self.breakers,
            alerts=self.alerts,
            clock=self.clock,
            after_step=self.after_step,
        )

    def process_any(self, message: RunMessage | DagTaskMessage | DagTaskFailure) -> Outcome:
        """One work-queue message of any kind: a run, a DAG task, or a DAG task's failure report."""
        if isinstance(message, DagTaskMessage):
            outcome = self.dags.process_task(message)
            if outcome.wait is not None:
                self.queues.send(outcome.priority, [(message, outcome.wait)])
            return outcome
        if isinstance(message, DagTaskFailure):
            return self.dags.task_failed(message)
        return self.process(message)

    def process(self, message: RunMessage) -> Outcome:
        """Handle one delivery. The message can always be deleted afterwards: one that must wait has been
        sent again with a delay (a fresh message, so waiting never counts towards the dead-letter limit)."""
        now = self.clock()
        fire_at = parse_instant(message.fire_at)
        # Eventually consistent (half the read cost): a version read a moment stale is caught by the checks
        # below or by the conditional writes, never lets a run happen twice.
        stored = self.jobs.get(message.job, consistent=False)
        if stored is None:
            return Outcome("superseded", "the job no longer exists")
        if fire_at - now > EARLY_TOLERANCE:
            outcome = Outcome("waiting", "before its instant", wait=fire_at - now)
        else:
            outcome = self._process(message, stored, now, fire_at)
        if outcome.wait is not None:
            self.queues.send(stored.spec.priority, [(outcome.resend or message, outcome.wait)])
        return replace(outcome, priority=stored.spec.priority)

    def _process(self, message: RunMessage, stored: StoredJob, now: datetime, fire_at: datetime) -> Outcome:
        spec = stored.spec
        settled = before_claim(message, stored)
        if settled is not None:
            if settled.action == "skip":
                return self._skip(message, spec, now, settled.detail)
            return Outcome("superseded", settled.detail)
        existing = self.runs.get(message.job, message.run_id) if message.attempt > 1 else None
        if existing is not None and already_settled(existing, message):
            return self._resume_or_drop(existing, message, stored, now)

        breakers = self.breakers
        breaker_key, breaker, held = breakers.check(spec.target, spec.team, now)
        if held is not None:
            return self._held_back(message, stored, now, held)
        slots = self._take_slots(message, stored, now)
        if isinstance(slots, Outcome):
            return self._held_back(message, stored, now, slots)
        self.after_step("slots")
        claimed = self._claim(message, stored, now)
        if isinstance(claimed, Outcome):
            return claimed
        self.after_step("claim")
        if spec.dag is not None:
            return self.dags.start(message, stored, claimed)
        context = RunContext(
            job=message.job,
            team=message.team,
            run_id=message.run_id,
            attempt=claimed.attempt,
            scheduled_at=message.scheduled_at,
            correlation_id=claimed.correlation_id,
            payload_override=message.payload_override,
        )
        result = self.targets.execute(target_of(spec), context)
        self.after_step("execute")
        breakers.record(breaker_key, breaker, result)
        lateness = (claimed.started_at or now) - fire_at
        return self._record(message, stored, claimed, result, lateness)

    # ----------------------------------------------------- results from outside (API, #4)

    def complete_external(
        self,
        job: str,
        run_id: str,
        attempt: int,
        *,
        succeeded: bool,
        output: str | None = None,
        error: str | None = None,
    ) -> Run:
        """A callback run's result: the same outcome rules as a target's (retry, fail, escalate, release).

        StaleAttempt if the attempt is not the one running (retried, timed out, cancelled, finished).
        """
        stored, run = self._running_attempt(job, run_id, attempt)
        message = run.to_message()
        result = TargetResult("succeeded", output=output) if succeeded else TargetResult("failed", error=error)
        outcome = self._record(message, stored, run, result, (run.started_at or self.clock()) - run.fire_at)
        if outcome.action == "superseded" or outcome.run is None:
            raise StaleAttempt(outcome.detail or f"{job} {run_id} attempt {attempt} is no longer running")
        return outcome.run

    def heartbeat_external(self, job: str, run_id: str, attempt: int) -> Run:
        """Extend a callback run's lease by its heartbeat timeout (or target timeout)."""
        stored, _ = self._running_attempt(job, run_id, attempt)
        now = self.clock()  # once: the lease and the slot's expiry judgement use the same instant
        lease = lease_until(stored.spec, now)
        updated = self.runs.heartbeat(job, run_id, attempt=attempt, lease_until=lease)
        self.jobs.acquire_slot(
            job,
            JobsKeys.STATE,
            holder=run_id,
            lease_until=lease,
            limit=stored.spec.concurrency.max_running,
            now=now,
        )
        return updated

    def time_out(self, run: Run) -> Outcome:
        """A waiting run whose lease ran out (no heartbeat or result in time): retried by policy, or
        TIMED_OUT with an escalation. Reports from the timed-out attempt are refused by its fencing."""
        now = self.clock()
        stored = self.jobs.get(run.job)
        if stored is None or run.status is not RunStatus.RUNNING or not run.lease_until or run.lease_until > now:
            return Outcome("duplicate", "not an expired lease")
        return self._recover_lost_attempt(run, run.to_message(), stored, now)

    def cancel(self, job: str, run_id: str) -> Run:
        """Cancel a run that has not finished; StaleAttempt if it already has."""
        run = self.runs.get(job, run_id)
        stored = self.jobs.get(job)
        if run is None or run.status in TERMINAL:
            raise StaleAttempt(f"{job} {run_id} is not running")
        cancelled = self.runs.finish(
            job,
            run_id,
            attempt=run.attempt,
            status=RunStatus.CANCELLED,
            now=self.clock(),
            error="cancelled by request",
            from_status=run.status,
        )
        if stored is not None and stored.spec.dag is not None:
            self.dags.stop(cancelled, stored.spec, cause="cancelled by request")
        return cancelled

    def _running_attempt(self, job: str, run_id: str, attempt: int) -> tuple[StoredJob, Run]:
        stored = self.jobs.get(job)
        run = self.runs.get(job, run_id)
        if stored is None or run is None or run.status is not RunStatus.RUNNING or run.attempt != attempt:
            state = f"{run.status.value} at attempt {run.attempt}" if run else "unknown"
            raise StaleAttempt(f"{job} {run_id} attempt {attempt} is not running (run is {state})")
        return stored, run

    # -------------------------------------------------------------------------------- slots

    def _take_slots(self, message: RunMessage, stored: StoredJob, now: datetime) -> Outcome | None:
        spec = stored.spec
        lease = lease_until(spec, now)
        limit = spec.concurrency.max_running
        ended = partial(self._ended_runs, job=message.job)
        taken = self.jobs.acquire_slot(
            message.job, JobsKeys.STATE, holder=message.run_id, lease_until=lease, limit=limit, now=now, ended=ended
        )
        if not taken.acquired:
            policy = overlap_policy(message, spec)
            others = ", ".join(sorted(taken.holders)) or "?"
            if policy == "skip":
                return self._skip(message, spec, now, f"overlap: skip (still running: {others})")
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
                return Outcome("waiting", f"max_running {limit} reached ({others})", wait=WAIT_WHEN_FULL)
        # The team's share: one team's backlog or hung target holds at most max_running of the workers.
        quota = self.jobs.team_limits(spec.team).max_running
        team = self.jobs.acquire_slot(
            f"{JobsKeys.TEAM_PREFIX}{spec.team}",
            JobsKeys.QUOTA,
            holder=f"{message.job}/{message.run_id}",
            lease_until=lease,
            limit=quota,
            now=now,
            ended=self._ended_runs,
        )
        if not team.acquired:
            self.jobs.release_slot(message.job, JobsKeys.STATE, holder=message.run_id)
            return Outcome("waiting", f"team {spec.team} max_running {quota} reached", wait=WAIT_WHEN_FULL)
        return None

    def _ended_runs(self, holders: list[str], *, job: str | None = None) -> set[str]:
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
            self.jobs.release_slot(job, JobsKeys.STATE, holder=run_id)

    # -------------------------------------------------------------------------------- claim

    def _claim(self, message: RunMessage, stored: StoredJob, now: datetime) -> Run | Outcome:
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
        try:
            transition = claim_transition(existing, message)
            if transition == "first":
                waited = int((now - parse_instant(message.fire_at)).total_seconds() * 1000)
                return self._start(existing, existing.status, 1, 1, now, lease, external, lateness_ms=waited)
            if transition == "retry":
                return self._start(
                    existing, RunStatus.RETRYING, existing.attempt, message.attempt, now, lease, external
                )
        except StaleAttempt:
            existing = self.runs.get(message.job, message.run_id) or existing
        return self._resume_or_drop(existing, message, stored, now)

    def _start(
        self,
        run: Run,
        expected: RunStatus,
        expected_attempt: int,
        attempt: int,
        now: datetime,
        lease: datetime,
        external: bool,
        require_expired_lease: bool = False,
        lateness_ms: int | None = None,
    ) -> Run:
        return self.runs.start_attempt(
            run.job,
            run.run_id,
            expected_status=expected,
            expected_attempt=expected_attempt,
            attempt=attempt,
            now=now,
            lease_until=lease,
            external=external,
            require_expired_lease=require_expired_lease,
            lateness_ms=lateness_ms,
        )

    def _resume_or_drop(self, existing: Run, message: RunMessage, stored: StoredJob, now: datetime) -> Outcome:
        """A message for a run that already exists: a duplicate, a crash to recover, or a retry to resend."""
        verdict = on_existing(existing, message, stored.spec, now)
        if verdict.action == "resend_retry":
            self.send_retry(message, stored.spec, existing)
        elif verdict.action == "start_dag":
            return self.dags.start(message, stored, existing)
        elif verdict.action == "in_flight":
            assert existing.lease_until is not None
            return Outcome("waiting", verdict.detail, wait=existing.lease_until - now)
        elif verdict.action == "recover":
            return self._recover_lost_attempt(existing, message, stored, now)
        return Outcome("duplicate", verdict.detail, run=existing)

    def _recover_lost_attempt(self, existing: Run, message: RunMessage, stored: StoredJob, now: datetime) -> Outcome:
        """The worker running this attempt died (lease expired): count it as failed and go on."""
        spec = stored.spec
        final, error = on_lost_attempt(spec, existing)
        if final:
            try:
                run = self.runs.finish(
                    existing.job,
                    existing.run_id,
                    attempt=existing.attempt,
                    status=RunStatus.TIMED_OUT,
                    now=now,
                    error=error,
                )
            except StaleAttempt:
                return Outcome("duplicate", "another worker recovered it")
            if spec.dag is not None:
                self.dags.stop(run, spec, cause=error)
            self.alerts.run_ended_badly(run, "run timed out")
            return Outcome("failed", error, run=run)
        return self._retry(message, spec, existing, error, now)

    # ------------------------------------------------------------------------------ outcome

    def _record(
        self, message: RunMessage, stored: StoredJob, run: Run, result: TargetResult, lateness: timedelta
    ) -> Outcome:
        spec = stored.spec
        now = self.clock()
        decision = on_result(result, spec, run.policy_attempt)
        try:
            if decision == "pending":
                return Outcome("pending", "waiting for the callback", run=run, lateness=lateness)
            if decision == "succeeded":
                finished = self.runs.finish(
                    run.job, run.run_id, attempt=run.attempt, status=RunStatus.SUCCEEDED, now=now, output=result.output
                )
                self.after_step("record")
                self.alerts.succeeded(run, finished, spec)
                return Outcome("succeeded", run=finished, lateness=lateness)
            if decision == "retry":
                return self._retry(message, spec, run, result.error or "failed", now, lateness)
            failed = self.runs.finish(
                run.job, run.run_id, attempt=run.attempt, status=RunStatus.FAILED, now=now, error=result.error
            )
        except StaleAttempt as error:
            # Cancelled, or taken over after our lease expired: our result must not overwrite theirs.
            return self._stale_result(run, str(error))
        self.after_step("record")
        self.alerts.run_ended_badly(failed, "run failed")
        return Outcome("failed", result.error or "", run=failed, lateness=lateness)

    def _held_back(self, message: RunMessage, stored: StoredJob, now: datetime, outcome: Outcome) -> Outcome:
        """A first attempt that must wait (max_running, the team's limit, an open circuit) gets its run record
        now, SCHEDULED with the reason, so it is visible, counted and under its SLA deadline while it waits.
        Written once: the re-sent message carries ``waiting_since``. The claim later starts this record."""
        if outcome.action != "waiting" or message.attempt != 1 or message.waiting_since is not None:
            return outcome
        self.runs.create(
            message,
            status=RunStatus.SCHEDULED,
            now=now,
            retention=stored.spec.run_retention,
            reason=f"waiting since {instant_text(now)}: {outcome.detail}",
            deadline=stored.spec.deadline,
        )
        return replace(outcome, resend=message.model_copy(update={"waiting_since": instant_text(now)}))

    def _stale_result(self, run: Run, error: str) -> Outcome:
        """Our result was refused. If the run ended at this very attempt (not cancelled), the attempt was
        executed twice: the claim should make that impossible, so it is counted apart, as a tripwire (M5)."""
        if ran_twice(self.runs.get(run.job, run.run_id), run.attempt):
            return Outcome("duplicate_execution", f"attempt {run.attempt} of {run.run_id} ran twice: {error}")
        return Outcome("superseded", error)

    def _retry(
        self,
        message: RunMessage,
        spec: JobSpec,
        run: Run,
        error: str,
        now: datetime,
        lateness: timedelta | None = None,
    ) -> Outcome:
        delay = retry_delay(spec.retry.backoff, run.policy_attempt, seed=f"{run.run_id}#{run.attempt}")
        next_at = now + delay
        long_wait = delay > MAX_SQS_DELAY
        try:
            retrying = self.runs.to_retrying(
                run.job, run.run_id, attempt=run.attempt, now=now, next_attempt_at=next_at, error=error, wake=long_wait
            )
        except StaleAttempt as stale:
            return Outcome("superseded", str(stale))
        self.after_step("retrying")
        self.send_retry(message, spec, retrying)
        # The run stays active between attempts: keep its slot until the next attempt can finish.
        self.jobs.acquire_slot(
            message.job,
            JobsKeys.STATE,
            holder=message.run_id,
            lease_until=lease_until(spec, next_at),
            limit=spec.concurrency.max_running,
            now=now,
        )
        return Outcome("retrying", f"attempt {run.attempt + 1} in {delay}", run=retrying, lateness=lateness)

    def send_retry(self, message: RunMessage, spec: JobSpec, run: Run) -> bool:
        """The message of a RETRYING run's next attempt, delayed to it; False for a wait longer than SQS can
        delay (the dispatcher wakes those from the wakeups index)."""
        if run.next_attempt_at is None:
            return False
        wait = run.next_attempt_at - self.clock()  # read once: the check and the delay agree
        if wait > MAX_SQS_DELAY:
            return False
        follow_up = message.for_attempt(run.attempt + 1).model_copy(
            update={"fire_at": instant_text(run.next_attempt_at)}
        )
        self.queues.send(spec.priority, [(follow_up, wait)])
        return True

    def _skip(self, message: RunMessage, spec: JobSpec, now: datetime, reason: str) -> Outcome:
        created = self.runs.create(
            message, status=RunStatus.SKIPPED, now=now, retention=spec.run_retention, reason=reason
        )
        if created is None:
            existing = self.runs.get(message.job, message.run_id)
            if existing is not None and existing.status is RunStatus.SCHEDULED and existing.attempt == 1:
                # It was waiting for a slot when the job was paused or changed: it ends SKIPPED, not waiting forever.
                with contextlib.suppress(StaleAttempt):
                    skipped = self.runs.finish(
                        message.job,
                        message.run_id,
                        attempt=1,
                        status=RunStatus.SKIPPED,
                        now=now,
                        reason=reason,
                        from_status=RunStatus.SCHEDULED,
                    )
                    return Outcome("skipped", reason, run=skipped)
            return Outcome("duplicate", "run exists", run=existing)
        return Outcome("skipped", reason, run=created)


def heartbeat_checker(runs: RunsPort, worker: Worker) -> HeartbeatChecker:
    """The heartbeat checker with the worker's collaborators: lost attempts are timed out by the worker's
    rules, parked DAG tasks kept alive by its DAG runner."""
    return HeartbeatChecker(
        runs,
        worker.jobs,
        worker.alerts,
        time_out=worker.time_out,
        heartbeat_parked=lambda task: worker.dags.heartbeat_parked(task),
    )
