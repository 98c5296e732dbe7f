"""The dispatcher tick: due jobs -> run messages (delayed to their instant) -> cursor advanced.

Safe with any number of concurrent dispatchers and with a crash between any two steps:
1. read due entries from the sparse index (only due jobs; paused jobs are not in it);
2. decide instants in (cursor, now + lookahead] with the schedule engine (catch-up policy applied);
3. send one message per instant, run id = the instant;
4. advance the cursor, conditional on the cursor and spec version read in step 1.
A crash after 3 and before 4 makes the next tick send the same run ids again; the worker's conditional
create lets only one run exist per instant. Advancing before sending could lose instants, so it never does.

One job never holds up the others: each job is planned and finished on its own, an error is caught and
the job left due for the next tick, and a job whose schedule costs more than its budget (the engine's
step limit, or ``JOB_BUDGET`` of wall time) is quarantined: paused with the reason, its team paged, the
``QuarantinedJobs`` metric counted for the platform's alarm. A tick stops planning at ``TICK_BUDGET``
and leaves the rest due, so the Lambda timeout never strikes with cursors half moved.

No message is lost silently: each visit of a job audits the instants sent in earlier ticks whose fire
time is ``LOST_AFTER`` past. The schedule is recomputed (it is deterministic) and one keys-only Query
reads their run records; an instant without one is recorded MISSED ("lost: ...", counted, paged once per
job) and ``audited_to`` moves in the same write as the cursor. If the message was only late, the worker
still starts that record when it arrives. Jobs firing less often than hourly (and a schedule's last
instants) get one extra visit for their audit, so no instant waits for the next fire to be accounted for.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

from jobsched.core.durations import format_duration
from jobsched.core.messages import AuditMessage
from jobsched.core.names import LEASE_SHARDS, due_shard_count
from jobsched.core.records import DueEntry, StoredJob
from jobsched.core.runs import LAST_OF_INSTANT, RunMessage, RunStatus, instant_text, parse_instant, scheduled_run_id
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.pipeline.lost_audit import (
    LOST_AFTER,
    QUICK_LOST_AFTER,
    QUIET_DEPTH,
    AuditWait,
    judge_lost,
    lost_reason,
    missed_event,
)
from jobsched.pipeline.manual_runs import advance_backfill
from jobsched.pipeline.sent_audits import audit_delay
from jobsched.pipeline.spec_cache import SpecCache
from jobsched.pipeline.tick_report import TickReport
from jobsched.ports import EscalationsPort, JobsPort, QueueBacklogPort, RunsPort, WorkQueuesPort
from jobsched.registry import wheel
from jobsched.registry.jobs import pause_job
from jobsched.schedule.catchup import DuePlan, plan_due
from jobsched.schedule.company import NO_COMPANY, CompanySettings
from jobsched.schedule.engine import CompiledSchedule
from jobsched.schedule.fires import schedule_of, scheduled_message
from jobsched.schedule.steps import ScheduleTooExpensive
from jobsched.tenancy.quotas import interleave_teams

# Instants up to this far ahead are sent per cursor update: fewer writes per run, still within the
# 15 minutes SQS can delay a message. Spec changes and pauses are honoured by the worker's checks.
LOOKAHEAD = timedelta(minutes=14)
# A job is due when its next instant falls within this of now (one tick and a margin for a late tick).
DUE_WINDOW = timedelta(minutes=2)
# Jobs whose instants are further apart than the lookahead can use are visited this early instead: their
# visit sends one instant whenever it comes, so coming early costs nothing and spreads a burst (everyone's
# nightly job at 00:00) over the ten ticks before it, the messages waiting in SQS for their instant.
DISPATCH_AHEAD = timedelta(minutes=10)
# Cursor writes, audits and SendMessageBatch calls of one tick run this many at a time (I/O bound).
IO_CONCURRENCY = 16
MAX_MISSED_RECORDED = 1440  # per job and tick: a day of a minutely job
JOB_BUDGET = timedelta(seconds=3)  # wall time to plan and finish one job in one tick
TICK_BUDGET = timedelta(seconds=40)  # the dispatcher Lambda stops at 60 s
# A sent instant with no run record this long after its fire time is lost (or the workers are that far
# behind: a late message still starts its record). Waiting runs and retries have records.
# (LOST_AFTER, or QUICK_LOST_AFTER when the class has no backlog and a later instant started: ``lost_audit``.)
MAX_AUDITED = 1440  # instants audited per job and tick: a day of a minutely job
# A job's next natural visit is used for its audit unless it comes later than this after the audit is due.
AUDIT_SLACK = timedelta(hours=1)
QUARANTINE_PRINCIPAL = "jobsched:dispatcher"
QUARANTINE_PREFIX = "quarantined: "
log = logging.getLogger(__name__)


_T = TypeVar("_T")


@dataclass(frozen=True)
class _JobPlan:
    entry: DueEntry
    stored: StoredJob
    compiled: CompiledSchedule
    plan: DuePlan
    messages: list[tuple[RunMessage, timedelta]]
    audited_to: datetime  # every instant up to here has a run record (or was not the dispatcher's)
    wait: AuditWait  # how long past its fire time a sent instant may be without a record
    natural_visit: datetime | None  # when its next instant brings the job due again (None: it has none)
    sparse: bool  # one instant a visit (``_natural_visit``)
    audits: list[tuple[AuditMessage, timedelta]] = field(default_factory=list)  # its sent instants' audits


@dataclass
class Dispatcher:
    jobs: JobsPort
    runs: RunsPort
    queues: WorkQueuesPort
    lookahead: timedelta = LOOKAHEAD
    due_window: timedelta = DUE_WINDOW
    # Crash-injection hook for tests: called with (step, job) after "send" and after "missed" records.
    after_step: Callable[[str, str], None] | None = None
    escalations: EscalationsPort | None = None  # missed instants are escalated as "missed schedule"
    lost_after: timedelta = LOST_AFTER
    backlogs: QueueBacklogPort | None = None  # None: every audit waits lost_after
    quick_lost_after: timedelta = QUICK_LOST_AFTER
    job_budget: timedelta = JOB_BUDGET
    tick_budget: timedelta = TICK_BUDGET
    monotonic: Callable[[], float] = time.monotonic
    dispatch_ahead: timedelta = DISPATCH_AHEAD
    io_concurrency: int = IO_CONCURRENCY
    _compiled: dict[tuple[str, int, str], CompiledSchedule] = field(default_factory=dict)
    _specs: SpecCache = field(default_factory=SpecCache)  # each job's spec at a version, for the process's life

    def tick(self, now: datetime, *, part: int = 0, parts: int = 1) -> TickReport:
        """One tick over the due shards of this ``part`` of ``parts`` parallel dispatchers (shard % parts ==
        part): a deployment with many jobs fans each tick out to several invocations (CDK ``dispatchers``)."""
        report = TickReport()
        mine = [shard for shard in range(due_shard_count()) if shard % parts == part]
        with ThreadPoolExecutor(max_workers=min(len(mine), self.io_concurrency) or 1) as pool:
            shards = pool.map(lambda shard: list(self.jobs.due(shard, now + self.due_window)), mine)
            entries = [entry for shard in shards for entry in shard]
        turning = wheel.scan(self.jobs, mine, now + self.due_window)
        listed = {(entry.job, entry.sk) for entry in entries}  # a job moving between the two is listed once
        entries += [entry for entry in turning.entries if (entry.job, entry.sk) not in listed]
        backfills = [entry for entry in entries if entry.backfill_id]
        changes = [entry for entry in entries if entry.pending_change]
        entries = [entry for entry in entries if not entry.backfill_id and not entry.pending_change]
        for entry in changes:  # a spec change a crash left half written: finished before its job is planned
            if self._isolated(entry.job, now, report, partial(self.jobs.settle_change, entry.job)):
                report.changes_settled += 1
        report.due_jobs = len(entries)
        plans = self._with_audit_messages(self._with_audit_waits(self._plan_all(entries, now, report)), now)
        unsent = self._send(plans, report)

        advanced: set[str] = set()  # jobs whose cursor this tick moved (a set's add is atomic: finished on threads)

        def finish(plan: _JobPlan) -> TickReport:
            own = TickReport()
            if self.after_step:
                self.after_step("send", plan.stored.key)
            if plan.stored.key not in unsent:  # else not advanced: the next tick sends these instants again
                self._isolated(plan.stored.key, now, own, partial(self._finish, plan, now, own))
            if own.advanced:
                advanced.add(plan.stored.key)
            return own

        with ThreadPoolExecutor(max_workers=self.io_concurrency) as pool:
            for own in pool.map(finish, plans):
                report.merge(own)
        # A due job on the wheel left over (an error, the budget, a race) holds its shard's mark: read again next tick.
        self._isolated("wheel marks", now, report, partial(self.jobs.mark_wheel, turning.marks(advanced), turning.read))
        self._wake_retries(now, report, [shard for shard in range(LEASE_SHARDS) if shard % parts == part])
        for entry in backfills:
            assert entry.backfill_id is not None
            step = partial(advance_backfill, self.jobs, self.runs, self.queues, entry.job, entry.backfill_id, now=now)
            if self._isolated(entry.job, now, report, step) is not None:  # one backfill's error stops no other
                report.backfills_advanced += 1
        return report

    def _with_audit_waits(self, plans: list[_JobPlan]) -> list[_JobPlan]:
        """Each plan's audit wait: quick where its priority class holds no backlog (read once a class and tick,
        before this tick's sends), else only the long one. Where the backlog cannot be read, only the long one."""
        if self.backlogs is None or not plans:
            return plans
        quiet: dict[str, bool] = {}
        for priority in sorted({plan.stored.spec.priority for plan in plans}):
            try:
                quiet[priority] = self.backlogs.backlog(priority) <= QUIET_DEPTH
            except Exception:  # a throttled or failing read: audit as before, never falsely early
                log.warning("backlog of the %s queues unread: the audit waits %s", priority, self.lost_after)
                quiet[priority] = False
        quick = AuditWait(self.lost_after, self.quick_lost_after)
        return [replace(plan, wait=quick) if quiet[plan.stored.spec.priority] else plan for plan in plans]

    def _with_audit_messages(self, plans: list[_JobPlan], now: datetime) -> list[_JobPlan]:
        """A sparse job's sent instant whose audit would need a visit of its own (its next natural visit comes later
        than the audit is due) is audited by a message sent beside its run message instead (``sent_audits``)."""
        audited = []
        for plan in plans:
            if plan.natural_visit is not None and plan.messages and plan.sparse:
                due = [self._audit_due(plan, message) for message, _ in plan.messages]
                if plan.natural_visit > min(due):
                    priority = plan.stored.spec.priority
                    sent = [AuditMessage(run=message, priority=priority) for message, _ in plan.messages]
                    plan = replace(plan, audits=[(audit, audit_delay(audit, now, self.lost_after)) for audit in sent])
            audited.append(plan)
        return audited

    def _audit_due(self, plan: _JobPlan, message: RunMessage) -> datetime:
        """When a visit of the job would have to audit ``message``'s instant, slack included."""
        quick = plan.wait.quick_after
        wait = quick if quick is not None else self.lost_after
        slack = timedelta(0) if quick is not None else AUDIT_SLACK
        return parse_instant(message.fire_at) + wait + self.due_window + slack

    def _plan_all(self, entries: list[DueEntry], now: datetime, report: TickReport) -> list[_JobPlan]:
        """Each due job's instants, within the tick's budget (a job left over stays due for the next)."""
        specs = self._specs.specs(self.jobs, {entry.job: entry.spec_version for entry in entries})
        # A job found on the wheel was read from its STATE item, audit mark and all: not read again for it.
        marks = {entry.job: entry.audited_to for entry in entries if entry.audited_to is not None}
        unread = sorted({entry.job for entry in entries} - set(marks))
        marks |= self.jobs.audit_marks(unread) if unread else {}
        # Company calendars and maintenance windows: one query a tick with due jobs, whatever their number.
        company = CompanySettings.read(self.jobs) if entries else NO_COMPANY
        started = self.monotonic()
        plans = []
        for entry in entries:
            if self.monotonic() - started > self.tick_budget.total_seconds():
                report.deferred += 1  # still due: the next tick plans it
                continue
            plan = self._isolated(
                entry.job,
                now,
                report,
                partial(self._plan, entry, specs.get(entry.job), marks.get(entry.job), now, company),
                budgeted=True,
            )
            if plan is not None:
                plans.append(plan)
        return plans

    def _send(self, plans: list[_JobPlan], report: TickReport) -> set[str]:
        """Send every plan's messages; the jobs some of whose messages failed (not advanced this tick).

        One batch across all due jobs per priority: ten messages per SQS request, not one job's each; teams
        interleaved so that no team's volume queues ahead of another team's first run."""
        unsent: set[str] = set()
        for priority in {plan.stored.spec.priority for plan in plans}:
            batch = interleave_teams(
                [
                    (plan.stored.key, message)
                    for plan in plans
                    if plan.stored.spec.priority == priority
                    for message in plan.messages
                ],
                team=lambda keyed: keyed[1][0].team,
                due_in=lambda keyed: max(timedelta(0), keyed[1][1]),  # overdue is due now
            )
            failed = self.queues.send_each(priority, [message for _, message in batch])
            unsent |= {batch[index][0] for index in failed}
            report.messages_sent += len(batch) - len(failed)
            # Behind the run messages: an audit is never on the queue before its run. (Sent in the same batches
            # would save requests only where a batch has room; the run messages are most of them.)
            audits = [(plan.stored.key, audit) for plan in plans if plan.stored.spec.priority == priority
                      for audit in plan.audits if plan.stored.key not in unsent]  # fmt: skip
            failed = self.queues.send_each(priority, [audit for _, audit in audits])
            unsent |= {audits[index][0] for index in failed}
            report.audits_sent += len(audits) - len(failed)
        return unsent

    def _isolated(
        self, job: str, now: datetime, report: TickReport, work: Callable[[], _T], *, budgeted: bool = False
    ) -> _T | None:
        """Run one job's part of the tick so that nothing it does can stop the others.

        ``budgeted``: the work is the schedule's own computation, so its wall time counts toward the job's
        budget. Writes (a long outage's MISSED records, a backfill's step) do not: a healthy job must
        not be quarantined for the work an outage left it; the engine's step limit bounds their compute."""
        started = self.monotonic()
        try:
            result = work()
        except ScheduleTooExpensive as error:
            self._quarantine(job, str(error), now, report)
            return None
        except Exception:
            log.exception("dispatching %s failed; it stays due for the next tick", job)
            report.job_errors += 1
            return None
        spent = self.monotonic() - started
        if budgeted and spent > self.job_budget.total_seconds():
            self._quarantine(job, f"its schedule took {spent:.1f} s to evaluate in one tick", now, report)
            return None
        return result

    def _quarantine(self, job: str, reason: str, now: datetime, report: TickReport) -> None:
        """Pause the job with the reason (visible on the job; resume or PUT a fixed spec to lift it)."""
        try:
            stored = pause_job(
                self.jobs, job, now=now, principal=QUARANTINE_PRINCIPAL, reason=QUARANTINE_PREFIX + reason
            )
        except Exception:
            log.exception("could not quarantine %s", job)
            report.job_errors += 1
            return
        report.quarantined += 1
        log.error("quarantined %s: %s", job, reason)
        if self.escalations is not None:
            event = EscalationEvent(
                kind="job_quarantined",
                subject=job,
                occurred_at=instant_text(now),
                team=stored.spec.team,
                job=job,
                error=QUARANTINE_PREFIX + reason,
            )
            self.escalations.publish(event.model_dump(exclude_none=True))

    def _plan(
        self,
        entry: DueEntry,
        stored: StoredJob | None,
        audited_to: datetime | None,
        now: datetime,
        company: CompanySettings,
    ) -> _JobPlan | None:
        if stored is None or stored.state != "ACTIVE" or stored.version != entry.spec_version:
            return None  # deleted, paused or being replaced: the change rewrote (or is rewriting) the due entry
        compiled = self._compiled_for(stored, company)
        plan = plan_due(compiled, last=entry.cursor, now=now, lookahead=self.lookahead)
        messages = [(scheduled_message(stored, o, fire_at=o.fire_at), o.fire_at - now) for o in plan.due]
        # A job stored before the audit existed starts its audit at its cursor.
        audit_from, wait = audited_to or entry.cursor, AuditWait(self.lost_after)
        natural, sparse = self._natural_visit(compiled, plan.cursor)
        return _JobPlan(entry, stored, compiled, plan, messages, audit_from, wait, natural, sparse)

    def _natural_visit(self, compiled: CompiledSchedule, cursor: datetime) -> tuple[datetime | None, bool]:
        """When the job's next instant brings it due, and whether the job is sparse: one instant a visit (its
        instants further apart than the lookahead uses), so it is visited early (``DISPATCH_AHEAD``)."""
        upcoming = compiled.next_fires(cursor, 2)
        if not upcoming:
            return None, False
        if len(upcoming) == 1 or upcoming[1].at - upcoming[0].at > self.lookahead - self.due_window:
            return upcoming[0].at - (self.dispatch_ahead - self.due_window), True
        return upcoming[0].at, False

    def _finish(self, job_plan: _JobPlan, now: datetime, report: TickReport) -> None:
        """After the messages are out: record missed instants, then advance the cursor."""
        spec, stored, plan = job_plan.stored.spec, job_plan.stored, job_plan.plan
        report.lateness_seconds += [max(0.0, -delay.total_seconds()) for _, delay in job_plan.messages]
        self._record_missed(job_plan, now, report)
        if self.after_step:
            self.after_step("missed", spec.key)
        audited_to = self._audit(job_plan, now, report)
        if plan.missed_before is not None:
            audited_to = max(audited_to, plan.missed_before)  # recorded MISSED above, not sent: nothing to audit
        next_visit = self._next_visit(job_plan, audited_to)
        slot = (  # an audit's own visit waits on the due index
            wheel.slot_for(spec.key, next_visit, sparse=job_plan.sparse, now=now, until=now + self.due_window)
            if next_visit == job_plan.natural_visit
            else None
        )
        advanced = self.jobs.advance(
            spec.key,
            spec_version=stored.version,
            old_cursor=job_plan.entry.cursor,
            cursor=plan.cursor,
            next_visit_at=next_visit,
            audited_to=audited_to,
            wheel_slot=slot,
        )
        if advanced:
            report.advanced += 1
        else:
            report.lost_races += 1
        if job_plan.messages:
            report.sent.append((spec.key, spec.team, [message.run_id for message, _ in job_plan.messages]))

    def _record_missed(self, job_plan: _JobPlan, now: datetime, report: TickReport) -> None:
        """Instants the catch-up policy gave up, recorded MISSED, with one escalation event per job and tick."""
        spec, stored, plan = job_plan.stored.spec, job_plan.stored, job_plan.plan
        recorded = []
        outside = []
        if plan.missed_before is not None:
            # Instants the outage pushed out of the catch-up window: recorded MISSED too (the expected-runs
            # ledger), up to a bound so a long outage of a frequent job costs bounded writes; the event
            # reports the full count.
            spans = job_plan.compiled.fires(job_plan.entry.cursor, until=plan.missed_before)
            window = spec.schedule.catchup.window if spec.schedule else None
            reason = f"missed: more than the catch-up window ({window}) overdue when dispatch resumed"
            outside = [(occurrence, reason) for occurrence in itertools.islice(spans, MAX_MISSED_RECORDED)]
        for occurrence, reason in [*outside, *plan.missed]:
            message = scheduled_message(stored, occurrence, fire_at=occurrence.fire_at)
            if self.runs.create(message, status=RunStatus.MISSED, now=now, retention=spec.run_retention, reason=reason):
                report.missed += 1
                recorded.append((occurrence.at, reason))
        if recorded and self.escalations is not None:
            # One event per job and tick, however many instants: the escalation handler pages once per incident.
            # (A crash before it leaves the instants recorded MISSED without this event: they are in the run
            # history and the MissedInstants metric, and the dispatcher-stall page has already fired.)
            self.escalations.publish(missed_event(spec.key, spec.team, recorded, now).model_dump(exclude_none=True))

    def _next_visit(self, job_plan: _JobPlan, audited_to: datetime) -> datetime | None:
        """When the job is due again: its next instant (early for a sparse job), or its next audit (unless its sent
        instants went out with their audit messages)."""
        plan = job_plan.plan
        next_visit = job_plan.natural_visit
        if job_plan.audits:
            return next_visit
        unaudited = job_plan.compiled.next_fires(audited_to, 1)
        if unaudited and unaudited[0].at <= plan.cursor:
            # The audit of that instant is due then (plus the due window the index is read with). With no backlog
            # in its class the audit is quick, and worth a visit of its own (a minutely job's lost instant found
            # in minutes, not at its next natural visit up to the lookahead later).
            quick = job_plan.wait.quick_after
            wait = quick if quick is not None else self.lost_after
            audit_at = unaudited[0].fire_at + wait + self.due_window  # read that early: visited at fire + wait
            slack = timedelta(0) if quick is not None else AUDIT_SLACK
            if next_visit is None or next_visit > audit_at + slack:
                next_visit = audit_at
        return next_visit

    def _audit(self, job_plan: _JobPlan, now: datetime, report: TickReport) -> datetime:
        """Record MISSED the instants sent in earlier ticks that are lost (``lost_audit.judge_lost``); returns the
        new audit mark. Reads: one keys-only Query; writes: only for lost instants."""
        spec, stored, wait = job_plan.stored.spec, job_plan.stored, job_plan.wait
        earliest = wait.quick_after if wait.quick_after is not None else wait.lost_after
        fired = list(
            itertools.takewhile(
                lambda occurrence: occurrence.fire_at <= now,
                itertools.islice(
                    job_plan.compiled.fires(job_plan.audited_to, until=job_plan.entry.cursor), MAX_AUDITED
                ),
            )
        )
        if not fired or fired[0].fire_at > now - earliest:
            return job_plan.audited_to
        # Up to the last instant's every run (a distinct schedule's id is the instant and its name).
        found = self.runs.scheduled_ids(spec.key, fired[0].run_id, scheduled_run_id(fired[-1].at) + LAST_OF_INSTANT)
        judged = judge_lost(fired, found, now, wait)
        recorded = []
        for occurrence in judged.lost:
            reason = lost_reason(format_duration(now - occurrence.fire_at))
            message = scheduled_message(stored, occurrence, fire_at=occurrence.fire_at)
            if self.runs.create(message, status=RunStatus.MISSED, now=now, retention=spec.run_retention, reason=reason):
                recorded.append((occurrence.at, reason))
        if recorded:
            report.lost += len(recorded)
            log.error("%s: %d instant(s) without a run record: run messages lost", spec.key, len(recorded))
            if self.escalations is not None:
                event = missed_event(spec.key, spec.team, recorded, now)
                self.escalations.publish(event.model_dump(exclude_none=True))
        return judged.audited_to or job_plan.audited_to

    def _compiled_for(self, stored: StoredJob, company: CompanySettings) -> CompiledSchedule:
        key = (stored.key, stored.version, company.version)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = schedule_of(stored, company)
            assert compiled is not None  # only jobs with a schedule are on the due index
            if len(self._compiled) > 10_000:
                self._compiled.clear()
            self._compiled[key] = compiled
        return compiled

    def _wake_retries(self, now: datetime, report: TickReport, shards: list[int]) -> None:
        """Retries whose backoff was longer than SQS can delay come back through here; so does a run waiting for
        data at its wait's end (its polls do that too: this is the backstop that ends it if they were lost)."""
        until = now + self.lookahead
        for shard in shards:
            for run in self.runs.wakeups(shard, until):
                waiting = run.status is RunStatus.WAITING
                if (run.status is not RunStatus.RETRYING and not waiting) or run.next_attempt_at is None:
                    continue
                stored = self.jobs.get(run.job)
                if stored is None:
                    continue
                attempt = run.attempt if waiting else run.attempt + 1
                message = run.to_message(attempt=attempt, fire_at=run.fire_at if waiting else run.next_attempt_at)
                self.queues.send(stored.spec.priority, [(message, run.next_attempt_at - now)])
                if self.runs.clear_wake(run.job, run.run_id, attempt=run.attempt):
                    report.retries_woken += 1
