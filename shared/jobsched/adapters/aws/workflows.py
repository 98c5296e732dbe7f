"""Step Functions: one Standard state machine per DAG job, its executions, and task-token reports.

Reports to a token the state machine no longer waits on (the attempt timed out, was retried, or the
execution was stopped) are not errors here: the run's own records already say what happened, so they
return False and change nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from jobsched.adapters.aws.clients import client
from jobsched.core.errors import ExecutionNotOurs, WorkflowsNotConfigured
from jobsched.core.names import JOB_TAG, OWNER_TAG

STALE_TOKEN_ERRORS = frozenset({"TaskDoesNotExist", "TaskTimedOut", "InvalidToken"})
MAX_NAME = 80  # Step Functions state machine names


@dataclass(frozen=True)
class Execution:
    arn: str
    status: str  # RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED, PENDING_REDRIVE
    error: str | None = None


class Workflows:
    def __init__(self, *, role_arn: str | None, machine_prefix: str | None, stepfunctions: Any | None = None) -> None:
        self.role_arn = role_arn
        self.machine_prefix = machine_prefix  # arn:aws:states:REGION:ACCOUNT:stateMachine:jobsched-STAGE-dag-
        self._client = stepfunctions

    @property
    def sfn(self) -> Any:
        return self._client or client("stepfunctions")

    # ------------------------------------------------------------------------ state machines

    def machine_arn(self, job: str) -> str:
        if not self.machine_prefix:
            raise WorkflowsNotConfigured("DAG jobs need JOBSCHED_STATE_MACHINE_PREFIX (set by the stack)")
        return self.machine_prefix + machine_suffix(job, MAX_NAME - len(self.machine_prefix.rsplit(":", 1)[-1]))

    def ensure(self, job: str, team: str, definition: str) -> tuple[str, bool]:
        """Create or update the job's state machine; (arn, changed). An unchanged definition changes nothing."""
        if not self.role_arn:
            raise WorkflowsNotConfigured("DAG jobs need JOBSCHED_WORKFLOW_ROLE_ARN (set by the stack)")
        arn = self.machine_arn(job)
        try:
            current = self.sfn.describe_state_machine(stateMachineArn=arn)
        except ClientError as error:
            if _code(error) != "StateMachineDoesNotExist":
                raise
            self.sfn.create_state_machine(
                name=arn.rsplit(":", 1)[-1],
                definition=definition,
                roleArn=self.role_arn,
                type="STANDARD",
                tags=[{"key": OWNER_TAG, "value": team}, {"key": JOB_TAG, "value": job}],
            )
            return arn, True
        if _same_json(current.get("definition", ""), definition) and current.get("roleArn") == self.role_arn:
            return arn, False
        self.sfn.update_state_machine(stateMachineArn=arn, definition=definition, roleArn=self.role_arn)
        return arn, True

    def definition(self, job: str) -> str | None:
        try:
            return str(self.sfn.describe_state_machine(stateMachineArn=self.machine_arn(job))["definition"])
        except ClientError as error:
            if _code(error) == "StateMachineDoesNotExist":
                return None
            raise

    def delete(self, job: str) -> None:
        """Running executions finish under the definition they started with (Step Functions' rule)."""
        try:
            self.sfn.delete_state_machine(stateMachineArn=self.machine_arn(job))
        except ClientError as error:
            if _code(error) != "StateMachineDoesNotExist":
                raise

    # ---------------------------------------------------------------------------- executions

    def start(self, execution_arn: str, payload: dict[str, Any]) -> str:
        """Start the named execution; a second start of the same run starts nothing. An execution of that
        name is adopted only if it was started with this run's input."""
        machine, _, name = execution_arn.replace(":execution:", ":stateMachine:", 1).rpartition(":")
        try:
            response = self.sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps(payload))
            return str(response["executionArn"])
        except ClientError as error:
            if _code(error) != "ExecutionAlreadyExists":
                raise
        started = self.sfn.describe_execution(executionArn=execution_arn).get("input") or "null"
        if not _same_json(started, json.dumps(payload)):
            raise ExecutionNotOurs(f"{execution_arn} exists and was not started for this run")
        return execution_arn

    def execution_arn(self, job: str, name: str) -> str:
        machine = self.machine_arn(job)
        return machine.replace(":stateMachine:", ":execution:", 1) + f":{name[:80]}"

    def describe(self, execution_arn: str) -> Execution | None:
        try:
            response = self.sfn.describe_execution(executionArn=execution_arn)
        except ClientError as error:
            if _code(error) == "ExecutionDoesNotExist":
                return None
            raise
        return Execution(execution_arn, str(response["status"]), response.get("error"))

    def stop(self, execution_arn: str, *, cause: str) -> None:
        try:
            self.sfn.stop_execution(executionArn=execution_arn, error="jobsched.Cancelled", cause=cause[:32768])
        except ClientError as error:
            if _code(error) != "ExecutionDoesNotExist":
                raise

    def billed_transitions(self, execution_arn: str) -> int:
        """State transitions so far as Step Functions bills them: each state entered, and each retry."""
        entered = scheduled = task_states = 0
        token = None
        while True:
            request: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
            if token:
                request["nextToken"] = token
            response = self.sfn.get_execution_history(**request)
            for event in response["events"]:
                kind = event["type"]
                entered += kind.endswith("StateEntered")
                task_states += kind == "TaskStateEntered"
                scheduled += kind == "TaskScheduled"  # once per attempt of a task state
            token = response.get("nextToken")
            if not token:
                return entered + (scheduled - task_states)

    # ------------------------------------------------------------------------- task reports

    def succeed(self, token: str, output: dict[str, Any]) -> bool:
        return self._report("send_task_success", taskToken=token, output=json.dumps(output))

    def fail(self, token: str, error: str, cause: str) -> bool:
        return self._report("send_task_failure", taskToken=token, error=error[:256], cause=cause[:32768])

    def heartbeat(self, token: str) -> bool:
        return self._report("send_task_heartbeat", taskToken=token)

    def _report(self, operation: str, **arguments: Any) -> bool:
        try:
            getattr(self.sfn, operation)(**arguments)
        except ClientError as error:
            if _code(error) in STALE_TOKEN_ERRORS:
                return False
            raise
        return True


def machine_suffix(job: str, room: int) -> str:
    """team/name as a state machine name part: ``team_name`` ('_' appears in neither, so no two jobs share
    one); too long, it is shortened with a hash of the whole key so it stays unique."""
    text = job.replace("/", "_")
    if len(text) <= room:
        return text
    digest = hashlib.sha256(job.encode()).hexdigest()[:10]
    return f"{text[: room - 11]}-{digest}"


def _same_json(left: str, right: str) -> bool:
    try:
        return bool(json.loads(left) == json.loads(right))
    except ValueError:
        return False


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
