"""Freshness of what a job produces (Dagster's freshness policies, Prefect's SLAs). Pure.

A job's ``freshness: {deadline: "09:00", timezone, max_age}`` says by when a successful run must exist:

- with ``deadline``: at each day's deadline (local wall time in ``timezone``; a deadline in a DST gap falls after
  the gap, one in the repeated hour at its first occurrence), the job is fresh if its last success finished no
  earlier than ``max_age`` (default 24 h) before it; otherwise stale until its next success.
- with ``max_age`` alone: the job is stale once ``max_age`` has passed since its last success.

A job that did not run at all is as stale as one that failed: before any success, its age counts from when the
policy was set. Each judgement at a deadline counts in the job's tier budget (met: one good event; missed: one
bad), and so does each stale transition of a max-age policy (one bad event): ``core.slo``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from jobsched.core.runs import instant_text, parse_instant
from jobsched.core.tz import UTC, get_zone

if TYPE_CHECKING:
    from jobsched.core.spec import JobSpec

DEFAULT_DEADLINE_MAX_AGE = timedelta(hours=24)


class Freshness(StrEnum):
    UNKNOWN = "unknown"  # not judged yet: the first deadline (or max age) has not come
    FRESH = "fresh"
    STALE = "stale"


@dataclass(frozen=True)
class FreshnessPolicy:
    deadline: time | None
    timezone: str
    max_age: timedelta

    @classmethod
    def of(cls, deadline: str | None, timezone: str, max_age: timedelta | None) -> FreshnessPolicy:
        at = time.fromisoformat(deadline) if deadline is not None else None
        return cls(at, timezone, max_age if max_age is not None else DEFAULT_DEADLINE_MAX_AGE)

    def next_deadline(self, after: datetime) -> datetime | None:
        """The first deadline strictly after ``after`` (UTC), or None without one."""
        if self.deadline is None:
            return None
        zone = get_zone(self.timezone)
        local_day = after.astimezone(zone).date()
        for offset in range(-1, 3):
            candidate = self.deadline_on(local_day + timedelta(days=offset), zone)
            if candidate > after:
                return candidate
        raise AssertionError("a day always has a deadline")  # pragma: no cover

    def deadline_on(self, day: date, zone: Any = None) -> datetime:
        assert self.deadline is not None
        local = datetime.combine(day, self.deadline, tzinfo=zone or get_zone(self.timezone))
        # A wall time in a DST gap maps past the gap (fold 0 keeps the offset before it); UTC round trip settles it.
        return local.astimezone(UTC)

    def describe(self) -> str:
        if self.deadline is None:
            return f"a success within {_short(self.max_age)}"
        return f"a success within {_short(self.max_age)} before {self.deadline.strftime('%H:%M')} {self.timezone}"


def policy_of(spec: JobSpec) -> FreshnessPolicy | None:
    """A job's freshness policy, its time zone the schedule's unless it names one."""
    if spec.freshness is None:
        return None
    zone = spec.freshness.timezone or (spec.schedule.timezone if spec.schedule is not None else "UTC")
    return FreshnessPolicy.of(spec.freshness.deadline, zone, spec.freshness.max_age)


@dataclass(frozen=True)
class FreshnessState:
    """What is kept per job (on its health item): the last success, the state, and when to judge next."""

    since: datetime  # when the policy was set: a job that never succeeded is as old as this
    state: Freshness = Freshness.UNKNOWN
    last_success_at: datetime | None = None
    stale_since: datetime | None = None
    check_at: datetime | None = None  # the next judgement (None: nothing to judge until a success)
    reason: str | None = None  # why it is stale, as users read it

    def as_values(self) -> dict[str, Any]:
        return {
            "since": instant_text(self.since),
            "state": self.state.value,
            "last_success_at": _text(self.last_success_at),
            "stale_since": _text(self.stale_since),
            "check_at": _text(self.check_at),
            "reason": self.reason,
        }

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> FreshnessState:
        def instant(name: str) -> datetime | None:
            return parse_instant(values[name]) if values.get(name) else None

        since = instant("since")
        assert since is not None
        return cls(
            since=since,
            state=Freshness(values.get("state", Freshness.UNKNOWN.value)),
            last_success_at=instant("last_success_at"),
            stale_since=instant("stale_since"),
            check_at=instant("check_at"),
            reason=values.get("reason"),
        )


@dataclass(frozen=True)
class Judgement:
    """A judgement's result: the new state, and what it counts in the tier budget and whom it pages."""

    state: FreshnessState
    counted: bool = False  # one event in the tier's budget
    stale: bool = False  # ... a bad one
    became_stale: bool = False  # page: the job went stale
    became_fresh: bool = False  # resolve: a success made a stale job fresh


