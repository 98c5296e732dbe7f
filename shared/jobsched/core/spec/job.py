"""The job: what teams write, validated whole."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    ModelWrapValidatorHandler,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from jobsched.core.bounds import is_stored
from jobsched.core.durations import Duration
from jobsched.core.references import has_reference
from jobsched.core.slo import DEFAULT_TIER, Tier
from jobsched.core.spec.base import (
    MAX_SCHEDULES,
    MAX_TRIGGERS,
    EmailAddress,
    HttpUrl,
    Name,
    StrictModel,
    _bounded,
    _fail,
    _validate_with,
)
from jobsched.core.spec.checks import Checks, _check_checks_target
from jobsched.core.spec.dag import Dag
from jobsched.core.spec.policies import Concurrency, Escalation, FreshnessSpec, RetryPolicy
from jobsched.core.spec.schedule import CatchupPolicy, CompanyRef, Schedule
from jobsched.core.spec.targets import ApprovalTarget, Target
from jobsched.core.spec.triggers import JobTrigger, WaitCondition, WaitConditions, WaitPolicy

# --------------------------------------------------------------------------------------------- job


class JobSpec(StrictModel):
    """A job as teams write it. ``team`` + ``name`` identify it."""

    name: Name
    team: Name
    description: str = Field(default="", max_length=1024)
    owner: EmailAddress | None = None
    runbook_url: HttpUrl | None = None
    tags: dict[str, Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int | float) else v)]] = Field(
        default_factory=dict, max_length=50
    )
    schedule: Schedule | None = Field(default=None, description="absent: the job runs only when triggered")
    schedules: list[Schedule] = Field(
        default_factory=list,
        max_length=MAX_SCHEDULES - 1,
        description="several schedules, each named, with its own zone and payload (the first is stored as "
        "`schedule`, the others here): exactly one run per schedule and instant",
    )
    maintenance: list[CompanyRef] = Field(
        default_factory=list,
        max_length=10,
        description="company maintenance windows it opts into (company/NAME): its runs skip or defer, its pages wait",
    )
    share_with: list[Name] = Field(
        default_factory=list, max_length=50, description="other teams whose jobs may run after this job's runs"
    )
    triggers: list[JobTrigger] = Field(
        default_factory=list, max_length=MAX_TRIGGERS, description="events that start runs, besides the schedule"
    )
    target: Target | None = None
    dag: Dag | None = None
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    priority: Literal["high", "normal", "low"] = "normal"
    tier: Tier = Field(
        default=DEFAULT_TIER,
        description="the SLO tier: what the platform promises for its runs (success, start lateness, deadlines), "
        "whose budget its failures spend, and how they are routed: critical pages at the first failure, "
        "important by its escalation policy, best-effort opens a ticket and never pages",
    )
    circuit_breaker: Literal["team", "job", "off"] = Field(
        default="team",
        description="whose failures of a target hold this job's runs: the team's jobs' (default), this job's "
        "own, or none (timeouts, throttles, 5xx and refused connections count; the job's own errors never do)",
    )
    heartbeat_timeout: Annotated[Duration, _bounded(timedelta(seconds=10), timedelta(days=1))] | None = None
    deadline: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] | None = None
    escalation: Escalation | None = None
    freshness: FreshnessSpec | None = Field(
        default=None,
        description="by when a successful run must exist: stale and fresh are states on the job, counted in its "
        "tier's budget and paged by its tier (a job that did not run is as stale as one that failed)",
    )
    anomalies: Literal["record", "page"] = Field(
        default="record",
        description="a run far outside the job's learned baseline (duration, start lateness) is shown on the run "
        "and the job; page: also paged at warning severity",
    )
    run_retention: Annotated[Duration, _bounded(timedelta(days=1), timedelta(days=400))] = timedelta(days=30)
    wait_for: WaitConditions = Field(
        default_factory=list, description="conditions a run waits on (WAITING, holding nothing) before it starts"
    )
    wait: WaitPolicy | None = Field(default=None, description="with wait_for: how long, and then what")
    checks: Checks = Field(
        default_factory=list, description="quality gates on the target's output (a DAG's go on its tasks)"
    )

    _checks_target = field_validator("checks")(_check_checks_target)

    @field_validator("target")
    @classmethod
    def _no_references(cls, value: Target | None, info: ValidationInfo) -> Target | None:
        if is_stored(info):  # checked since #32: text stored before is passed on as it was
            return value
        if isinstance(value, ApprovalTarget):
            raise _fail("approval_outside_dag", "an approval is a task of a DAG: it holds back the tasks after it")
        payload = getattr(value, "payload", None)
        if payload is not None and has_reference(payload):
            raise _fail(
                "reference_outside_dag",
                "{{ tasks.NAME.output }} reads an upstream task's output: only DAG tasks have upstream tasks",
            )
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        for key, tag in value.items():
            if not 1 <= len(key) <= 128 or len(tag) > 256:
                raise _fail("invalid_tag", "tag '{key}': keys 1-128 characters, values at most 256", key=key)
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _one_kind_of_work(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec]) -> JobSpec:
        if isinstance(data, dict) and data.get("schedule") is None and isinstance(data.get("schedules"), list):
            # `schedules: [a, b]` as written is stored as `schedule: a, schedules: [b]`: one form, read back alike.
            first, *others = data["schedules"] or [None]
            data = {**data, "schedule": first, "schedules": others, _WRITTEN_AS_LIST: True}
        problems = _several_schedules(data) if isinstance(data, dict) else []
        if isinstance(data, dict):
            data.pop(_WRITTEN_AS_LIST, None)
        if isinstance(data, dict) and data.get("wait") is not None and not data.get("wait_for"):
            problems.append(
                InitErrorDetails(
                    type=_fail("wait_without_wait_for", "wait says how long to wait for wait_for's conditions"),
                    loc=("wait",),
                    input=data["wait"],
                )
            )
        if isinstance(data, dict) and (data.get("target") is None) == (data.get("dag") is None):
            problems.append(
                InitErrorDetails(
                    type=_fail(
                        "target_or_dag",
                        "give exactly one of target (a single task) or dag (tasks with dependencies)",
                    ),
                    loc=("target",),
                    input=data,
                )
            )
        if isinstance(data, dict) and data.get("dag") is not None and isinstance(data.get("triggers"), list):
            for index, trigger in enumerate(data["triggers"]):
                if isinstance(trigger, dict) and trigger.get("batch") is not None:
                    problems.append(
                        InitErrorDetails(
                            type=_fail(
                                "batch_on_dag",
                                "a batched trigger starts a job with a target; a DAG's runs take one event each",
                            ),
                            loc=("triggers", index, "batch"),
                            input=trigger["batch"],
                        )
                    )
        if isinstance(data, dict) and data.get("dag") is not None and data.get("checks"):
            problems.append(
                InitErrorDetails(
                    type=_fail("checks_on_dag", "a DAG's checks go on its tasks (dag.tasks[].checks)"),
                    loc=("checks",),
                    input=data["checks"],
                )
            )
        return _validate_with(cls, data, handler, problems)

    def all_schedules(self) -> list[Schedule]:
        """Its schedules: none, the one, or each of several (the first is ``schedule``)."""
        return [self.schedule, *self.schedules] if self.schedule is not None else []

    def schedule_named(self, name: str | None) -> Schedule | None:
        """The schedule a run says fired it (None: the job's only schedule)."""
        return next((s for s in self.all_schedules() if s.name == name), None)

    def company_references(self) -> list[str]:
        """The company calendars and maintenance windows it names, each once (``company/NAME``)."""
        calendars = [s.company_calendar for s in self.all_schedules() if s.company_calendar]
        return list(dict.fromkeys([*calendars, *self.maintenance]))

    def dag_outputs(self) -> set[str]:
        """The DAG's tasks whose output a downstream task reads (none for a single-target job)."""
        return self.dag.referenced_outputs() if self.dag is not None else set()

    @property
    def key(self) -> str:
        """team/name: the job's identity and the seed of its H values and jitter."""
        return f"{self.team}/{self.name}"

    def upstreams(self) -> list[str]:
        """The jobs this job runs after or waits for (every after trigger's upstreams, every job wait), each once."""
        found = [upstream for trigger in self.triggers if trigger.after for upstream in trigger.after.upstreams]
        found += [condition.job for _, condition in self.wait_conditions() if condition.job is not None]
        return list(dict.fromkeys(found))

    def wait_conditions(self) -> list[tuple[str, WaitCondition]]:
        """(field path, condition) of every wait: the job's own, and each DAG task's."""
        found = [(f"wait_for[{index}]", condition) for index, condition in enumerate(self.wait_for)]
        for position, task in enumerate(self.dag.tasks if self.dag is not None else []):
            found += [(f"dag.tasks[{position}].wait_for[{index}]", c) for index, c in enumerate(task.wait_for)]
        return found

    def targets(self) -> list[tuple[str, Target]]:
        """(field path, target) of everything the job calls: its target, or each DAG task's."""
        if self.target is not None:
            return [("target", self.target)]
        if self.dag is not None:
            return [(f"dag.tasks[{index}].target", task.target) for index, task in enumerate(self.dag.tasks)]
        return []


_WRITTEN_AS_LIST = "__schedules_as_list"


def _several_schedules(data: dict[str, Any]) -> list[InitErrorDetails]:
    """With several schedules each is named (its runs say which fired them); catch-up is the job's (one cursor)."""
    extras = data.get("schedules")
    if not isinstance(extras, list) or not extras:
        return []
    every = [data.get("schedule"), *extras]
    names = [entry.get("name") if isinstance(entry, dict) else None for entry in every]
    problems = []
    if None in names or len(set(names)) != len(names):
        problems.append(
            InitErrorDetails(
                type=_fail("unnamed_schedule", "with several schedules, each has a name of its own (name: eu-close)"),
                loc=("schedules",),
                input=names,
            )
        )
    offset = 1 if data.get(_WRITTEN_AS_LIST) else 0  # error paths as written: schedules[1] is the second
    for index, entry in enumerate(extras, start=offset):
        if isinstance(entry, dict) and entry.get("catchup") not in (None, {}, CatchupPolicy().model_dump(mode="json")):
            problems.append(
                InitErrorDetails(
                    type=_fail("catchup_per_schedule", "catch-up is the job's: set it on its first schedule only"),
                    loc=("schedules", index, "catchup"),
                    input=entry["catchup"],
                )
            )
    return problems
