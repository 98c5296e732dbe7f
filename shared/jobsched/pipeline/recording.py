"""Recording what became of a run's attempt: finished, retried, skipped, held back, lost, or a stale result.

Order of writes, and what a crash between them leaves (the message comes back until the outcome is stored):
1. the outcome, conditional on (RUNNING, attempt), the fencing token: a stale worker's result is refused;
2. on failure: RETRYING first, then the retry message; a crash between them makes the redelivered message
   send the retry again (the next attempt's claim admits only one);
3. the job's slot is kept across a retry, and released lazily once the run has ended.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from jobsched.core.names import JobsKeys
from jobsched.core.outcome import Outcome
from jobsched.core.records import StoredJob
from jobsched.core.run_records import Run, StaleAttempt, TargetResult
from jobsched.core.runs import MAX_SQS_DELAY, RunMessage, RunStatus, instant_text, parse_instant, retry_delay
from jobsched.core.spec import CONTAINER_TARGETS, JobSpec
from jobsched.paging.escalation_events import Alerts
from jobsched.pipeline.containers import attempt_work
from jobsched.pipeline.decisions import lease_until, on_lost_attempt, on_result, ran_twice
from jobsched.ports import JobsPort, RunsPort, WorkQueuesPort

WAKE_CANDIDATES = 5  # waiters read per wake: runs ending at once take different ones
TIMEOUT_WATCH_MARGIN = timedelta(seconds=1)  # a timeout watch arrives just after the lease ends


@dataclass
class Records:
    jobs: JobsPort
    runs: RunsPort
    queues: WorkQueuesPort
    alerts: Alerts
    clock: Callable[[], datetime]
    after_step: Callable[[str], None]
    stop_dag: Callable[[Run, JobSpec, str], None]  # a DAG run that timed out stops its execution

    def result(
        self,
        message: RunMessage,
        stored: StoredJob,
        run: Run,
        result: TargetResult,
        lateness: timedelta | None,
        *,
        open_incidents: set[str] | None = None,
    ) -> Outcome:
        """A target's (or a callback's) result for the claimed attempt ``run`` (``open_incidents``: the job's, when
        a worker batch read them)."""
        spec = stored.spec
        now = self.clock()
        decision = on_result(result, spec, run.policy_attempt)
        try:
            if decision == "pending":
                if isinstance(spec.target, CONTAINER_TARGETS) and result.output:
                    # The attempt's task, on the run: its Task State Change must name this very task to end it.
                    work = attempt_work(result.output, run.attempt)
                    run = self.runs.started_work(run.job, run.run_id, attempt=run.attempt, work=work)
                    self._watch_timeout(message, spec, run, now)
                    return Outcome("pending", "waiting for its container", run=run, lateness=lateness)
                return Outcome("pending", "waiting for the callback", run=run, lateness=lateness)
            if decision == "succeeded":
                finished = self._finish(run, RunStatus.SUCCEEDED, result, now)
                self.after_step("record")
                self.alerts.succeeded(run, finished, spec, open_incidents=open_incidents, checks=result.checks)
                return Outcome("succeeded", run=finished, lateness=lateness)
            if decision == "retry":
                return self.retry(message, spec, run, result.error or "failed", now, lateness)
            failed = self._finish(run, RunStatus.FAILED, result, now)
        except StaleAttempt as error:
            # Cancelled, or taken over after our lease expired: our result must not overwrite theirs.
            return self._stale_result(run, str(error))
        self.after_step("record")
        self.alerts.run_ended_badly(failed, "run failed")
        return Outcome("failed", result.error or "", run=failed, lateness=lateness)

    def _finish(self, run: Run, status: RunStatus, result: TargetResult, now: datetime) -> Run:
        """The attempt's end, fenced by its number: its output, error and check results on the run."""
        return self.runs.finish(
            run.job,
            run.run_id,
            attempt=run.attempt,
            status=status,
            now=now,
            output=result.output,
            error=result.error,
            checks=result.checks,
        )

    def _stale_result(self, run: Run, error: str) -> Outcome:
        """Our result was refused. If the run ended at this very attempt (not cancelled), the attempt was
        executed twice: the claim should make that impossible, so it is counted apart, as a tripwire (M5)."""
        if ran_twice(self.runs.get(run.job, run.run_id), run.attempt):
            return Outcome("duplicate_execution", f"attempt {run.attempt} of {run.run_id} ran twice: {error}")
        return Outcome("superseded", error)

    def retry(
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
            attempt=run.attempt,  # not the next: a run cancelled before it is claimed ends at this one
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

    def _watch_timeout(self, message: RunMessage, spec: JobSpec, run: Run, now: datetime) -> None:
        """The run's own message again, due when its container's timeout is reached: its delivery then times
        the attempt out (stopping the task) within seconds of the limit, not at the heartbeat checker's next
        minute. Longer than SQS can delay, it is delayed again on arrival; the checker stays the fallback."""
        if run.lease_until is not None:
            self.queues.send(spec.priority, [(message, run.lease_until - now + TIMEOUT_WATCH_MARGIN)])

    def lost_attempt(self, existing: Run, message: RunMessage, stored: StoredJob, now: datetime) -> Outcome:
        """The worker running this attempt died (lease expired): count it as failed and go on."""
        spec = stored.spec
        final, error = on_lost_attempt(spec, existing)
        if not final:
            return self.retry(message, spec, existing, error, now)
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
            self.stop_dag(run, spec, error)
        self.alerts.run_ended_badly(run, "run timed out")
        self.wake_next(spec.team)
        return Outcome("failed", error, run=run)

    def held_back(
        self, message: RunMessage, stored: StoredJob, now: datetime, outcome: Outcome, *, for_slot: bool = False
    ) -> Outcome:
        """A first attempt that must wait (max_running, the team's limit, an open circuit) gets its run record
        now, SCHEDULED with the reason, so it is visible, counted and under its SLA deadline while it waits.
        Written once: the re-sent message carries ``waiting_since``. The claim later starts this record.
        A wait ``for_slot`` (max_running) also puts the run on its team's slot waits, oldest first, where a run
        of the team that ends finds it (``wake_next``); a woken run that found the slots taken again goes back
        there, in its old place."""
        if outcome.action != "waiting" or message.attempt != 1:
            return outcome
        since = parse_instant(message.waiting_since) if message.waiting_since else now
        reason = f"waiting since {instant_text(since)}: {outcome.detail}"
        first = message.waiting_since is None
        created = first and self.runs.create(
            message,
            status=RunStatus.SCHEDULED,
            now=now,
            retention=stored.spec.run_retention,
            reason=reason,
            deadline=stored.spec.deadline,
        )
        # A triggered run's record was written at its trigger, with no reason yet; an open circuit's hold moves
        # its "until" at each re-open. A slot's reason stays as first written: its looks come every few seconds.
        noted = reason if (first and not created) or not for_slot else None
        slot_team = stored.spec.team if for_slot and (first or message.slot_woken) else None
        if noted is not None or slot_team is not None:
            self.runs.note_held(message.job, message.run_id, reason=noted, slot_team=slot_team, since=since)
        if not first and not for_slot:
            return outcome
        again = outcome.resend if isinstance(outcome.resend, RunMessage) else message
        return replace(
            outcome, resend=again.model_copy(update={"waiting_since": instant_text(since), "slot_woken": None})
        )

    def wake_next(self, team: str) -> Run | None:
        """A run of ``team`` ended, so a slot of its team (and of its job) is free: released lazily, the next
        claim evicts it. The team's longest-waiting run is sent now, instead of at its next look (after up to
        30 s). Several runs ending at once each take a different waiter off the index; a woken run that finds
        the slot taken after all goes back (``held_back``), and its own delayed look stays the fallback."""
        for job, run_id in self.runs.slot_waiters(team, limit=WAKE_CANDIDATES):
            woken = self.runs.take_slot_waiter(job, run_id)
            if woken is None:
                continue  # another run that ended woke it, or it started on its own look
            stored = self.jobs.get(job, consistent=False)
            if stored is None:
                return None
            self._send_waiter_now(woken, stored, slot_woken=True, slot_waits=1)
            return woken
        return None

    def wake_held(self, held: Sequence[str]) -> list[str]:
        """Runs an open circuit held back ("team/job/run id"), sent now that it closed by hand instead of at
        their look after the cool-down; a run that started or ended meanwhile is left alone, and the delayed
        look finds the run claimed. DAG tasks ("…#task") come back at their own look. The runs sent."""
        sent = []
        for ref in held:
            if "#" in ref:
                continue
            job, run_id = ref.rsplit("/", 1)
            run = self.runs.get(job, run_id)
            stored = self.jobs.get(job, consistent=False) if run is not None else None
            if run is None or stored is None or run.status is not RunStatus.SCHEDULED or run.attempt != 1:
                continue
            self._send_waiter_now(run, stored)
            sent.append(ref)
        return sent

    def _send_waiter_now(self, run: Run, stored: StoredJob, **update: object) -> None:
        """A held first attempt's message, sent now rather than at its delayed look (which then finds it claimed);
        it keeps the instant it has waited since."""
        message = run.to_message().model_copy(update={"waiting_since": instant_text(run.fire_at), **update})
        self.queues.send(stored.spec.priority, [(message, timedelta(0))])

    def skip(self, message: RunMessage, spec: JobSpec, now: datetime, reason: str) -> Outcome:
        created = self.runs.create(
            message, status=RunStatus.SKIPPED, now=now, retention=spec.run_retention, reason=reason
        )
        if created is not None:
            return Outcome("skipped", reason, run=created)
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
