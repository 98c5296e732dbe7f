"""Step Functions in memory: the compiled DAG machines (``dag.definition``) interpreted enough to drive their
tasks on the memory adapters, synchronously, on an injected clock.

Interpreted as Step Functions does: Parallel (the execution ends once every branch has; one that fails fails
it), Task states sending to SQS with a task token or without (the message body's ``.$`` paths from the state's
input and the context: ``$$.Task.Token``, ``$$.State.RetryCount``, ``$$.Execution.Id``, ``$$.Map.Item``), their
``TimeoutSeconds`` and ``HeartbeatSeconds`` (``States.Timeout``, ``States.HeartbeatTimeout``), Retry (ErrorEquals,
IntervalSeconds, BackoffRate, MaxDelaySeconds, MaxAttempts; no jitter), Catch (ResultPath), ResultPath and
OutputPath, Pass, Choice (NumericEquals), inline Map (ItemsPath, ItemSelector, MaxConcurrency) and the
execution's own TimeoutSeconds. A report to a token no longer waited on returns False, as the AWS adapter's does.
Not interpreted: a distributed map's ItemReader (the moto suite runs those). Time moves only in ``advance``:
retries fall due and waits time out then.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from jobsched.core.errors import ExecutionNotOurs

MACHINE_PREFIX = "arn:aws:states:local:000000000000:stateMachine:"
EXECUTION_PREFIX = "arn:aws:states:local:000000000000:execution:"
WAITS_FOR_TOKEN = ".waitForTaskToken"
PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")

Deliver = Callable[[str, dict[str, Any]], None]  # (queue URL, message body): what a Task state sends to SQS


class NotInterpreted(ValueError):
    """A state this interpreter does not run (a distributed map's ItemReader)."""


@dataclass
class Execution:
    arn: str
    input: dict[str, Any]
    started_at: datetime
    timeout: timedelta | None
    status: str = "RUNNING"  # RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED
    error: str | None = None
    cause: str | None = None
    output: Any = None


@dataclass
class Frame:
    """One path through a states dict: a branch of the Parallel state, or one item of a Map state."""

    states: dict[str, Any]
    execution: Execution
    ended: Callable[[Any], None]  # its output
    failed: Callable[[str, str], None]  # error, cause
    item: tuple[int, Any] | None = None  # a map item's index and value ($$.Map.Item)


@dataclass
class Waiting:
    """A Task state waiting on its token."""

    frame: Frame
    state: str
    input: Any
    retry_count: int
    timeout_at: datetime | None
    heartbeat_every: timedelta | None
    heartbeat_at: datetime | None


@dataclass
class MemoryWorkflows:
    clock: Callable[[], datetime]
    deliver: Deliver
    machines: dict[str, str] = field(default_factory=dict)  # job -> definition text
    executions: dict[str, Execution] = field(default_factory=dict)
    waiting: dict[str, Waiting] = field(default_factory=dict)  # token -> its Task state
    due: list[tuple[datetime, int, Callable[[], None]]] = field(default_factory=list)  # retries' intervals
    _order: itertools.count[int] = field(default_factory=itertools.count)

    # ------------------------------------------------------------------------------ the port

    def ensure(self, job: str, team: str, definition: str) -> tuple[str, bool]:
        changed = self.machines.get(job) is None or json.loads(self.machines[job]) != json.loads(definition)
        self.machines[job] = definition
        return MACHINE_PREFIX + job.replace("/", "_"), changed

    def delete(self, job: str) -> None:
        self.machines.pop(job, None)  # running executions finish under the definition they started with

    def execution_arn(self, job: str, name: str) -> str:
        return f"{EXECUTION_PREFIX}{job.replace('/', '_')}:{name[:80]}"

    def start(self, execution_arn: str, payload: dict[str, Any]) -> str:
        """A second start of the same name with the same input starts nothing (another input: refused)."""
        found = self.executions.get(execution_arn)
        if found is not None:
            if found.input != payload:
                raise ExecutionNotOurs(f"{execution_arn} exists and was not started for this run")
            return execution_arn
        machine_name = execution_arn.removeprefix(EXECUTION_PREFIX).rsplit(":", 1)[0]
        job = next(job for job in self.machines if job.replace("/", "_") == machine_name)
        machine = json.loads(self.machines[job])
        timeout = timedelta(seconds=machine["TimeoutSeconds"]) if "TimeoutSeconds" in machine else None
        execution = Execution(execution_arn, payload, self.clock(), timeout)
        self.executions[execution_arn] = execution
        top = Frame(machine["States"], execution, lambda output: self._end(execution, output), self._failer(execution))
        self._run(top, machine["StartAt"], payload)
        return execution_arn

    def stop(self, execution_arn: str, *, cause: str) -> None:
        execution = self.executions.get(execution_arn)
        if execution is not None and execution.status == "RUNNING":
            self._close(execution, "ABORTED", "jobsched.Cancelled", cause)

    def succeed(self, token: str, output: dict[str, Any]) -> bool:
        waiting = self._take(token)
        if waiting is None:
            return False
        self._after(waiting.frame, waiting.state, waiting.input, output)
        return True

    def fail(self, token: str, error: str, cause: str) -> bool:
        waiting = self._take(token)
        if waiting is None:
            return False
        self._fail(waiting, error, cause)
        return True

    def heartbeat(self, token: str) -> bool:
        waiting = self.waiting.get(token)
        if waiting is None or waiting.frame.execution.status != "RUNNING":
            return False
        if waiting.heartbeat_every is not None:
            waiting.heartbeat_at = self.clock() + waiting.heartbeat_every
        return True

    # ------------------------------------------------------------------------------ time

    def advance(self) -> None:
        """What is due by now: executions past their timeout, waits timed out, retries whose interval passed."""
        now = self.clock()
        for execution in list(self.executions.values()):
            if execution.status == "RUNNING" and execution.timeout and now >= execution.started_at + execution.timeout:
                self._close(execution, "TIMED_OUT", "States.Timeout", "the execution timed out")
        for token, waiting in list(self.waiting.items()):
            beat = waiting.heartbeat_at is not None and now >= waiting.heartbeat_at
            if beat or (waiting.timeout_at is not None and now >= waiting.timeout_at):
                del self.waiting[token]
                self._fail(waiting, "States.HeartbeatTimeout" if beat else "States.Timeout", "")
        while True:
            self.due.sort(key=lambda entry: (entry[0], entry[1]))
            if not self.due or self.due[0][0] > now:
                return
            _, _, resume = self.due.pop(0)
            resume()

    def status(self, execution_arn: str) -> str | None:
        execution = self.executions.get(execution_arn)
        return execution.status if execution is not None else None

    # ------------------------------------------------------------------------------ states

    def _run(self, frame: Frame, name: str, state_input: Any, retry_count: int = 0) -> None:
        """Enter the state ``name`` and go on until a state waits, or the frame ends."""
        if frame.execution.status != "RUNNING":
            return
        state = frame.states[name]
        kind = state["Type"]
        if kind == "Choice":
            self._run(frame, _choice(state, state_input), state_input)
        elif kind == "Pass":
            self._after(frame, name, state_input, state.get("Result", state_input))
        elif kind == "Parallel":
            self._parallel(frame, name, state_input)
        elif kind == "Map":
            self._map(frame, name, state_input)
        elif kind == "Task" and state["Resource"].endswith(WAITS_FOR_TOKEN):
            self._send_and_wait(frame, name, state_input, retry_count)
        elif kind == "Task":
            parameters = state["Parameters"]
            body = _render(parameters["MessageBody"], state_input, self._context(frame, name, retry_count, None))
            self.deliver(parameters["QueueUrl"], body)
            self._after(frame, name, state_input, {})
        else:
            raise NotInterpreted(f"state {name}: type {kind}")

    def _send_and_wait(self, frame: Frame, name: str, state_input: Any, retry_count: int) -> None:
        state, now = frame.states[name], self.clock()
        token = secrets.token_hex(16)
        body = _render(state["Parameters"]["MessageBody"], state_input, self._context(frame, name, retry_count, token))
        beat = timedelta(seconds=state["HeartbeatSeconds"]) if "HeartbeatSeconds" in state else None
        timeout_at = now + timedelta(seconds=state["TimeoutSeconds"]) if "TimeoutSeconds" in state else None
        self.waiting[token] = Waiting(
            frame, name, state_input, retry_count, timeout_at, beat, now + beat if beat else None
        )
        self.deliver(state["Parameters"]["QueueUrl"], body)

    def _after(self, frame: Frame, name: str, state_input: Any, result: Any) -> None:
        """A state's result placed by its ResultPath and OutputPath; then its next state, or the frame's end."""
        state = frame.states[name]
        output = _placed(state_input, result, state.get("ResultPath", "$"))
        if "OutputPath" in state and state["OutputPath"] is None:
            output = {}
        if state.get("End"):
            frame.ended(output)
        else:
            self._run(frame, state["Next"], output)

    def _fail(self, waiting: Waiting, error: str, cause: str) -> None:
        """A state's error: retried by its first Retry that matches (until its attempts are spent), else caught
        by its first Catch that matches, else the frame fails."""
        frame, name = waiting.frame, waiting.state
        state = frame.states[name]
        retrier = next((r for r in state.get("Retry", []) if _matches(r["ErrorEquals"], error)), None)
        if retrier is not None and waiting.retry_count < retrier.get("MaxAttempts", 3):
            interval = retrier.get("IntervalSeconds", 1) * retrier.get("BackoffRate", 2.0) ** waiting.retry_count
            delay = timedelta(seconds=min(interval, retrier.get("MaxDelaySeconds", interval)))
            again = waiting.retry_count + 1
            self.due.append(
                (self.clock() + delay, next(self._order), lambda: self._run(frame, name, waiting.input, again))
            )
            return
        catcher = next((c for c in state.get("Catch", []) if _matches(c["ErrorEquals"], error)), None)
        if catcher is None:
            frame.failed(error, cause)
            return
        caught = _placed(waiting.input, {"Error": error, "Cause": cause}, catcher.get("ResultPath", "$"))
        self._run(frame, catcher["Next"], caught)

    def _parallel(self, frame: Frame, name: str, state_input: Any) -> None:
        branches = frame.states[name]["Branches"]
        results: list[Any] = [None] * len(branches)
        left = [len(branches)]

        def ended(index: int, output: Any) -> None:
            results[index] = output
            left[0] -= 1
            if left[0] == 0:
                self._after(frame, name, state_input, results)

        failed = self._failer_of(frame, name, state_input)
        for index, branch in enumerate(branches):
            sub = Frame(branch["States"], frame.execution, partial(ended, index), failed, frame.item)
            self._run(sub, branch["StartAt"], state_input)

    def _map(self, frame: Frame, name: str, state_input: Any) -> None:
        state = frame.states[name]
        if "ItemReader" in state:
            raise NotInterpreted(f"state {name}: a distributed map's ItemReader")
        items = _path(state.get("ItemsPath", "$"), state_input, {})
        processor = state["ItemProcessor"]
        fan = MapFan(len(items), state.get("MaxConcurrency") or len(items) or 1)
        failed = self._failer_of(frame, name, state_input)

        def start_items() -> None:
            while fan.startable():
                index = fan.start()
                context = self._context(frame, name, 0, None) | {
                    "Map": {"Item": {"Index": index, "Value": items[index]}}
                }
                selector = state.get("ItemSelector")
                item_input = _render(selector, state_input, context) if selector is not None else items[index]
                sub = Frame(processor["States"], frame.execution, partial(ended, index), failed, (index, items[index]))
                self._run(sub, processor["StartAt"], item_input)

        def ended(index: int, output: Any) -> None:
            if fan.end(index, output):
                self._after(frame, name, state_input, fan.results)
            else:
                start_items()

        if not items:
            self._after(frame, name, state_input, [])
            return
        start_items()

    # ------------------------------------------------------------------------------ helpers

    def _failer_of(self, frame: Frame, name: str, state_input: Any) -> Callable[[str, str], None]:
        """A failure inside a Parallel or Map state, handled by that state's Retry and Catch."""
        return lambda error, cause: self._fail(Waiting(frame, name, state_input, 0, None, None, None), error, cause)

    def _failer(self, execution: Execution) -> Callable[[str, str], None]:
        return lambda error, cause: self._close(execution, "FAILED", error, cause)

    def _end(self, execution: Execution, output: Any) -> None:
        if execution.status == "RUNNING":
            execution.status, execution.output = "SUCCEEDED", output

    def _close(self, execution: Execution, status: str, error: str, cause: str) -> None:
        """The execution ends: every token it waits on is no longer waited for."""
        execution.status, execution.error, execution.cause = status, error, cause
        for token in [token for token, waiting in self.waiting.items() if waiting.frame.execution is execution]:
            del self.waiting[token]

    def _take(self, token: str) -> Waiting | None:
        waiting = self.waiting.pop(token, None)
        if waiting is None or waiting.frame.execution.status != "RUNNING":
            return None
        return waiting

    def _context(self, frame: Frame, name: str, retry_count: int, token: str | None) -> dict[str, Any]:
        context: dict[str, Any] = {
            "Execution": {"Id": frame.execution.arn, "Input": frame.execution.input},
            "State": {"Name": name, "RetryCount": retry_count},
            "Task": {"Token": token},
        }
        if frame.item is not None:
            context["Map"] = {"Item": {"Index": frame.item[0], "Value": frame.item[1]}}
        return context


@dataclass
class MapFan:
    """A Map state's items: how many run at once (MaxConcurrency), their results in item order."""

    count: int
    at_once: int
    started: int = 0
    running: int = 0
    ended: int = 0
    results: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.results = [None] * self.count

    def startable(self) -> bool:
        return self.started < self.count and self.running < self.at_once

    def start(self) -> int:
        self.started, self.running = self.started + 1, self.running + 1
        return self.started - 1

    def end(self, index: int, output: Any) -> bool:
        """True once every item has ended."""
        self.results[index] = output
        self.running, self.ended = self.running - 1, self.ended + 1
        return self.ended == self.count


def _matches(errors: list[str], error: str) -> bool:
    return "States.ALL" in errors or error in errors


def _choice(state: dict[str, Any], state_input: Any) -> str:
    for choice in state["Choices"]:
        if "NumericEquals" not in choice:
            raise NotInterpreted(f"choice rule {sorted(choice)}")
        if _path(choice["Variable"], state_input, {}) == choice["NumericEquals"]:
            return str(choice["Next"])
    return str(state["Default"])


def _render(template: Any, state_input: Any, context: dict[str, Any]) -> Any:
    """Parameters: ``key.$`` values are paths into the input (``$``) or the context (``$$``)."""
    if isinstance(template, dict):
        return {
            key.removesuffix(".$"): _path(value, state_input, context)
            if key.endswith(".$")
            else _render(value, state_input, context)
            for key, value in template.items()
        }
    if isinstance(template, list):
        return [_render(value, state_input, context) for value in template]
    return template


def _path(path: str, state_input: Any, context: dict[str, Any]) -> Any:
    value: Any = context if path.startswith("$$") else state_input
    for name, index in PATH_PART.findall(path.lstrip("$").lstrip(".")):
        value = value[int(index)] if index else value[name]
    return value


def _placed(state_input: Any, result: Any, result_path: str | None) -> Any:
    """ResultPath: "$" (absent) replaces the input with the result, None keeps the input, "$.x" sets x."""
    if result_path is None:
        return state_input
    if result_path == "$":
        return result
    placed = dict(state_input)
    placed[result_path.removeprefix("$.")] = result
    return placed
