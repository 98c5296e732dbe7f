"""Event intake: an event a job's rule matched becomes one run, or is dropped with a reason and counted.

The order is what makes it exactly once and bounded:
1. the job, its trigger and its state as stored now (a deleted job, a changed trigger, a pause drop it);
2. the event's source checked again as the team's (tags change after a job is stored);
3. the run named by the event (``EventEnvelope.run_id``): a run already there is a redelivery, re-sent only
   if it never left SCHEDULED (a crash between the create and the send), never started twice;
4. the job's ``max_runs_per_minute`` taken, one conditional counter write per minute window: a storm starts
   at most that many runs a minute and drops the rest, counted (nothing queues without bound);
5. the run created conditionally (a concurrent delivery of the same event loses here), then sent.
A crash after any step leaves the intake message on its queue; its redelivery resumes at the first step not
done. Overlap and ``max_running`` apply when the worker claims the run, as for scheduled runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from jobsched.core.durations import format_duration
from jobsched.core.errors import BatchContention
from jobsched.core.event_batches import EventBatch, batch_named, batch_run_id, run_events_path
from jobsched.core.event_patterns import RESERVED_SOURCE_PREFIXES
from jobsched.core.events import (
    CONTAINER_TRIGGER,
    MAX_EVENT_PAYLOAD_BYTES,
    WAKE_PREFIX,
    EventEnvelope,
    after_run_id,
    s3_key_matches,
    trigger_fingerprint,
)
from jobsched.core.messages import DagTaskFailure, parse_work_message
from jobsched.core.records import StoredJob
from jobsched.core.run_records import Run, StaleAttempt
from jobsched.core.runs import TERMINAL, RunMessage, RunStatus, instant_text, parse_instant
from jobsched.core.spec import DEFAULT_BUS, AfterTrigger, JobTrigger
from jobsched.core.waits import MAX_WAITERS_WOKEN, wake_rule
from jobsched.pipeline.containers import ContainerResults, detail_id
from jobsched.pipeline.event_budget import EventBudget
from jobsched.pipeline.reruns import reopen_and_send
from jobsched.ports import EventBatchesPort, EventIntakeStorePort, RunsPort, WorkQueuesPort
from jobsched.tenancy.ownership import NotOwned, OwnershipGuard, trigger_resources

log = logging.getLogger(__name__)

BATCH_TRIES = 4  # batches started while adding one event before it is left for its redelivery

DropReason = Literal["deleted", "stale_rule", "paused", "before_job", "not_owned", "rate_limited", "malformed"]


@dataclass(frozen=True)
class Received:
    """What became of one delivered event."""

    action: Literal["started", "batched", "noted", "duplicate", "resent", "dropped", "woke", "ended"]
    run_id: str | None = None
    reason: DropReason | None = None
    detail: str = ""
    team: str | None = None

    @property
    def matched(self) -> bool:
        """A current trigger of an active job matched it (whatever then became of it)."""
        return self.action != "dropped" or self.reason in ("not_owned", "rate_limited")


class EventIntake:
    def __init__(
        self,
        jobs: EventIntakeStorePort,
        runs: RunsPort,
        queues: WorkQueuesPort,
        *,
        guard: OwnershipGuard | None = None,
        containers: ContainerResults | None = None,
    ) -> None:
        self.jobs, self.runs, self.queues, self.guard = jobs, runs, queues, guard
        self.containers = containers
        self.budget = EventBudget(lambda team: jobs.team_limits(team))

    def receive(self, envelope: EventEnvelope, *, now: datetime, redelivered: bool = False) -> Received:
        """``redelivered``: SQS has delivered this message before (its receive count): it always takes the whole
        path, so a run its first delivery created and crashed before sending is sent again."""
        if envelope.jobsched.trigger == CONTAINER_TRIGGER:
            return self._container_stopped(envelope)
        named_team = envelope.job.split("/", 1)[0]
        over = None if redelivered else self.budget.refusal(envelope.job, named_team, now)
        if over is not None:  # nothing read: a storm of one team's events costs the shared intake little
            return _dropped("rate_limited", over, named_team)
        stored = self.jobs.get(envelope.job)
        if stored is None:
            return _dropped("deleted", "the job does not exist (deleted, or not yet stored)")
        team = stored.spec.team
        if envelope.jobsched.trigger.startswith(WAKE_PREFIX):
            return self._wake(stored, envelope)
        trigger = _current_trigger(stored, envelope.jobsched.trigger)
        if trigger is None:
            return _dropped("stale_rule", "the trigger whose rule matched is no longer the job's", team)
        inactive = _inactive_at(stored, envelope.time)
        if inactive is not None:
            return _dropped(inactive[0], inactive[1], team)
        refused = self._refusal(stored, trigger, envelope)
        if refused is not None:
            return _dropped("not_owned", refused, team)
        if trigger.after is not None:
            return self._after(stored, trigger, envelope, now)
        if trigger.batch is not None:
            return self._batched(stored, trigger, envelope, now)
        return self._single(stored, trigger, envelope, now)

    def _container_stopped(self, envelope: EventEnvelope) -> Received:
        """A container task the scheduler started has stopped: its run ends by its exit codes (``containers``)."""
        if self.containers is None:
            return _dropped("stale_rule", "this deployment runs no container targets")
        recorded = self.containers.stopped(envelope.detail)
        if recorded == "recorded":
            return Received("ended", detail=detail_id(envelope.detail))
        if recorded == "stale":
            return Received("duplicate", detail="the attempt already ended, or is not this task's")
        reason: DropReason = "not_owned" if recorded == "not_ours" else "malformed"
        return _dropped(reason, f"the task is not the one its run's attempt started ({recorded})")

    def _wake(self, stored: StoredJob, envelope: EventEnvelope) -> Received:
        """An event that may meet the job's waits (its object created, its upstream's run succeeded): the runs
        and tasks of the job waiting on that object or job are sent at once, to be checked (a woken delivery
        is never sent again, so a storm of wakes costs checks, never messages that multiply)."""
        team = stored.spec.team
        rule = wake_rule(stored.spec, envelope.jobsched.trigger)
        if rule is None:
            return _dropped("stale_rule", "the job no longer waits on what this rule matched", team)
        created = envelope.s3_object
        s3 = rule.trigger.s3
        if s3 is not None and (created is None or not s3_key_matches(s3, created["bucket"], created["key"])):
            return _dropped("stale_rule", "the object is not one the job waits for", team)
        detail = envelope.detail
        about = (
            f"s3://{created['bucket']}/{created['key']}"
            if created is not None
            else f"job:{detail.get('team')}/{detail.get('job')}"
        )
        waiting = self.jobs.waiters(envelope.job, limit=MAX_WAITERS_WOKEN, awaiting=about)
        messages = [(parse_work_message(body), timedelta(0)) for body in waiting.values()]
        runs = [(message, delay) for message, delay in messages if not isinstance(message, DagTaskFailure)]
        if runs:
            self.queues.send(stored.spec.priority, runs)
        return Received("woke", detail=f"{len(runs)} waiting runs and tasks woken", team=team)

    def _single(self, stored: StoredJob, trigger: JobTrigger, envelope: EventEnvelope, now: datetime) -> Received:
        """One run for the event, named by the event's identity."""
        run_id = envelope.run_id()
        settled = self._exists_or_limited(stored, run_id, now)
        if settled is not None:
            return settled
        if envelope.size > MAX_EVENT_PAYLOAD_BYTES:
            # Kept before the run exists, so a run never points at an event that is not there.
            self.jobs.keep_event(envelope.job, run_id, dict(envelope.event), expires_at=now + stored.spec.run_retention)
        message = _event_run(
            stored,
            run_id,
            instant=envelope.time,
            fire_at=envelope.time,  # the run's lateness is then its event-to-start latency
            detail=envelope.trigger_detail(trigger.kind),
            payload=envelope.payload(trigger.kind, events_ref=run_events_path(envelope.job, run_id)),
        )
        return self._start(stored, message, now)  # a duplicate: the same event, delivered twice at once

    def _after(self, stored: StoredJob, trigger: JobTrigger, envelope: EventEnvelope, now: datetime) -> Received:
        """An upstream run finished: the downstream run for its logical instant, once (for all-of, once every
        upstream has finished a run for that instant). The upstream run is read back, so only a run that
        really ended so can start one (a forged or stale Run Finished cannot), and another team's upstream
        must share with this team (checked again on arrival)."""
        assert trigger.after is not None
        team, detail = stored.spec.team, envelope.detail
        finished = self._upstream_run(stored, trigger.after, detail)
        if isinstance(finished, Received):
            return finished
        upstream = finished.job
        instant, upstreams = finished.scheduled_at, {upstream: finished.run_id}
        if trigger.after.needs_all:
            upstreams = self.jobs.note_upstream(
                envelope.job,
                envelope.jobsched.trigger,
                instant,
                upstream,
                finished.run_id,
                expires_at=now + stored.spec.run_retention,
            )
            if set(upstreams) < set(trigger.after.upstreams):
                return Received("noted", team=team)
        run_id = after_run_id(instant)
        if finished.downstream_attempt == finished.attempt:
            carried = self._carry_rerun(stored, run_id, finished, now)
            if carried is not None:
                return carried
        settled = self._exists_or_limited(stored, run_id, now)
        if settled is not None:
            return settled
        shown = {
            "kind": "after",
            "upstreams": [
                {"job": name, "run_id": run, "status": detail.get("status") if name == upstream else None}
                for name, run in sorted(upstreams.items())
            ],
        }
        # The upstream's logical instant; lateness counts from the upstream's finish (the event's time).
        message = _event_run(
            stored, run_id, instant=instant, fire_at=envelope.time, detail=shown, payload={"trigger": shown}
        )
        return self._start(stored, message, now)  # a duplicate: two upstream finishes at once

    def _carry_rerun(self, stored: StoredJob, run_id: str, upstream: Run, now: datetime) -> Received | None:
        """The upstream's finish is of a rerun asked to carry its downstreams (``rerun --downstream``): this
        job's run of the instant runs again, once per upstream attempt, and carries its own downstreams in
        turn. None: there is no run of the instant yet, so it starts as any after run does.
        Once only: a run already running again only gets the marker (a crash after the reopen); a finished one
        is reopened unless the marker says this upstream attempt did it before (a late redelivery), and two
        deliveries at once meet the reopen's condition."""
        team = stored.spec.team
        existing = self.runs.get(stored.spec.key, run_id)
        if existing is None:
            return None
        marker = f"{upstream.job}/{upstream.run_id}#{upstream.attempt}"
        expires_at = now + stored.spec.run_retention
        if existing.status not in TERMINAL or self.jobs.carried(stored.spec.key, run_id, marker):
            self.jobs.mark_carried(stored.spec.key, run_id, marker, expires_at=expires_at)
            return Received("duplicate", run_id=run_id, team=team)
        # Another team's rerun drives this job: it spends this job's own event budget like any event-started
        # run (six upstream reruns in a minute do not make six runs of a job limited to one).
        limited = self._over_limit(stored, now)
        if limited is not None:
            self.jobs.mark_carried(stored.spec.key, run_id, marker, expires_at=expires_at)
            return limited
        reason = f"rerun after {upstream.job} {upstream.run_id} attempt {upstream.attempt} (--downstream)"
        try:
            reopen_and_send(stored, existing, self.runs, self.queues, now=now, reason=reason, downstream=True)
        except StaleAttempt:
            return Received("duplicate", run_id=run_id, team=team)
        self.jobs.mark_carried(stored.spec.key, run_id, marker, expires_at=expires_at)
        details = {"run_id": run_id, "attempt": existing.attempt + 1, "was": existing.status.value}
        self.jobs.record_action(
            stored.spec.key,
            version=stored.version,
            now=now,
            principal=f"rerun of {upstream.job} {upstream.run_id} attempt {upstream.attempt} (--downstream)",
            action="rerun",
            details=details | {"upstream": f"{upstream.job}/{upstream.run_id}#{upstream.attempt}"},
        )
        return Received("started", run_id=run_id, detail="rerun with its upstream", team=team)

    def _upstream_run(self, stored: StoredJob, after: AfterTrigger, detail: dict[str, Any]) -> Run | Received:
        """The upstream run a Run Finished names, read back; or why it may not start this job's run."""
        team = stored.spec.team
        upstream = f"{detail.get('team')}/{detail.get('job')}"
        if upstream not in after.upstreams:
            return _dropped("stale_rule", f"{upstream} is not an upstream of this trigger", team)
        finished = self.runs.get(upstream, str(detail.get("run_id") or ""))
        if finished is None or finished.status.value != detail.get("status"):
            return _dropped("not_owned", f"no run {detail.get('run_id')} of {upstream} ended so", team)
        if finished.status.value.lower() not in after.status:
            return _dropped("stale_rule", f"{upstream} ended {finished.status.value}, not a status it waits for", team)
        if upstream.split("/", 1)[0] != team:
            shared = self.jobs.get(upstream)
            if shared is None or team not in shared.spec.share_with:
                return _dropped("not_owned", f"{upstream} does not share its runs with team {team}", team)
        return finished

    def _batched(self, stored: StoredJob, trigger: JobTrigger, envelope: EventEnvelope, now: datetime) -> Received:
        """The event into its trigger's open batch, or a new batch when that one is closed, full or past its
        window. Whoever starts a batch creates and sends its run (delayed by the window) before adding; the run
        of a batch whose starter died is made sure of by the next event to use or replace that batch."""
        assert trigger.batch is not None
        job, fingerprint, team = envelope.job, envelope.jobsched.trigger, stored.spec.team
        event = envelope.batched(trigger.kind)
        batch = self.jobs.current_batch(job, fingerprint)
        for _ in range(BATCH_TRIES):
            if batch is None:
                started = self._start_batch(stored, trigger, fingerprint, after=0, now=now)
                if isinstance(started, Received):
                    return started
                batch = started
            added = self.jobs.add_to_batch(
                batch, event, now=now, window=trigger.batch.window, max_events=trigger.batch.max_events
            )
            if added.status == "duplicate":
                return Received("duplicate", team=team)
            if added.status == "closed":
                started = self._start_batch(stored, trigger, fingerprint, after=batch.number, now=now)
                if isinstance(started, Received):
                    return started
                batch = started
                continue
            if not added.run_sent:
                self._send_batch_run(stored, trigger, batch, now)
            if added.status == "filled":  # full: its run need not wait for the window's end
                self._send_batch_run(stored, trigger, batch, now, at_once=True)
            return Received("batched", run_id=batch.run_id, team=team)
        raise BatchContention(f"{job}: the trigger's batch changed {BATCH_TRIES} times while adding one event")

    def _start_batch(
        self, stored: StoredJob, trigger: JobTrigger, fingerprint: str, *, after: int, now: datetime
    ) -> EventBatch | Received:
        """The batch after number ``after``, started by this call (then its run is sent here) or by another."""
        job = stored.spec.key
        run_id = batch_run_id(job, fingerprint, after + 1, now)
        started, replaced = self.jobs.start_batch(job, fingerprint, after=after, run_id=run_id, now=now)
        if replaced is not None and not replaced.run_sent and replaced.count:
            self._send_batch_run(stored, trigger, replaced, now)  # its starter died before sending
        if started.run_id != run_id:
            return started  # another call started it, and sends its run
        refused = self._over_limit(stored, now)
        if refused is not None:
            # No run for this batch: closed, so that no event waits in it. An event another intake added in
            # the moment before the close still gets the run (one over the limit, never an event lost).
            if self.jobs.close_batch(job, fingerprint, started.number):
                self._send_batch_run(stored, trigger, started, now)
            return refused
        self._send_batch_run(stored, trigger, started, now)
        return started

    def _send_batch_run(
        self, stored: StoredJob, trigger: JobTrigger, batch: EventBatch, now: datetime, *, at_once: bool = False
    ) -> None:
        """Create the batch's run (once) and send it, to start when the window has passed (or now, when full)."""
        assert trigger.batch is not None
        window_end = batch.opened_at + trigger.batch.window
        message = _event_run(
            stored,
            batch.run_id,
            instant=batch.opened_at,
            fire_at=min(now, window_end) if at_once else window_end,
            detail={
                "kind": trigger.kind,
                "batch": {
                    "number": batch.number,
                    "trigger": batch.trigger,
                    "window": format_duration(trigger.batch.window),
                    "max_events": trigger.batch.max_events,
                },
            },
        )
        created = self._create(stored, message, now)
        existing = None if created is not None else self.runs.get(batch.job, batch.run_id)
        if created is not None or (existing is not None and existing.status is RunStatus.SCHEDULED):
            delay = max(timedelta(0), parse_instant(message.fire_at) - now)
            self.queues.send(stored.spec.priority, [(message, delay)])
        self.jobs.mark_batch_sent(batch)

    def _exists_or_limited(self, stored: StoredJob, run_id: str, now: datetime) -> Received | None:
        """A run already there (a redelivery: re-sent only while SCHEDULED), or the job's events have started
        ``max_runs_per_minute`` runs this minute; None: the run may be created."""
        existing = self.runs.get(stored.spec.key, run_id)
        if existing is not None:
            return self._again(stored, existing.to_message(), existing.status)
        return self._over_limit(stored, now)

    def _over_limit(self, stored: StoredJob, now: datetime) -> Received | None:
        """Counts one more run started by events this minute; the drop when that passes the job's limit."""
        limit = stored.spec.concurrency.max_runs_per_minute
        if self.jobs.count_event_run(stored.spec.key, now=now, limit=limit):
            return None
        self.budget.exhausted(stored.spec.key, now)
        return _dropped("rate_limited", f"{limit} runs already started by events this minute", stored.spec.team)

    def _start(self, stored: StoredJob, message: RunMessage, now: datetime) -> Received:
        """Create the run and send it; a duplicate if another delivery created it first."""
        team = stored.spec.team
        if self._create(stored, message, now) is None:
            return Received("duplicate", run_id=message.run_id, team=team)
        self.queues.send(stored.spec.priority, [(message, timedelta(0))])
        return Received("started", run_id=message.run_id, team=team)

    def _create(self, stored: StoredJob, message: RunMessage, now: datetime) -> Run | None:
        """The run SCHEDULED, once (None: it exists already)."""
        return self.runs.create(
            message,
            status=RunStatus.SCHEDULED,
            now=now,
            retention=stored.spec.run_retention,
            deadline=stored.spec.deadline,
        )

    def _again(self, stored: StoredJob, message: RunMessage, status: RunStatus) -> Received:
        if status is RunStatus.SCHEDULED:
            # Created, then the intake died before sending (or the send is in flight): send again; the
            # worker's claim admits one message of a run.
            self.queues.send(stored.spec.priority, [(message, timedelta(0))])
            return Received("resent", run_id=message.run_id, team=stored.spec.team)
        return Received("duplicate", run_id=message.run_id, team=stored.spec.team)

    def _refusal(self, stored: StoredJob, trigger: JobTrigger, envelope: EventEnvelope) -> str | None:
        """Why this event may not start the team's run, now (None: it may)."""
        if trigger.s3 is not None:
            found = envelope.s3_object
            if found is None or not s3_key_matches(trigger.s3, found["bucket"], found["key"]):
                return "the event is not an object created under the trigger's bucket, prefix and suffix"
        elif (
            trigger.event is not None
            and trigger.event.bus == DEFAULT_BUS
            and envelope.source.startswith(RESERVED_SOURCE_PREFIXES)
        ):
            return f"source '{envelope.source}' is not for a trigger on the shared bus"
        if self.guard is not None:
            for resource in trigger_resources(trigger):
                try:
                    self.guard.check(resource, stored.spec.team)
                except NotOwned as refused:
                    return str(refused)
            if trigger.event is not None and trigger.event.bus == DEFAULT_BUS:  # a grant may have been taken back
                return self.guard.source_refusal(envelope.source, stored.spec.team)
        return None


