"""``jobsched test``: a job file's behaviour checked in a team's CI, with no stack and no AWS.

A test file names a job file, a window of time, what its targets answer (``stubs``: an output, a failure, a number
of failures before it succeeds, how long it takes) and what must happen (``expect``). The real dispatcher and
worker run the job on the memory adapters and a virtual clock through the window: its schedule fires as deployed
(calendars, blackouts, DST, catch-up), its retries and checks apply, a DAG runs through its tasks on the in-memory
Step Functions (payloads resolved from upstream outputs, maps, checks), and what would page is counted. Nothing
real is called: a target is only ever its stub.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues
from jobsched.adapters.memory.workflows import MemoryWorkflows
from jobsched.core.bounds import Instant
from jobsched.core.durations import Duration
from jobsched.core.messages import DagTaskFailure, DagTaskMessage, WorkMessage, parse_work_message
from jobsched.core.names import PRIORITIES
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.runs import RunStatus, instant_text, parse_instant
from jobsched.core.spec import ApprovalTarget, CallbackTarget, JobSpec, StrictModel
from jobsched.dag.deployer import DagDeployer
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.paging.incidents import Escalator
from jobsched.paging.rules import OPENS, Links
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.lifecycle import AnnouncedRuns, Lifecycle
from jobsched.pipeline.manual_runs import trigger_run
from jobsched.pipeline.worker import Worker
from jobsched.registry.jobfile import load_job_file
from jobsched.schedule.company import NO_COMPANY, CompanySettings
from jobsched.schedule.fires import first_fire

MAX_WINDOW = timedelta(days=366)
MAX_STEPS = 200_000  # a test is bounded whatever its window and schedule
SINGLE = "target"  # the stub name of a job's single target
DEFAULT_TOPIC = "arn:aws:sns:us-east-1:123456789012:jobsched-test"  # where a job with no escalation of its own pages


class Stub(StrictModel):
    """What a target (or a DAG task, by name) answers each attempt."""

    output: Any = Field(default=None, description="what it returns (JSON): the run's output, what checks read")
    fail: str | None = Field(default=None, description="every attempt fails with this error")
    fail_times: int = Field(default=0, ge=0, le=100, description="the first N attempts fail, then it answers output")
    takes: Duration | None = Field(default=None, description="how long an attempt takes (virtual time)")


class Trigger(StrictModel):
    at: Instant
    payload: Any = None


class Window(StrictModel):
    model_config = ConfigDict(**StrictModel.model_config, populate_by_name=True)

    start: Instant = Field(alias="from")
    end: Instant = Field(alias="to")


class Expect(StrictModel):
    fires: list[str] | None = Field(default=None, description="exactly the instants that fire (UTC, ISO 8601)")
    fire_count: int | None = Field(default=None, ge=0)
    statuses: dict[str, int] | None = Field(default=None, description="runs per final status, e.g. {SUCCEEDED: 3}")
    runs: dict[str, str] | None = Field(default=None, description="an instant's run's final status")
    attempts: dict[str, int] | None = Field(default=None, description="an instant's run's attempts")
    tasks: dict[str, str] | None = Field(default=None, description="a DAG task's status, in every run")
    payloads: dict[str, Any] | None = Field(default=None, description="what a task (or target) was last called with")
    pages: int | None = Field(
        default=None, ge=0, description="pages sent (opened, escalated, paused), as the tier and escalation route them"
    )
    held_pages: int | None = Field(
        default=None, ge=0, description="pages a company maintenance window held (recorded on the incident, not sent)"
    )


class JobTest(StrictModel):
    name: str | None = None
    job: str = Field(description="the job file, relative to this test file")
    company: str | None = Field(
        default=None, description="the company calendars and maintenance windows it names: a file, relative to this one"
    )
    window: Window
    stubs: dict[str, Stub] = Field(default_factory=dict, max_length=100)
    triggers: list[Trigger] = Field(default_factory=list, max_length=1000)
    expect: Expect


@dataclass
class Observed:
    fires: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    runs: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, set[str]] = field(default_factory=dict)
    payloads: dict[str, Any] = field(default_factory=dict)
    pages: int = 0
    held_pages: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "fires": self.fires,
            "statuses": dict(self.statuses),
            "runs": self.runs,
            "attempts": self.attempts,
            "tasks": {task: sorted(states) for task, states in self.tasks.items()},
            "payloads": self.payloads,
            "pages": self.pages,
            "held_pages": self.held_pages,
        }


@dataclass
class Outcome:
    file: str
    name: str
    failures: list[str]
    observed: Observed

    @property
    def passed(self) -> bool:
        return not self.failures


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class StubTargets:
    """Each target answers with its stub; calls are kept (stub name, attempt, payload)."""

    def __init__(self, stubs: dict[str, Stub], clock: Clock) -> None:
        self.stubs, self.clock = stubs, clock
        self.calls: list[tuple[str, int, Any]] = []
        self.counts: Counter[str] = Counter()

    def execute(self, target: Any, context: RunContext) -> TargetResult:
        name = (context.task or SINGLE).split("[", 1)[0]
        if isinstance(target, (CallbackTarget, ApprovalTarget)) and name not in self.stubs:
            return TargetResult("pending", output="waiting")  # stubbed, it answers at once, as its worker would
        payload = context.payload_override if context.payload_override is not None else getattr(target, "payload", None)
        self.calls.append((name, context.attempt, payload))
        stub = self.stubs.get(name, Stub())
        key = f"{context.run_id}/{context.task or ''}"
        self.counts[key] += 1
        if stub.takes is not None:
            self.clock.now += stub.takes
        if stub.fail is not None:
            return TargetResult("failed", error=stub.fail)
        if self.counts[key] <= stub.fail_times:
            return TargetResult("failed", error=f"stub {name}: failure {self.counts[key]} of {stub.fail_times}")
        text = json.dumps(stub.output if stub.output is not None else {})
        return TargetResult("succeeded", output=text, body=text)


class Harness:
    """One job on the memory adapters, through a window of virtual time."""

    def __init__(self, spec: JobSpec, test: JobTest, company: CompanySettings = NO_COMPANY) -> None:
        self.spec, self.test = spec, test
        self.clock = Clock(test.window.start)
        self.jobs, self.store = MemoryJobs(), MemoryRuns()
        self.runs = AnnouncedRuns(self.store, Lifecycle([]))
        self.queues, self.escalations = MemoryWorkQueues(self.clock), MemoryEscalations()
        self.machine: list[tuple[datetime, DagTaskMessage | DagTaskFailure]] = []
        self.workflows = MemoryWorkflows(self.clock, self._deliver)
        self.targets = StubTargets(test.stubs, self.clock)
        self.worker = Worker(
            self.jobs, self.runs, self.queues, self.escalations, self.targets, self.clock, workflows=self.workflows
        )
        self.dispatcher = Dispatcher(self.jobs, self.runs, self.queues, escalations=self.escalations)
        now = self.clock()
        for reference, calendar in company.calendars.items():
            self.jobs.put_company_entry("calendar", reference, calendar.model_dump(mode="json", exclude_none=True))
        for reference, window in company.windows.items():
            self.jobs.put_company_entry("maintenance", reference, window.model_dump(mode="json", exclude_none=True))
        missing = company.missing(spec)
        if missing:
            raise ValueError(f"{missing[0][1]} ({missing[0][0]}) is not defined: name a company file that defines it")
        self.jobs.create(
            spec,
            now=now,
            principal="jobsched test",
            cursor=now,
            next_visit_at=first_fire(spec, registered_at=now, after=now, company=company),
        )
        if spec.dag is not None:
            DagDeployer(self.workflows, {priority: f"memory://{priority}" for priority in PRIORITIES}).deploy(spec)

    def _deliver(self, queue_url: str, body: dict[str, Any]) -> None:
        message = parse_work_message(json.dumps(body))
        assert isinstance(message, (DagTaskMessage, DagTaskFailure))
        self.machine.append((self.clock(), message))

    def run(self) -> Observed:
        end = self.test.window.end
        triggers = sorted(self.test.triggers, key=lambda t: t.at)
        for _ in range(MAX_STEPS):
            now = self.clock()
            while triggers and triggers[0].at <= now:
                trigger = triggers.pop(0)
                who = "jobsched test"
                trigger_run(
                    self.jobs, self.runs, self.queues, self.spec.key, now=now, principal=who, payload=trigger.payload
                )
            self.dispatcher.tick(now)
            self._pump()
            following = self._next_event(triggers)
            if following is None or following > end:
                break
            self.clock.now = max(following, now + timedelta(seconds=1))
        return self._observed()

    def _pump(self) -> None:
        for _ in range(1000):
            self.workflows.advance()
            now = self.clock()
            sent: list[WorkMessage | DagTaskFailure] = [m for at, m in self.machine if at <= now]
            self.machine = [(at, m) for at, m in self.machine if at > now]
            sent += [queued.message for p in PRIORITIES for queued in self.queues.receive(p, limit=100)]
            if not sent:
                return
            for message in sent:
                self.worker.process_any(message)

    def _next_event(self, triggers: list[Trigger]) -> datetime | None:
        state = self.jobs.get_state(self.spec.key)
        candidates = [state.next_visit_at] if state is not None and state.next_visit_at is not None else []
        candidates += [at for at in (self.queues.next_visible(p) for p in PRIORITIES) if at is not None]
        candidates += [at for at, _ in self.machine]
        candidates += [at for at, _, _ in self.workflows.due]
        candidates += [trigger.at for trigger in triggers[:1]]
        return min(candidates) if candidates else None

    def _observed(self) -> Observed:
        observed = Observed()
        runs = sorted(self.store.history(self.spec.key, limit=100_000, newest_first=False), key=lambda r: r.run_id)
        for run in runs:
            at = instant_text(run.scheduled_at)
            if run.status is not RunStatus.MISSED and run.status is not RunStatus.SKIPPED and run.trigger == "schedule":
                observed.fires.append(at)
            observed.statuses[run.status.value] += 1
            observed.runs[at] = run.status.value
            observed.attempts[at] = run.attempt
            for name, state in self.store.tasks(self.spec.key, run.run_id).items():
                observed.tasks.setdefault(name.split("[", 1)[0], set()).add(state.status.value)
        for name, _, payload in self.targets.calls:
            observed.payloads[name] = payload
        observed.pages = self._pages()
        incidents = [self.jobs.get_incident(self.spec.key, kind) for kind in sorted(set(OPENS.values()))]
        observed.held_pages = sum(len(found.incident.held) for found in incidents if found is not None)
        return observed

    def _pages(self) -> int:
        """The pages the escalation path would send for what happened (opened, escalated, paused), routed by the
        job's tier and escalation as deployed: one per incident, not one per failure; a ticket pages nobody."""
        at = Clock(self.clock())
        escalator = Escalator(self.jobs, PagesNotSent(), at, DEFAULT_TOPIC, Links(region="us-east-1"))
        sent = 0
        for event in self.escalations.events:
            parsed = EscalationEvent.model_validate(event)
            at.now = parse_instant(parsed.occurred_at)  # handled when it happened (a maintenance window open then)
            handled = escalator.handle(parsed)
            sent += sum(1 for page in handled.pages if page.notice != "resolved")
        return sent


