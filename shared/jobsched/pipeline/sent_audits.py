"""A sparse job's sent instant audited by a message (#51), not by a visit of the dispatcher of its own.

A job whose instants are further apart than the dispatcher's lookahead (hourly, daily) has one instant a visit,
and its next natural visit is up to a day away: its sent instant used to be audited at a visit of its own a few
minutes after its fire time, moving the job's cursor item and its due-index key twice more (three write units a
run, more than the run's own claim and result). Instead the visit that sends the run message sends an
``AuditMessage`` beside it, delayed as far as SQS delays (15 minutes), on the same work queue; the worker then:
- finds the run record (the usual case: one keys-only read) and is done;
- or, before ``lost_after`` has passed since the fire time, sends the message again to come back then (the run
  message may only be queued behind others);
- or records the instant MISSED as lost, counts it (``LostRunMessages``) and pages, as the dispatcher's audit
  does: the same conditional create, so a record written meanwhile wins, and a message that was only late
  still starts its run (``claim_attempt`` takes a lost record).
The dispatcher's own audit at the job's next natural visit moves the audit mark over the instant (it finds the
record, run or MISSED) and catches anything this missed: a message lost with its audit is found a visit later,
as before quick audits existed. A job changed or paused since the visit is not this audit's to judge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.core.durations import format_duration
from jobsched.core.messages import AuditMessage
from jobsched.core.outcome import Outcome
from jobsched.core.runs import MAX_SQS_DELAY, RunStatus, parse_instant
from jobsched.pipeline.lost_audit import LOST_AFTER, lost_reason, missed_event
from jobsched.ports import EscalationsPort, JobsPort, RunsPort
from jobsched.watch.signals import emit

log = logging.getLogger(__name__)


def audit_delay(audit: AuditMessage, now: datetime, lost_after: timedelta = LOST_AFTER) -> timedelta:
    """How long an audit message waits on the queue: until its instant may be judged, as far as SQS delays."""
    due = parse_instant(audit.run.fire_at) + lost_after
    return max(timedelta(0), min(due - now, MAX_SQS_DELAY))


@dataclass(frozen=True)
class SentAudits:
    jobs: JobsPort
    runs: RunsPort
    escalations: EscalationsPort | None
    clock: Callable[[], datetime]
    lost_after: timedelta = LOST_AFTER

    def audit(self, message: AuditMessage) -> Outcome:
        run, priority = message.run, message.priority
        if run.run_id in self.runs.scheduled_ids(run.job, run.run_id, run.run_id):
            return Outcome("audited", "its run record exists", priority=priority)
        now = self.clock()
        fired = parse_instant(run.fire_at)
        if now < fired + self.lost_after:
            wait = audit_delay(message, now, self.lost_after)
            return Outcome("waiting", "no run record yet: looked at again", wait=wait, priority=priority)
        stored = self.jobs.get(run.job, consistent=False)
        if stored is None or stored.state != "ACTIVE" or stored.version != run.spec_version:
            return Outcome("audited", "the job changed since: its next visit accounts for it", priority=priority)
        reason = lost_reason(format_duration(now - fired))
        retention = stored.spec.run_retention
        created = self.runs.create(run, status=RunStatus.MISSED, now=now, retention=retention, reason=reason)
        if created is None:
            return Outcome("audited", "its run record was written meanwhile", priority=priority)
        emit("LostRunMessages", 1)
        log.error("%s: instant %s without a run record: its run message was lost", run.job, run.run_id)
        if self.escalations is not None:
            missed = [(parse_instant(run.scheduled_at), reason)]
            self.escalations.publish(missed_event(run.job, run.team, missed, now).model_dump(exclude_none=True))
        return Outcome("lost", "recorded MISSED: its run message was lost", run=created, priority=priority)
