"""Registering and changing jobs: computes dispatch state from the spec and stores it with the change."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime, timedelta

from jobsched.core.errors import FieldError, SpecError, TriggerRefused, WorkflowsNotConfigured
from jobsched.core.events import TriggerRule
from jobsched.core.records import JobNotFound, StoredJob, VersionConflict
from jobsched.core.spec import JobSpec
from jobsched.core.waits import job_rules, per_prefix_wake_rules
from jobsched.ports import DagDeploymentPort, JobsPort, RegistryPort, TriggerRulesPort
from jobsched.registry.dependencies import cycle_through
from jobsched.registry.freshness import policy_changed, policy_dropped
from jobsched.registry.rule_quota import check_rule_quota
from jobsched.schedule.company import COMPANY_LINK, CompanySettings, company_reference_error
from jobsched.schedule.fires import first_fire, next_fire, schedule_of
from jobsched.tenancy.quotas import QuotaExceeded


def put_job(
    store: RegistryPort,
    spec: JobSpec,
    *,
    now: datetime,
    principal: str,
    expected_version: int | None = None,
    dags: DagDeploymentPort | None = None,
    action: str = "replace",
    reason: str | None = None,
    rules: TriggerRulesPort | None = None,
) -> tuple[StoredJob, bool]:
    """Create or replace; returns (stored job, created). ``expected_version`` guards a replace.

    A DAG job's state machine is deployed first, so no stored DAG job lacks one; so are its triggers' rules,
    so no stored trigger lacks its rule (a rule whose job is not stored delivers events the intake drops as
    stale). Rules the new version no longer has are removed once it is stored. If the store write loses a
    race, the winner's definition and rules are deployed again and this request's own new rules removed.
    """
    current = store.get(spec.key)
    _check_admissible(store, spec, current, expected_version)
    company = CompanySettings.read(store)
    check_company_references(company, spec)
    check_dependencies(store, spec, now=now, company=company)
    if rules is not None:
        check_rule_quota(store, spec)
    if spec.dag is not None:
        if dags is None:
            raise WorkflowsNotConfigured("this deployment cannot run DAG jobs: Step Functions is not configured")
        dags.deploy(spec)
    _deploy_rules(rules, spec, kept=job_rules(current.spec) if current is not None else [])
    try:
        stored, created = _store_job(
            store, spec, current, now=now, principal=principal, action=action, reason=reason, company=company
        )
    except Exception:
        _restore_winner(store, spec, dags, rules)
        raise
    policy_changed(store, spec, current.spec if current is not None else None, now=now)
    if rules is not None and current is not None:
        rules.remove(spec.key, _only_in(job_rules(current.spec) + per_prefix_wake_rules(current.spec), job_rules(spec)))
    _link_upstreams(store, spec.key, before=_linked(current.spec) if current else set(), after=_linked(spec))
    return stored, created


def check_company_references(company: CompanySettings, spec: JobSpec) -> None:
    """Every company calendar and maintenance window the job names is defined."""
    errors = [company_reference_error(company, path, reference) for path, reference in company.missing(spec)]
    if errors:
        raise SpecError(errors)


def _linked(spec: JobSpec) -> set[str]:
    """What the job's reverse edges hang from: its upstreams, and the company entries it names (so a change to one
    finds the jobs it moves without a scan)."""
    return {*spec.upstreams(), *(COMPANY_LINK + reference for reference in spec.company_references())}


def _link_upstreams(store: RegistryPort, job: str, *, before: set[str], after: set[str]) -> None:
    """The reverse edges (upstream -> this job) that ``jobsched deps`` reads; a crash leaves at worst a stale
    edge, which the reading side checks against the job's spec."""
    for upstream in sorted(after):
        store.link_downstream(upstream, job)
    for upstream in sorted(before - after):
        store.unlink_downstream(upstream, job)


MAX_DEPENDENCY_WALK = 200  # jobs read while looking for a cycle through after triggers
LINE_UP_INSTANTS = 1000  # each scheduled upstream's next instants compared for an all-of trigger
LINE_UP_HORIZON = timedelta(days=400)