class PagesNotSent:
    """The pages queue of a test: pages are counted, never sent."""

    def send(self, bodies: Sequence[str]) -> None:
        return None

    def retry_later(self, receipt_handle: str, delay: timedelta) -> None:
        return None


def check(expect: Expect, observed: Observed) -> list[str]:
    failures = []

    def differ(what: str, wanted: Any, got: Any) -> None:
        if wanted is not None and wanted != got:
            failures.append(f"{what}: expected {json.dumps(wanted, default=str)}, got {json.dumps(got, default=str)}")

    differ("fires", expect.fires, observed.fires)
    differ("fire_count", expect.fire_count, len(observed.fires))
    differ("statuses", expect.statuses, dict(observed.statuses))
    for at, status in (expect.runs or {}).items():
        differ(f"runs[{at}]", status, observed.runs.get(at, "no run"))
    for at, count in (expect.attempts or {}).items():
        differ(f"attempts[{at}]", count, observed.attempts.get(at, 0))
    for task, status in (expect.tasks or {}).items():
        differ(f"tasks[{task}]", [status], sorted(observed.tasks.get(task, {"never ran"})))
    for task, payload in (expect.payloads or {}).items():
        differ(f"payloads[{task}]", payload, observed.payloads.get(task, "never called"))
    differ("pages", expect.pages, observed.pages)
    differ("held_pages", expect.held_pages, observed.held_pages)
    return failures


