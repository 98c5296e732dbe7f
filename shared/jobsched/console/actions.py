"""The console's actions: pause (with a reason), resume, trigger, rerun (a DAG run also from its failure),
approve or reject a DAG run's waiting approval, and test a job's pages (a paging drill), from a button on a page.

Each action runs the API's own domain functions (``pause_job``, ``resume_job``, ``trigger_run``,
``rerun_run``) behind the API's own checks: the principal must act for the job's team
(``Principal.require``), the team's request rate is counted, and the API's error table words the refusal.
Every action lands in the job's audit trail under the principal the console names (see
``console_principal``). What comes back is a short HTML message: CloudWatch shows it in a popup, the
local console on a page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsched.api.errors import MAPPED
from jobsched.api.identity import Principal
from jobsched.core.logs import JOB, RUN_ID
from jobsched.core.records import CONSOLE_PRINCIPAL_PREFIX, JobNotFound, StoredJob
from jobsched.core.runs import instant_text
from jobsched.core.spec import NAME
from jobsched.paging.drills import DrillResult, verified_values
from jobsched.pipeline.approvals import decide
from jobsched.pipeline.dag.conductor import DagRuns
from jobsched.pipeline.manual_runs import trigger_run
from jobsched.pipeline.reruns import TaskSelection, rerun_run
from jobsched.ports import DrillsPort, TaskRunsPort, TriggerStorePort, WorkQueuesPort
from jobsched.registry.jobs import pause_job, resume_job
from jobsched.schedule.company import CompanySettings
from jobsched.schedule.fires import next_fire

ActionKind = Literal["pause", "resume", "trigger", "rerun", "rerun_from_failure", "approve", "reject", "page_test"]
ACTIONS: tuple[ActionKind, ...] = (
    "pause",
    "resume",
    "trigger",
    "rerun",
    "rerun_from_failure",
    "approve",
    "reject",
    "page_test",
)
MAX_REASON = 500  # as the API's PauseRequest
CONSOLE_ALIAS_PREFIX = "team-"  # the actions function's alias per team: its name is the team's authority


class ActionJobs(TriggerStorePort, DrillsPort, Protocol):
    def count_request(self, team: str, *, now: datetime, limit: int) -> bool: ...

    def remember_console_request(self, request_id: str, job: str, *, now: datetime) -> None: ...


class ConfirmingJobs(Protocol):
    def confirm_console_request(self, request_id: str, principal: str, person: str) -> str | None: ...


@dataclass(frozen=True)
class ActionStores:
    jobs: ActionJobs
    runs: TaskRunsPort
    queues: WorkQueuesPort
    dags: DagRuns | None = None  # approvals: a DAG run's waiting approval task is answered through it
    drill: Callable[[StoredJob], Sequence[DrillResult]] | None = None  # page_test: a job's chain, tested


class ActionRequest(BaseModel):
    """What a button sends: the action, the job (``team/name``), a run for rerun, a reason for pause.
    Anything else in the event (the widget's context, its parameters) is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    action: ActionKind
    job: str = Field(pattern=JOB.pattern)
    run_id: str | None = Field(default=None, pattern=RUN_ID.pattern)
    task: str | None = Field(default=None, pattern=NAME.pattern)  # approve, reject: the approval task
    force: bool = False
    reason: str | None = Field(default=None, max_length=MAX_REASON)

    @property
    def team(self) -> str:
        return self.job.split("/", 1)[0]


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    title: str
    message: str
    status: int = 200  # as the API would answer: 200, or the 4xx of the refusal

    def html(self) -> str:
        colour = "#1a7f37" if self.ok else "#cf222e"
        symbol = "&#10003;" if self.ok else "&#10007;"
        return (
            f'<div class="js"><h2 style="color:{colour}">{symbol} {escape(self.title)}</h2>'
            f"<p>{escape(self.message)}</p></div>"
        )


def parse_action(event: dict[str, Any]) -> ActionRequest:
    """The button's JSON, with the reason typed into the page's form (``widgetContext.forms.all``) when the
    button carries none. Raises ``ValidationError``: the caller words it with ``refusal``."""
    forms: Any = event
    for part in ("widgetContext", "forms", "all"):  # any of them may be missing or not an object
        forms = forms.get(part) if isinstance(forms, dict) else None
    forms = forms if isinstance(forms, dict) else {}
    values = {k: v for k, v in event.items() if k != "widgetContext"}
    if not values.get("reason") and isinstance(forms.get("reason"), str):
        values["reason"] = forms["reason"].strip() or None
    return ActionRequest.model_validate(values)


def invalid(error: ValidationError) -> ActionResult:
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "action"
    return ActionResult(False, "Not done", f"{field}: {first['msg']}", 422)


def console_principal(team: str, *, request_id: str) -> Principal:
    """Who the console acts as: the team its caller was allowed to act for (IAM decided, by the alias the
    caller could invoke), named in the audit trail with the request that CloudTrail ties to the person."""
    alias = f"{CONSOLE_ALIAS_PREFIX}{team}"
    return Principal(
        arn=f"{CONSOLE_PRINCIPAL_PREFIX}{alias}/request/{request_id}", teams=frozenset({team}), admin=False
    )


def team_of_alias(function: str, qualifier: str | None = None) -> str | None:
    """The team whose alias names the function, in every form Lambda accepts and CloudTrail records:
    ``arn:aws:lambda:REGION:ACCOUNT:function:NAME:team-payments``, ``ACCOUNT:function:NAME:team-payments``,
    ``NAME:team-payments``, or ``NAME`` with ``qualifier`` ``team-payments`` -> ``payments``; None when no
    team's alias is named (unqualified, a version, another alias)."""
    parts = function.split(":")
    if len(parts) in (7, 8) and parts[0] == "arn" and parts[5] == "function":
        named = parts[7] if len(parts) == 8 else None
    elif len(parts) in (3, 4) and parts[1] == "function":
        named = parts[3] if len(parts) == 4 else None
    elif len(parts) in (1, 2):
        named = parts[1] if len(parts) == 2 else None
    else:
        return None
    alias = named or qualifier
    if not alias or not alias.startswith(CONSOLE_ALIAS_PREFIX):
        return None
    team = alias[len(CONSOLE_ALIAS_PREFIX) :]
    return team if NAME.fullmatch(team) else None


def act(request: ActionRequest, *, principal: Principal, stores: ActionStores, now: datetime) -> ActionResult:
    """Carry out one action as the API would for this principal; every refusal is an ``ActionResult``."""
    if not principal.may_act_for(request.team):
        return ActionResult(False, "Not allowed", f"{principal.arn} may not act for team '{request.team}'", 403)
    limit = stores.jobs.team_limits(request.team).requests_per_minute
    if not stores.jobs.count_request(request.team, now=now, limit=limit):
        return ActionResult(False, "Too many requests", f"team '{request.team}' is over its request rate", 429)
    try:
        return _carry_out(request, principal, stores, now)
    except tuple(MAPPED) as error:
        status, code, _field, message = MAPPED[type(error)]
        return ActionResult(False, f"Not done ({code})", message(error), status)


def _answer(request: ActionRequest, stores: ActionStores, who: str, now: datetime) -> ActionResult:
    """Approve or reject a waiting approval task, as the person the console names."""
    if request.task is None or request.run_id is None:
        return ActionResult(False, "Not done", "task: which approval task to answer", 422)
    if stores.dags is None:
        return ActionResult(False, "Not done", "this deployment cannot answer approvals from the console", 422)
    approved = request.action == "approve"
    decide(
        stores.jobs,
        stores.dags,
        request.job,
        request.run_id,
        request.task,
        approved=approved,
        principal=who,
        comment=request.reason or "",  # the form's one text field: for an answer, the approver's comment
        now=now,
    )
    verb = "Approved" if approved else "Rejected"
    after = "the tasks after it run" if approved else "the tasks that need it are skipped"
    return ActionResult(True, f"{verb} {request.task}", f"{request.job} run {request.run_id}: {after}.")


def _drill(job: str, stores: ActionStores, now: datetime) -> ActionResult:
    """A paging drill of the job's chain (``paging.drills``), its outcome per destination kept for the team."""
    if stores.drill is None:
        return ActionResult(False, "Not done", "this deployment cannot send pages from the console", 422)
    stored = stores.jobs.get(job)
    if stored is None:
        raise JobNotFound(job)
    results = stores.drill(stored)
    stores.jobs.record_drills(stored.spec.team, verified_values(results, now))
    if not results:
        return ActionResult(False, "Nothing to test", f"{job} pages no destination", 422)
    lines = "; ".join(
        f"{r.role} {r.destination} {r.address}: {r.outcome}" + (f" ({r.reason})" if r.reason else "") for r in results
    )
    delivered = all(r.outcome == "delivered" for r in results)
    title = f"Test page {'delivered' if delivered else 'not delivered everywhere'} for {job}"
    return ActionResult(delivered, title, lines)


def _carry_out(request: ActionRequest, principal: Principal, stores: ActionStores, now: datetime) -> ActionResult:
    jobs, job, who = stores.jobs, request.job, principal.arn
    if request.action == "pause":
        if not request.reason:
            return ActionResult(False, "Not done", "reason: type why the job is paused, then press Pause", 422)
        stored: StoredJob = pause_job(jobs, job, now=now, principal=who, reason=request.reason)
        return ActionResult(True, f"Paused {job}", f"Reason: {stored.paused_reason}. No instant fires until resumed.")
    if request.action == "resume":
        stored = resume_job(jobs, job, now=now, principal=who)
        upcoming = next_fire(stored, now, CompanySettings.read(jobs))
        after = f"next fire {instant_text(upcoming)}" if upcoming else "no instant ahead"
        return ActionResult(True, f"Resumed {job}", f"Instants that fell while paused are not run; {after}.")
    if request.action == "trigger":
        run = trigger_run(jobs, stores.runs, stores.queues, job, now=now, principal=who)
        return ActionResult(True, f"Triggered {job}", f"Run {run.run_id} is queued.", 202)
    if request.action == "page_test":
        return _drill(job, stores, now)
    if request.run_id is None:
        return ActionResult(False, "Not done", "run_id: which run to rerun", 422)
    if request.action in ("approve", "reject"):
        return _answer(request, stores, who, now)
    from_failure = request.action == "rerun_from_failure"  # a DAG run: keep what succeeded, run the rest
    run = rerun_run(
        jobs,
        stores.runs,
        stores.queues,
        job,
        request.run_id,
        now=now,
        principal=who,
        force=request.force,
        selection=TaskSelection(from_failure=from_failure),
    )
    if run.rerun_tasks is not None:
        tasks = ", ".join(run.rerun_tasks)
        detail = f"Attempt {run.attempt + 1} of {job} for {instant_text(run.scheduled_at)} runs again: {tasks}."
        return ActionResult(True, f"Rerunning {request.run_id}", detail, 202)
    return ActionResult(
        True,
        f"Rerunning {request.run_id}",
        f"Attempt {run.attempt + 1} of {job} for {instant_text(run.scheduled_at)} is queued.",
        202,
    )


def handle_action(
    event: dict[str, Any], *, invoked_function_arn: str, request_id: str, stores: ActionStores, now: datetime
) -> ActionResult:
    """One ``<cwdb-action>`` call. The team comes from the alias the caller invoked (IAM let them invoke it),
    never from the event: a button edited to name another team's job is refused as the API refuses it."""
    team = team_of_alias(invoked_function_arn)
    if team is None:
        return ActionResult(
            False, "Not allowed", f"invoke this function through a team's alias ({CONSOLE_ALIAS_PREFIX}NAME)", 403
        )
    try:
        request = parse_action(event)
    except ValidationError as error:
        return invalid(error)
    principal = console_principal(team, request_id=request_id)
    if principal.may_act_for(request.team):
        # Before the action: CloudTrail's record of this request finds the job's entry through it.
        stores.jobs.remember_console_request(request_id, request.job, now=now)
    return act(request, principal=principal, stores=stores, now=now)


@dataclass(frozen=True)
class Invocation:
    """CloudTrail's record of one invocation of the actions function (a Lambda data event via EventBridge)."""

    request_id: str
    person: str  # the caller's ARN: an assumed role's session names the person
    team: str


MAX_PERSON = 2048


def invocation(event: dict[str, Any]) -> Invocation | None:
    """The record's request, caller and alias; None for anything else (another call, a malformed record)."""
    detail = event.get("detail")
    if not isinstance(detail, dict) or detail.get("eventName") != "Invoke":
        return None
    request_id = detail.get("requestID")
    person = (detail.get("userIdentity") or {}).get("arn")
    parameters = detail.get("requestParameters") or {}
    function, qualifier = parameters.get("functionName"), parameters.get("qualifier")
    if not (isinstance(request_id, str) and RUN_ID.fullmatch(request_id)):
        return None
    if not (isinstance(person, str) and 0 < len(person) <= MAX_PERSON) or not isinstance(function, str):
        return None
    team = team_of_alias(function, qualifier if isinstance(qualifier, str) else None)
    return Invocation(request_id, person, team) if team else None


def confirm_identity(event: dict[str, Any], jobs: ConfirmingJobs) -> tuple[Invocation, str] | None:
    """Name the person CloudTrail saw on the audit entries their console request wrote: (the record, the
    job), or None when the record is not of a console action that acted on a job."""
    found = invocation(event)
    if found is None:
        return None
    principal = console_principal(found.team, request_id=found.request_id)
    job = jobs.confirm_console_request(found.request_id, principal.arn, found.person)
    return (found, job) if job else None
