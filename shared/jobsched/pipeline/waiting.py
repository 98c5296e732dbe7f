"""Waiting for data: a run (or a DAG task) whose ``wait_for`` conditions are not met is held WAITING, holding no
Lambda, no slot and no worker, and checked again when its message comes back (a poll) or when an event that
may meet it wakes it (the intake sends the message kept in its waiter item).

Per delivery of a run's first attempt whose job has ``wait_for``, before any slot is taken:
1. the run's record: past WAITING (claimed, ended) -> nothing to wait for, the claim settles the delivery;
2. the conditions for its logical instant: all met -> on to the slots and the claim (the waiter dropped);
3. its wait over (``wait.timeout`` since it began waiting) -> FAILED (paged like any failure) or SKIPPED,
   with "waited 2h for s3://...";
4. otherwise WAITING is recorded with what it waits for, and the message sent again after the poll delay.
   A woken delivery is never sent again (the poll goes on by itself), so wakes never multiply messages.
Order of writes: the waiter item, then the run WAITING, then the re-send. A crash between them leaves a waiter
whose run is not WAITING yet (a wake is checked and dropped) or a WAITING run whose delivery comes back. A
delivery redelivered after its re-send may start a second poll chain: each ends with the wait, and the
claim admits one start. The run sits on the wakeups index at its wait's end, so even lost polls end it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from jobsched.core.messages import DagTaskMessage
from jobsched.core.outcome import Outcome
from jobsched.core.records import StoredJob, Waiting, shown_waiting_for
from jobsched.core.run_records import Run, StaleAttempt, TaskState
from jobsched.core.runs import RunMessage, RunStatus, TaskStatus, parse_instant
from jobsched.core.spec import DagTask, JobSpec, WaitCondition, WaitPolicy
from jobsched.core.waits import Awaited, awaited, policy_of, poll_delay, timed_out_reason, waiting_reason
from jobsched.paging.escalation_events import Alerts
from jobsched.ports import DataChecksPort, JobsPort, RunsPort, WaitersPort
from jobsched.tenancy.ownership import NotOwned

WaitSignal = Literal["begun", "met", "timed_out"]


@dataclass(frozen=True)
class Met:
    """Every condition holds: go on. ``waited``: how long the run had been WAITING (zero: it never was)."""

    waited: timedelta


@dataclass(frozen=True)
class Refused:
    """A condition the team may not wait on (another team's bucket, a job not shared): the run fails."""

    reason: str


def task_waiter(run_id: str, task: str) -> str:
    return f"{run_id}#{task}"


@dataclass
class Waits:
    jobs: JobsPort
    waiters: WaitersPort
    runs: RunsPort
    checks: DataChecksPort
    alerts: Alerts
    signal: Callable[[WaitSignal, timedelta], None] = lambda kind, waited: None  # metrics (wiring)

    # ------------------------------------------------------------------------------ runs

    def before_claim(self, message: RunMessage, stored: StoredJob, now: datetime) -> Outcome | Met | None:
        """None: the job does not wait, or this delivery is past waiting; Met: go on; an Outcome: settled."""
        spec = stored.spec
        if not spec.wait_for or message.attempt != 1:
            return None
        existing = self.runs.get(message.job, message.run_id)
        if existing is not None and existing.status not in (RunStatus.SCHEDULED, RunStatus.WAITING):
            if message.woken:  # woken from a waiter left behind (cancelled while waiting): forget it
                self.waiters.drop_waiter(message.job, message.run_id)
            return None
        since = existing.wait_started_at if existing is not None and existing.wait_started_at else now
        pending = self.pending(spec, spec.wait_for, parse_instant(message.scheduled_at))
        policy = policy_of(spec.wait)
        if isinstance(pending, Refused):
            return self._end(message, stored, existing, now, "fail", pending.reason, since)
        if not pending:
            if existing is None or existing.status is not RunStatus.WAITING:
                return Met(timedelta(0))
            self.waiters.drop_waiter(message.job, message.run_id)
            self.signal("met", now - since)
            return Met(now - since)
        if now >= since + policy.timeout:
            self.signal("timed_out", now - since)
            reason = timed_out_reason(policy, pending)
            return self._end(message, stored, existing, now, policy.on_timeout, reason, since)
        if message.woken:
            return Outcome("waiting", "woken, " + waiting_reason(since, pending))
        waiting = Waiting(
            waiting_reason(since, pending), [item.describe() for item in pending], since, since + policy.timeout
        )
        return self._keep_waiting(message, spec, existing, waiting, pending, now)

    def _keep_waiting(
        self,
        message: RunMessage,
        spec: JobSpec,
        existing: Run | None,
        waiting: Waiting,
        pending: list[Awaited],
        now: datetime,
    ) -> Outcome | None:
        """WAITING recorded (with its waiter, the first time) and the message sent again after the poll delay."""
        first = existing is None or existing.status is not RunStatus.WAITING
        if first:
            self._remember(message.job, message.run_id, message, pending, until=waiting.until)
        # Compared as stored (bounded), or a long key would make every poll write.
        unchanged = (
            not first and existing is not None and existing.waiting_for == shown_waiting_for(waiting.waiting_for)
        )
        if not unchanged:  # a poll that finds the same conditions unmet writes nothing
            try:
                self.runs.wait(message, waiting, now=now, retention=spec.run_retention, deadline=spec.deadline)
            except StaleAttempt:
                return None  # claimed or ended meanwhile: the claim settles this delivery
        if first:
            self.signal("begun", timedelta(0))
        delay = min(poll_delay(now - waiting.since), waiting.until - now)
        return Outcome("waiting", waiting.reason, wait=delay, resend=message.model_copy(update={"woken": False}))

    def _end(
        self,
        message: RunMessage,
        stored: StoredJob,
        existing: Run | None,
        now: datetime,
        how: Literal["fail", "skip"],
        reason: str,
        since: datetime,
    ) -> Outcome:
        """The wait ends without its conditions: FAILED (paged) or SKIPPED, from whatever record is there."""
        status = RunStatus.FAILED if how == "fail" else RunStatus.SKIPPED
        spec = stored.spec
        try:
            if existing is None:  # refused before it ever waited: recorded as waiting, then ended
                placeholder = Waiting(reason, [], since, since)
                existing = self.runs.wait(message, placeholder, now=now, retention=spec.run_retention, deadline=None)
            ended = self.runs.finish(
                message.job,
                message.run_id,
                attempt=1,
                status=status,
                now=now,
                error=reason if status is RunStatus.FAILED else None,
                reason=reason,
                from_status=existing.status,
            )
        except StaleAttempt:
            return Outcome("duplicate", "the run left waiting meanwhile")
        self.waiters.drop_waiter(message.job, message.run_id)
        if status is RunStatus.FAILED:
            self.alerts.run_ended_badly(ended, "run failed")
            return Outcome("failed", reason, run=ended)
        return Outcome("skipped", reason, run=ended)

    # ------------------------------------------------------------------------------ DAG tasks

    def before_task(
        self,
        message: DagTaskMessage,
        spec: JobSpec,
        run: Run,
        task: DagTask,
        mine: TaskState | None,
        *,
        since: datetime,
        now: datetime,
    ) -> Outcome | Met | Refused | Literal["skip"] | None:
        """A DAG task whose dependencies are done (``since``: when the last of them finished, or it was first
        held): None or Met, run it; Refused, fail it with the reason; "skip": its wait timed out and it is
        skipped; an Outcome: it waits (the caller parks it with its token)."""
        if not task.wait_for:
            return None
        pending = self.pending(spec, task.wait_for, run.scheduled_at)
        if isinstance(pending, Refused):
            return pending
        waiter = task_waiter(run.run_id, message.task)
        if not pending:
            if mine is not None and mine.status is TaskStatus.WAITING:
                self.waiters.drop_waiter(run.job, waiter)
                self.signal("met", now - since)
            return Met(now - since)
        policy: WaitPolicy = policy_of(task.wait)
        if now >= since + policy.timeout:
            self.waiters.drop_waiter(run.job, waiter)
            self.signal("timed_out", now - since)
            return "skip" if policy.on_timeout == "skip" else Refused(timed_out_reason(policy, pending))
        reason = waiting_reason(since, pending)
        if message.woken:
            return Outcome("waiting", "woken, " + reason)
        if mine is None or mine.status is not TaskStatus.WAITING:
            self._remember(run.job, waiter, message, pending, until=since + policy.timeout)
            self.signal("begun", timedelta(0))
        delay = min(poll_delay(now - since), since + policy.timeout - now)
        return Outcome("waiting", reason, wait=delay, resend=message.model_copy(update={"woken": False}))

    def _remember(
        self,
        job: str,
        waiter: str,
        message: RunMessage | DagTaskMessage,
        pending: list[Awaited],
        *,
        until: datetime,
    ) -> None:
        """The waiter item an event wakes it from: its message marked woken, what it awaits (kept a day past
        its wait's end)."""
        woken = message.model_copy(update={"woken": True}).model_dump_json()
        awaits = [item.wakes_on for item in pending]
        self.waiters.add_waiter(job, waiter, woken, awaits=awaits, expires_at=until + timedelta(days=1))

    # ------------------------------------------------------------------------------ checks

    def pending(self, spec: JobSpec, conditions: list[WaitCondition], instant: datetime) -> list[Awaited] | Refused:
        """The conditions not met for ``instant``; Refused when one is not the team's to wait on."""
        found = []
        for item in awaited(spec, conditions, instant):
            if item.kind == "s3":
                try:
                    met = self.checks.object_exists(spec.team, item.bucket, item.key)
                except NotOwned as refused:
                    return Refused(f"may not wait for s3://{item.bucket}/{item.key}: {refused}")
            else:
                upstream = self.jobs.get(item.job, consistent=False)
                if (
                    upstream is not None
                    and upstream.spec.team != spec.team
                    and spec.team not in upstream.spec.share_with
                ):
                    return Refused(f"{item.job} does not share its runs with team {spec.team}")
                assert item.first is not None and item.last is not None
                met = self.runs.succeeded_between(item.job, item.first, item.last) is not None
            if not met:
                found.append(item)
        return found