def run_test_file(path: Path, extra_stubs: dict[str, Stub] | None = None) -> Outcome:
    """One test file, as ``jobsched test`` runs it. Raises ValueError (a usage error) for a malformed one."""
    import yaml

    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    test = JobTest.model_validate(document)
    if not timedelta(0) < test.window.end - test.window.start <= MAX_WINDOW:
        raise ValueError(f"{path}: the window must end after it starts, within {MAX_WINDOW.days} days")
    spec = load_job_file((path.parent / test.job).resolve())
    company = NO_COMPANY
    if test.company is not None:
        company = CompanySettings.from_document(
            yaml.safe_load((path.parent / test.company).resolve().read_text(encoding="utf-8")) or {}
        )
    if extra_stubs:
        test = test.model_copy(update={"stubs": test.stubs | extra_stubs})
    observed = Harness(spec, test, company).run()
    return Outcome(str(path), test.name or path.stem, check(test.expect, observed), observed)


def stub_option(value: str, read: Callable[[Path], str]) -> tuple[str, Stub]:
    """``--stub task=output.json``: that task (or ``target``) answers the file's JSON."""
    name, sep, file = value.partition("=")
    if not sep or not name or not file:
        raise ValueError(f"'{value}' is not TASK=FILE.json")
    return name, Stub(output=json.loads(read(Path(file))))