def _event_run(
    stored: StoredJob,
    run_id: str,
    *,
    instant: datetime,
    fire_at: datetime,
    detail: dict[str, Any],
    payload: dict[str, Any] | None = None,
) -> RunMessage:
    """The message of a run an event (or a batch, or an upstream's finish) starts."""
    job = stored.spec.key
    return RunMessage(
        job=job,
        team=stored.spec.team,
        run_id=run_id,
        scheduled_at=instant_text(instant),
        fire_at=instant_text(fire_at),
        spec_version=stored.version,
        trigger="event",
        correlation_id=f"{job}/{run_id}",
        payload_override=payload,
        trigger_detail=detail,
    )


def _current_trigger(stored: StoredJob, fingerprint: str) -> JobTrigger | None:
    return next((t for t in stored.spec.triggers if trigger_fingerprint(t) == fingerprint), None)


def _inactive_at(stored: StoredJob, at: datetime) -> tuple[DropReason, str] | None:
    """Why the job was not listening when the event happened: paused now, paused then (a resume does not
    replay what arrived while paused), or not yet registered (a job deleted and registered again)."""
    if stored.state == "PAUSED":
        return "paused", "the job is paused"
    if at < stored.created_at:
        return "before_job", f"the event ({instant_text(at)}) is older than the job ({instant_text(stored.created_at)})"
    paused_then = stored.last_paused_at, stored.resumed_at
    if paused_then[0] is not None and paused_then[1] is not None and paused_then[0] <= at < paused_then[1]:
        return "paused", "the event happened while the job was paused"
    return None


def _dropped(reason: DropReason, detail: str, team: str | None = None) -> Received:
    return Received("dropped", reason=reason, detail=detail, team=team)


def run_events(store: EventBatchesPort, run: Run) -> list[dict[str, Any]] | None:
    """The events that started ``run``, whole: a batch's entries, the event kept because it was large, or
    the one in the run's payload (None: the run was not started by an event)."""
    batch = batch_named(run.trigger_detail)
    if batch is not None:
        return [event.entry for event in store.batch_events(run.job, *batch)]
    if run.trigger != "event":
        return None
    kept = store.kept_event(run.job, run.run_id)
    if kept is not None:
        return [kept]
    payload = run.payload
    return [payload["event"]] if isinstance(payload, dict) and isinstance(payload.get("event"), dict) else []
