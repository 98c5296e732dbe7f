"""A team's share of the rules on the buses every team shares.

EventBridge allows 300 rules a bus (adjustable). The default bus carries every team's event and s3 triggers and
the rules that wake runs waiting on objects; the deployment's runs bus carries every after trigger and the rules
that wake runs waiting on other jobs. One team holding them all refuses every other team's triggers and waits,
so each job may hold at most MAX_JOB_SHARED_RULES rules on one shared bus, and each team at most its
``max_bus_rules`` (a team limit, 50 by default), counted from the team's stored jobs when a job is stored.
"""

from __future__ import annotations

from collections import Counter

from jobsched.core.errors import FieldError, SpecError
from jobsched.core.spec import DEFAULT_BUS, JobSpec
from jobsched.core.waits import job_rules
from jobsched.ports import RegistryPort

MAX_JOB_SHARED_RULES = 10  # rules one job may hold on one shared bus
RUNS_BUS = "the deployment's runs bus"
TEAM_PAGE = 100


def shared_bus_rules(spec: JobSpec) -> Counter[str]:
    """How many rules the job holds on each bus every team shares (a team bus is the team's own business)."""
    counts: Counter[str] = Counter()
    for rule in job_rules(spec):
        trigger = rule.trigger
        if trigger.after is not None:
            counts[RUNS_BUS] += 1
        elif trigger.event is None or trigger.event.bus == DEFAULT_BUS:
            counts[DEFAULT_BUS] += 1
    return counts


def check_rule_quota(store: RegistryPort, spec: JobSpec) -> None:
    """SpecError (422 ``rule_quota``) when the job, or its team with it, would hold more than its share."""
    mine = shared_bus_rules(spec)
    if not mine:
        return
    field = "triggers" if spec.triggers else "wait_for"
    for bus, count in sorted(mine.items()):
        if count > MAX_JOB_SHARED_RULES:
            message = (
                f"the job needs {count} rules on {bus}, shared by every team; a job may hold "
                f"{MAX_JOB_SHARED_RULES} (waits on one bucket share one rule: fewer buckets, or fewer triggers)"
            )
            raise SpecError([FieldError(field, "rule_quota", message)])
    limit = store.team_limits(spec.team).max_bus_rules
    used = team_rules(store, spec.team, but=spec.key)
    for bus, count in sorted(mine.items()):
        if used[bus] + count > limit:
            message = (
                f"team {spec.team}'s jobs hold {used[bus]} rules on {bus} and this job needs {count}; the team's "
                f"share is {limit} (its max_bus_rules, set by the platform)"
            )
            raise SpecError([FieldError(field, "rule_quota", message)])


def team_rules(store: RegistryPort, team: str, *, but: str) -> Counter[str]:
    """The rules the team's stored jobs (other than ``but``) hold on each shared bus."""
    used: Counter[str] = Counter()
    after: str | None = None
    while True:
        keys, after = store.team_page(team, limit=TEAM_PAGE, after_name=after)
        for stored in store.get_many([key for key in keys if key != but]).values():
            used += shared_bus_rules(stored.spec)
        if after is None:
            return used