def check_dependencies(store: JobsPort, spec: JobSpec, *, now: datetime, company: CompanySettings) -> None:
    """Every upstream of the job's after triggers and job waits exists, is the team's or shares with it, and
    does not run (through its own after triggers or waits) after this job: a cycle would start nothing ever, or
    loop, or wait until it times out. An all-of
    trigger whose scheduled upstreams share no logical instant would never start a run either."""

    @functools.cache
    def get(job: str) -> StoredJob | None:  # each job read once, however many paths reach it
        return store.get(job)

    def upstreams_of(job: str) -> list[str]:
        found = get(job)
        return found.spec.upstreams() if found is not None else []

    errors: list[FieldError] = []
    named: list[tuple[str, str]] = []  # (field path, upstream job)
    for index, trigger in enumerate(spec.triggers):
        if trigger.after is None:
            continue
        form = "all" if trigger.after.all else "any" if trigger.after.any else "job"
        if trigger.after.needs_all:
            never = _never_lines_up(get, trigger.after.upstreams, now, company)
            if never is not None:
                errors.append(FieldError(f"triggers[{index}].after.all", "never_lines_up", never))
        named += [(_after_path(index, form, position), up) for position, up in enumerate(trigger.after.upstreams)]
    named += [(f"{path}.job", condition.job) for path, condition in spec.wait_conditions() if condition.job]
    for path, upstream in named:
        problem = _upstream_problem(spec, upstream, path, get, upstreams_of)
        if problem is not None:
            errors.append(problem)
    if errors:
        raise SpecError(errors)


def _after_path(index: int, form: str, position: int) -> str:
    return f"triggers[{index}].after.{form}" + (f"[{position}]" if form != "job" else "")


def _upstream_problem(
    spec: JobSpec,
    upstream: str,
    path: str,
    get: Callable[[str], StoredJob | None],
    upstreams_of: Callable[[str], list[str]],
) -> FieldError | None:
    """Why ``spec`` may not run after ``upstream``: a cycle, no such job, or another team's not shared."""
    cycle = cycle_through(spec.key, [upstream], upstreams_of, limit=MAX_DEPENDENCY_WALK)
    if cycle:
        return FieldError(path, "dependency_cycle", "a cycle: " + " runs after ".join(cycle))
    found = get(upstream)
    if found is None:
        return FieldError(path, "unknown_job", f"no job {upstream}: register it first")
    if found.spec.team != spec.team and spec.team not in found.spec.share_with:
        return FieldError(path, "not_shared", f"{upstream} does not list team {spec.team} in its share_with")
    return None


def _never_lines_up(
    get: Callable[[str], StoredJob | None], upstreams: list[str], now: datetime, company: CompanySettings
) -> str | None:
    """Why scheduled upstreams can never finish runs for one logical instant (None: they can, or some are not
    scheduled, whose instants nobody can foretell). Bounded: each upstream's next instants, at most a year's."""
    instants: dict[str, set[datetime]] = {}
    for upstream in upstreams:
        stored = get(upstream)
        schedule = schedule_of(stored, company) if stored is not None else None
        if schedule is None:
            return None
        fires = schedule.next_fires(now, LINE_UP_INSTANTS, horizon=LINE_UP_HORIZON)
        instants[upstream] = {fire.at for fire in fires}
    shared = set.intersection(*instants.values()) if instants else set()
    if shared:
        return None
    return (
        f"{' and '.join(upstreams)} share no logical instant in their next runs: a run after all of them never starts"
    )


def _check_admissible(store: RegistryPort, spec: JobSpec, current: StoredJob | None, expected: int | None) -> None:
    if current is None and expected is not None:
        raise VersionConflict(f"{spec.key} does not exist (expected version {expected})")
    if current is not None and expected is not None and current.version != expected:
        raise VersionConflict(f"{spec.key} is at version {current.version}, not {expected}")
    if current is None:
        # Counted, not reserved: concurrent creates may pass the limit by as many as race (the API's
        # rate and concurrency bound that), and a deleted job frees its place at once.
        limit = store.team_limits(spec.team).max_jobs
        if store.count_team_jobs(spec.team, at_least=limit) >= limit:
            raise QuotaExceeded("max_jobs", f"team {spec.team} has {limit} jobs, its max_jobs; delete one first")


