"""Freshness of what a job produces: judged at each deadline (in its time zone, across DST) or by its max age; a
job that never ran is stale; stale and fresh are states on the job, counted in its tier's budget, paged by its
tier, and listed on its team's freshness board."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from jobsched.adapters.memory import MemoryJobs
from jobsched.core.freshness import Freshness, FreshnessPolicy, judge, started, succeeded
from jobsched.core.runs import parse_instant
from jobsched.core.slo import SloDay, SloTiers, tier_budget
from jobsched.core.spec import JobSpec
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.paging.rules import TICKET, Policy, decide_open, decide_resolve
from jobsched.pipeline.freshness import FreshnessKeeper
from jobsched.registry.jobs import delete_job, put_job


def at(text: str) -> datetime:
    return parse_instant(text)


def job(name: str, **extra: Any) -> JobSpec:
    document = {
        "name": name,
        "team": "data",
        "target": {"type": "lambda", "function": "f"},
        "schedule": {"expression": "0 6 * * *", "timezone": "Europe/London"},
    }
    return JobSpec.model_validate(document | extra)


def test_a_deadline_is_local_wall_time_and_survives_dst() -> None:
    london = FreshnessPolicy.of("09:00", "Europe/London", None)
    assert london.next_deadline(at("2026-03-28T12:00:00Z")) == at("2026-03-29T08:00:00Z")  # BST from the 29th
    assert london.next_deadline(at("2026-03-29T07:59:59Z")) == at("2026-03-29T08:00:00Z")
    assert london.next_deadline(at("2026-10-25T08:30:00Z")) == at("2026-10-25T09:00:00Z")  # GMT again
    # 02:30 does not exist in New York on 2026-03-08: the deadline falls after the gap, once that day.
    gap = FreshnessPolicy.of("02:30", "America/New_York", None)
    assert gap.next_deadline(at("2026-03-08T00:00:00Z")) == at("2026-03-08T07:30:00Z")
    assert gap.next_deadline(at("2026-03-08T07:30:00Z")) == at("2026-03-09T06:30:00Z")
    # 01:30 happens twice on 2026-11-01: judged once, at the first.
    twice = FreshnessPolicy.of("01:30", "America/New_York", None)
    assert twice.next_deadline(at("2026-11-01T00:00:00Z")) == at("2026-11-01T05:30:00Z")
    assert twice.next_deadline(at("2026-11-01T05:30:00Z")) == at("2026-11-02T06:30:00Z")


def test_judged_at_the_deadline_a_job_that_never_ran_is_stale_and_a_success_makes_it_fresh() -> None:
    policy = FreshnessPolicy.of("09:00", "UTC", timedelta(hours=4))
    state = started(policy, at("2027-01-10T12:00:00Z"))
    assert state.check_at == at("2027-01-11T09:00:00Z") and state.state is Freshness.UNKNOWN
    assert judge(policy, state, at("2027-01-11T08:59:00Z")).state == state  # not due yet
    never = judge(policy, state, at("2027-01-11T09:00:30Z"))
    assert never.state.state is Freshness.STALE and never.counted and never.stale and never.became_stale
    assert "never succeeded" in (never.state.reason or "")
    assert never.state.check_at == at("2027-01-12T09:00:00Z")
    late = succeeded(policy, never.state, at("2027-01-11T10:00:00Z"), at("2027-01-11T10:00:01Z"))
    assert late.became_fresh and late.state.state is Freshness.FRESH and late.state.stale_since is None
    # The next day's run finished at 06:10, inside the 4 hours before 09:00: met (one good event).
    ran = succeeded(policy, late.state, at("2027-01-12T06:10:00Z"), at("2027-01-12T06:10:01Z"))
    met = judge(policy, ran.state, at("2027-01-12T09:00:10Z"))
    assert met.state.state is Freshness.FRESH and met.counted and not met.stale and not met.became_stale
    # A success too old for max_age (04:30 is 4.5 hours before 09:00) does not keep it fresh.
    early = succeeded(policy, met.state, at("2027-01-13T04:30:00Z"), at("2027-01-13T04:30:01Z"))
    old = judge(policy, early.state, at("2027-01-13T09:00:00Z"))
    assert old.stale and old.became_stale and "4h30m old" in (old.state.reason or "")
    # An older success reported late changes nothing.
    assert succeeded(policy, old.state, at("2027-01-12T05:00:00Z"), at("2027-01-13T09:01:00Z")).state == old.state


def test_a_max_age_policy_goes_stale_once_when_no_success_came_within_it() -> None:
    policy = FreshnessPolicy.of(None, "UTC", timedelta(hours=2))
    state = started(policy, at("2027-01-10T00:00:00Z"))
    assert state.check_at == at("2027-01-10T02:00:00Z")
    ran = succeeded(policy, state, at("2027-01-10T01:00:00Z"), at("2027-01-10T01:00:00Z"))
    assert ran.state.check_at == at("2027-01-10T03:00:00Z")  # the expiry moves with each success
    stale = judge(policy, ran.state, at("2027-01-10T03:00:05Z"))
    assert stale.became_stale and stale.counted and stale.state.check_at is None  # off the index until a success
    assert "no success for 2h" in (stale.state.reason or "")
    again = succeeded(policy, stale.state, at("2027-01-10T05:00:00Z"), at("2027-01-10T05:00:00Z"))
    assert again.became_fresh and again.state.check_at == at("2027-01-10T07:00:00Z")


def test_a_freshness_policy_is_validated_with_clear_errors() -> None:
    assert job("ok", freshness={"deadline": "09:00", "max_age": "6h"}).freshness is not None
    for bad, code in (
        ({}, "empty_freshness"),
        ({"deadline": "9am"}, "invalid_freshness_deadline"),
        ({"deadline": "24:00"}, "invalid_freshness_deadline"),
        ({"deadline": "09:00", "timezone": "Europe/Londn"}, "unknown_timezone"),
        ({"max_age": "30s"}, "duration_out_of_range"),
        ({"max_age": "2h", "timezone": "UTC"}, "timezone_without_deadline"),
    ):
        with pytest.raises(ValidationError) as raised:
            job("bad", freshness=bad)
        assert code in {error["type"] for error in raised.value.errors()}, bad


class Published(list[EscalationEvent]):
    def __call__(self, event: EscalationEvent) -> None:
        self.append(event)


def test_a_stale_job_that_never_ran_and_a_fresh_one_counted_in_the_tier_budget_and_paged() -> None:
    jobs, published = MemoryJobs(), Published()
    registered = at("2027-01-10T12:00:00Z")
    freshness = {"deadline": "09:00", "timezone": "UTC"}
    put_job(jobs, job("never-ran", freshness=freshness, tier="critical"), now=registered, principal="t")
    put_job(jobs, job("daily-load", freshness=freshness, tier="critical"), now=registered, principal="t")
    put_job(jobs, job("no-policy"), now=registered, principal="t")
    keeper = FreshnessKeeper(jobs, published)
    board = jobs.team_freshness("data")
    assert set(board) == {"never-ran", "daily-load"} and board["never-ran"]["state"] == "unknown"
    assert "09:00 UTC" in board["never-ran"]["policy"]

    spec = jobs.get("data/daily-load")
    assert spec is not None
    keeper.succeeded(spec.spec, at("2027-01-11T06:20:00Z"), at("2027-01-11T06:20:01Z"))
    assert keeper.check(at("2027-01-11T08:59:00Z")) == 0  # nothing due yet
    assert keeper.check(at("2027-01-11T09:00:20Z")) == 1  # the job that never ran
    assert keeper.check(at("2027-01-11T09:01:20Z")) == 0  # judged once
    assert [(event.kind, event.job) for event in published] == [("job_stale", "data/never-ran")]
    assert "never succeeded" in (published[0].error or "")
    assert jobs.health("data/never-ran").freshness.state is Freshness.STALE  # type: ignore[union-attr]
    assert jobs.health("data/daily-load").freshness.state is Freshness.FRESH  # type: ignore[union-attr]
    board = jobs.team_freshness("data")
    assert board["never-ran"]["state"] == "stale" and board["never-ran"]["since"] == "2027-01-11T09:00:00Z"
    assert board["daily-load"]["state"] == "fresh"

    # Both judgements are events of the critical tier's budget: one good, one bad (by job).
    day = at("2027-01-11T00:00:00Z").date()
    assert jobs.slo_days("data", "critical", day, day) == [
        SloDay(day, ended=0, judged=2, stale=1, bad_by_job={"never-ran": 1})
    ]
    budget = tier_budget("critical", SloTiers(), jobs.slo_days("data", "critical", day, day), today=day)
    assert budget.judged == 2 and budget.stale == 1 and budget.top_jobs == [("never-ran", 1)]
    assert budget.budget_left < 0  # one bad event in two: far past 99.9%

    # Paged by tier: critical pages; a best-effort job's staleness is a ticket, never a page.
    stale, topic, judged_at = published[0], "arn:aws:sns:eu-west-1:123456789012:t", at("2027-01-11T09:00:20Z")
    critical = decide_open(None, stale, Policy.for_job(None, topic, "critical"), judged_at)
    assert [page.role for page in critical.pages] == ["primary"] and critical.incident is not None
    ticket = decide_open(None, stale, Policy.for_job(None, topic, "best-effort"), judged_at)
    assert ticket.pages == () and ticket.incident is not None and ticket.incident.severity == TICKET

    # Its first success makes it fresh and resolves the page.
    never = jobs.get("data/never-ran")
    assert never is not None
    keeper.succeeded(never.spec, at("2027-01-11T10:30:00Z"), at("2027-01-11T10:30:01Z"))
    assert published[-1].kind == "job_fresh" and published[-1].resolves() == ("stale",)
    assert decide_resolve(critical.incident, published[-1]).resolved
    assert jobs.team_freshness("data")["never-ran"]["state"] == "fresh"


def test_a_policy_changed_moves_the_judgement_and_one_removed_or_a_job_deleted_leaves_nothing_due() -> None:
    jobs, published = MemoryJobs(), Published()
    now = at("2027-01-10T12:00:00Z")
    stored, _ = put_job(jobs, job("etl", freshness={"deadline": "09:00"}), now=now, principal="t")
    # The schedule's zone is the deadline's: 09:00 London is 09:00 UTC in January.
    assert jobs.health("data/etl").freshness.check_at == at("2027-01-11T09:00:00Z")  # type: ignore[union-attr]
    stored, _ = put_job(jobs, job("etl", freshness={"deadline": "07:00"}), now=now, principal="t")
    assert jobs.health("data/etl").freshness.check_at == at("2027-01-11T07:00:00Z")  # type: ignore[union-attr]
    put_job(jobs, job("etl"), now=now, principal="t")  # policy removed
    assert jobs.health("data/etl").freshness is None and "etl" not in jobs.team_freshness("data")
    assert list(jobs.freshness_due(0, at("2030-01-01T00:00:00Z"))) == []
    stored, _ = put_job(jobs, job("etl", freshness={"max_age": "1h"}), now=now, principal="t")
    delete_job(jobs, stored, now=now, principal="t", dags=None)
    keeper = FreshnessKeeper(jobs, published)
    assert keeper.check(at("2030-01-01T00:00:00Z")) == 0 and published == []
    assert jobs.team_freshness("data") == {}


def test_a_success_racing_the_judgement_is_counted_in_it_not_lost() -> None:
    """The checker read the state, a success was written before its write: the write fails on the version, the
    judgement is made again on what the success wrote (fresh), and counted once."""
    jobs, published = MemoryJobs(), Published()
    put_job(jobs, job("etl", freshness={"deadline": "09:00"}), now=at("2027-01-10T12:00:00Z"), principal="t")
    spec = jobs.get("data/etl")
    assert spec is not None
    keeper = FreshnessKeeper(jobs, published)
    real_health = jobs.health
    raced: list[bool] = []

    def health_then_success(job_key: str, *, consistent: bool = True) -> Any:
        found = real_health(job_key, consistent=consistent)
        if not raced:
            raced.append(True)
            keeper.succeeded(spec.spec, at("2027-01-11T08:59:59Z"), at("2027-01-11T09:00:00Z"))
        return found

    jobs.health = health_then_success  # type: ignore[method-assign,assignment]
    assert keeper.check(at("2027-01-11T09:00:30Z")) == 0
    day = at("2027-01-11T00:00:00Z").date()
    assert jobs.slo_days("data", "important", day, day) == [SloDay(day, ended=0, judged=1)]
    assert published == []
