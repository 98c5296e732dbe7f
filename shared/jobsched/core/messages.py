"""What the work queues carry besides run messages: a DAG task's message and its failure report, a callback's
result, and a sparse job's sent instant to audit."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobsched.core.runs import RunMessage, TaskStatus

TASK_TERMINAL = frozenset(
    {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.SKIPPED, TaskStatus.CANCELLED}
)


class DagTaskMessage(BaseModel):
    """What a task state puts on the work queue (``token`` is its Step Functions task token)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["dag_task"] = "dag_task"
    job: str
    team: str
    run_id: str
    scheduled_at: str
    correlation_id: str = ""
    task: str
    retry_count: int = Field(ge=0, default=0)
    # The task's attempts before this execution (a re-execution of the run continues its attempts, so a late
    # result of an attempt of the execution before stays refused).
    attempt_base: int = Field(ge=0, default=0)
    token: str
    woken: bool = False  # sent by an event that may meet its wait_for: checked once, never re-sent
    # A map task's messages: one per item (its index and value), and the one after every item (the Map state's
    # results: each item's answer, or {"failed": true} for one that finally failed).
    item_index: int | None = Field(default=None, ge=0)
    item: Any = None
    map_done: bool = False
    results: list[Any] | None = None

    @property
    def attempt(self) -> int:
        return self.attempt_base + self.retry_count + 1

    @property
    def record(self) -> str:
        """The task record this message is about: the task, or one item of a map task (``name[index]``)."""
        return self.task if self.item_index is None else item_record(self.task, self.item_index)


def item_record(task: str, index: int) -> str:
    return f"{task}[{index}]"


class DagTaskFailure(BaseModel):
    """What a task's Catch sends when the state machine gave up on it (failures, timeouts)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["dag_task_failed"] = "dag_task_failed"
    job: str
    team: str
    run_id: str
    task: str
    error: str | None = None
    cause: str | None = None
    execution: str | None = None  # the execution that gave up: a report of one before a re-execution is stale


class CallbackResult(BaseModel):
    """A callback's result, accepted by the API and judged by the worker: a job's checks cost CPU (bounded, but
    seconds), which the API, shared by every team's requests and limited to 29 s, must not spend."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["callback_result"] = "callback_result"
    job: str
    team: str
    run_id: str
    attempt: int = Field(ge=1)
    task: str | None = None  # a DAG task's callback
    succeeded: bool
    output: str | None = None
    error: str | None = None

    @property
    def correlation_id(self) -> str:
        return self.run_id


class AuditMessage(BaseModel):
    """A sparse job's sent instant, to be looked at once its run record should exist (#51): what an extra visit of
    the dispatcher did for it (three write units a run), for the price of a message and a read
    (``pipeline.sent_audits``). It travels on the job's work queue behind its run message."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["audit"] = "audit"
    run: RunMessage  # the run message the dispatcher sent
    priority: str = "normal"  # its job's class: the queue it comes back on when it must wait

    @property
    def job(self) -> str:
        return self.run.job

    @property
    def team(self) -> str:
        return self.run.team

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def attempt(self) -> int:
        return self.run.attempt

    @property
    def correlation_id(self) -> str:
        return self.run.correlation_id


# What the scheduler itself puts on a work queue.
WorkMessage = RunMessage | DagTaskMessage | CallbackResult | AuditMessage


def parse_work_message(body: str) -> WorkMessage | DagTaskFailure:
    """A work-queue message: a run, one of the two kinds a DAG state machine sends, a callback's result, or an
    instant to audit."""
    kind = json.loads(body).get("kind") if body.lstrip().startswith("{") else None
    if kind == "dag_task":
        return DagTaskMessage.model_validate_json(body)
    if kind == "dag_task_failed":
        return DagTaskFailure.model_validate_json(body)
    if kind == "callback_result":
        return CallbackResult.model_validate_json(body)
    if kind == "audit":
        return AuditMessage.model_validate_json(body)
    return RunMessage.model_validate_json(body)


def work_message_of(record: dict[str, Any]) -> WorkMessage | DagTaskFailure | None:
    """An SQS record's work message, or None when it is not even one (it fails on its own, as such)."""
    try:
        return parse_work_message(record["body"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