def _restore_winner(
    store: RegistryPort, spec: JobSpec, dags: DagDeploymentPort | None, rules: TriggerRulesPort | None
) -> None:
    """The store write lost: what the stored version needs is deployed again, this request's extras removed."""
    winner = store.get(spec.key)
    if dags is not None and winner is not None and winner.spec.dag is not None:
        dags.deploy(winner.spec)
    if rules is not None:
        if winner is not None:
            _deploy_rules(rules, winner.spec, kept=job_rules(winner.spec))
        rules.remove(spec.key, _only_in(job_rules(spec), job_rules(winner.spec) if winner is not None else []))


def _deploy_rules(rules: TriggerRulesPort | None, spec: JobSpec, *, kept: list[TriggerRule]) -> None:
    """Every trigger's and wait's rule, or none new: a refused rule removes the rules this call added (``kept``:
    the rules the stored version has, which stay)."""
    needed = job_rules(spec)
    if spec.triggers and rules is None:  # waits alone need no rule to work: their polls find the data
        raise SpecError([TriggerRefused(0, "", "triggers_not_configured", "this deployment has no event intake").error])
    if rules is None:
        return
    try:
        rules.deploy(spec.key, spec.team, needed)
    except TriggerRefused as refused:
        rules.remove(spec.key, _only_in(needed, kept))
        raise SpecError([refused.error]) from None


def _only_in(rules: list[TriggerRule], other: list[TriggerRule]) -> list[TriggerRule]:
    """The rules of ``rules`` that ``other`` does not have (by content)."""
    kept = {rule.fingerprint for rule in other}
    return [rule for rule in rules if rule.fingerprint not in kept]


def delete_job(
    store: RegistryPort,
    stored: StoredJob,
    *,
    now: datetime,
    principal: str,
    dags: DagDeploymentPort | None,
    rules: TriggerRulesPort | None = None,
) -> None:
    """The job, then what it left behind: incidents, its state machine, its rules (events that still match
    meanwhile are dropped by the intake: the job is gone)."""
    store.delete(stored, now=now, principal=principal)
    store.drop_incidents(stored.key)
    policy_dropped(store, stored.spec)
    if stored.spec.dag is not None and dags is not None:
        dags.remove(stored.key)
    if rules is not None and job_rules(stored.spec):
        rules.remove(stored.key, job_rules(stored.spec) + per_prefix_wake_rules(stored.spec))
    _link_upstreams(store, stored.key, before=_linked(stored.spec), after=set())


def _store_job(
    store: RegistryPort,
    spec: JobSpec,
    current: StoredJob | None,
    *,
    now: datetime,
    principal: str,
    action: str = "replace",
    reason: str | None = None,
    company: CompanySettings,
) -> tuple[StoredJob, bool]:
    if current is None:
        stored = store.create(
            spec,
            now=now,
            principal=principal,
            cursor=now,
            next_visit_at=first_fire(spec, registered_at=now, after=now, company=company),
        )
        return stored, True
    # Dispatch restarts now under the new version: instants already sent under the old one are dropped by
    # the worker (version check) and sent again if the new schedule still has them (same run ids).
    state = store.get_state(spec.key)
    cursor = min(state.cursor, now) if state is not None else now
    active = current.state == "ACTIVE"
    next_fire = first_fire(spec, registered_at=current.created_at, after=cursor, company=company) if active else None
    stored = store.replace(
        current,
        spec,
        now=now,
        principal=principal,
        cursor=cursor,
        next_visit_at=next_fire,
        action=action,
        reason=reason,
    )
    return stored, False


def pause_job(store: JobsPort, job: str, *, now: datetime, principal: str, reason: str) -> StoredJob:
    current = _existing(store, job)
    if current.state == "PAUSED":
        return current
    return store.set_state(
        current, "PAUSED", now=now, principal=principal, reason=reason, cursor=now, next_visit_at=None
    )


def resume_job(
    store: JobsPort, job: str, *, now: datetime, principal: str, company: CompanySettings | None = None
) -> StoredJob:
    """Instants that fell while paused are not run: pausing means not running. ``company``: the company's calendars
    and windows when the caller resumes many jobs (read once); read here otherwise."""
    current = _existing(store, job)
    if current.state == "ACTIVE":
        return current
    return store.set_state(
        current,
        "ACTIVE",
        now=now,
        principal=principal,
        reason=None,
        cursor=now,
        next_visit_at=next_fire(current, now, company or CompanySettings.read(store)),
    )


def _existing(store: JobsPort, job: str) -> StoredJob:
    current = store.get(job)
    if current is None:
        raise JobNotFound(job)
    return current