def started(policy: FreshnessPolicy, now: datetime) -> FreshnessState:
    """The state of a policy just set: nothing judged, the first judgement due."""
    return FreshnessState(since=now, check_at=_first_check(policy, now, None))


def judge(policy: FreshnessPolicy, state: FreshnessState, now: datetime) -> Judgement:
    """The checker's judgement once ``state.check_at`` has come (``now`` at or after it)."""
    due = state.check_at
    if due is None or now < due:
        return Judgement(state)
    newest = state.last_success_at or state.since
    expiry = newest + policy.max_age
    if policy.deadline is not None and policy.next_deadline(due - timedelta(microseconds=1)) != due:
        return Judgement(replace(state, check_at=policy.next_deadline(now)))  # the deadline moved: judge at the new
    if policy.deadline is not None:
        fresh = state.last_success_at is not None and state.last_success_at >= due - policy.max_age
        reason = None if fresh else _missed_deadline(policy, state, due)
        counted = True
    else:  # a max-age expiry: stale only if no success came since (a success moves the check)
        fresh = now < expiry
        reason = None if fresh else f"no success for {_short(now - newest)} (max age {_short(policy.max_age)})"
        counted = not fresh and state.state is not Freshness.STALE
    following = _next_check(policy, now, state.last_success_at if fresh else None, stale=not fresh)
    if fresh:
        new_state = replace(state, state=Freshness.FRESH, stale_since=None, reason=None, check_at=following)
        return Judgement(new_state, counted=counted)
    was_stale = state.state is Freshness.STALE
    new_state = replace(
        state,
        state=Freshness.STALE,
        stale_since=state.stale_since if was_stale else due,
        reason=reason,
        check_at=following,
    )
    return Judgement(new_state, counted=counted, stale=counted, became_stale=not was_stale)


def succeeded(policy: FreshnessPolicy, state: FreshnessState, finished_at: datetime, now: datetime) -> Judgement:
    """A run succeeded: the job is fresh (if this success is its newest). A deadline not judged yet keeps its
    judgement (the checker counts this success in it, within the minute it ticks); a max-age expiry moves on."""
    if state.last_success_at is not None and finished_at <= state.last_success_at:
        return Judgement(state)  # an older success reported late: nothing newer
    if policy.deadline is None:
        check_at: datetime | None = finished_at + policy.max_age
    else:
        check_at = state.check_at if state.check_at is not None else policy.next_deadline(now)
    new_state = replace(
        state, last_success_at=finished_at, state=Freshness.FRESH, stale_since=None, reason=None, check_at=check_at
    )
    return Judgement(new_state, became_fresh=state.state is Freshness.STALE)


def _first_check(policy: FreshnessPolicy, now: datetime, last_success: datetime | None) -> datetime | None:
    if policy.deadline is not None:
        return policy.next_deadline(now)
    return (last_success or now) + policy.max_age


def _next_check(
    policy: FreshnessPolicy, now: datetime, last_success: datetime | None, *, stale: bool
) -> datetime | None:
    if policy.deadline is not None:
        return policy.next_deadline(now)
    if stale:
        return None  # stays stale until a success, which sets the next expiry
    assert last_success is not None
    return last_success + policy.max_age


def _missed_deadline(policy: FreshnessPolicy, state: FreshnessState, due: datetime) -> str:
    deadline = policy.deadline.strftime("%H:%M") if policy.deadline else ""
    if state.last_success_at is None:
        return f"no successful run by {deadline} {policy.timezone} ({instant_text(due)}): the job never succeeded"
    age = due - state.last_success_at
    return (
        f"no successful run by {deadline} {policy.timezone} ({instant_text(due)}): the last, "
        f"{instant_text(state.last_success_at)}, was {_short(age)} old (max age {_short(policy.max_age)})"
    )


def _short(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    if seconds >= 86400 and seconds % 3600 == 0:
        hours = seconds // 3600
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if seconds >= 3600:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m" if seconds % 3600 else f"{seconds // 3600}h"
    return f"{seconds // 60}m" if seconds >= 60 else f"{seconds}s"


def _text(value: datetime | None) -> str | None:
    return instant_text(value) if value is not None else None
