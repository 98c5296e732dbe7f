"""API request bodies. Job bodies are the job specification itself (spec.JobSpec); the answers are ``api.models``."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, WithJsonSchema, field_validator
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from jobsched.core.bounds import WHOLE_NUMBER, Instant
from jobsched.core.run_records import MAX_CHECKPOINT_BYTES, MAX_PROGRESS_MESSAGE, ProgressReport
from jobsched.core.spec import JobSpec, Name

_OBJECT: JsonDict = {"type": "object"}


class JobBody(JobSpec):
    """A job spec as a request body: team and name come from the path (if given here, they must match)."""

    # What the spec's validator requires, said in the schema: exactly one of target and dag is an object.
    # As if/then/else, not a model-level anyOf: client generators read an anyOf as alternative models.
    model_config = ConfigDict(
        **JobSpec.model_config,
        json_schema_extra={
            "if": {"required": ["target"], "properties": {"target": _OBJECT}},
            "then": {"properties": {"dag": {"type": "null"}}},
            "else": {"required": ["dag"], "properties": {"dag": _OBJECT}},
        },
    )

    name: Name | None = None  # type: ignore[assignment]
    team: Name | None = None  # type: ignore[assignment]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PauseRequest(_Request):
    reason: str = Field(min_length=1, max_length=500)
    cancel_running: bool = Field(
        default=False, description="also cancel the runs now running (their containers and executions are stopped)"
    )


class TriggerRequest(_Request):
    payload: JsonValue = None


RerunStatus = Literal["FAILED", "TIMED_OUT", "MISSED", "SKIPPED", "CANCELLED", "SUCCEEDED"]


class BackfillRequest(_Request):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: Instant = Field(alias="from")
    end: Instant = Field(alias="to")
    max_in_flight: int = Field(default=5, ge=1, le=100)
    rate_per_minute: int | None = Field(default=None, ge=1, le=6000, description="instants started per minute")
    priority: Literal["high", "normal", "low"] | None = Field(
        default=None, description="the class its runs go to (default: the job's); one the team may use"
    )
    downstream: bool = Field(
        default=False,
        description="instants run again carry the jobs after this one (their runs of the instant run again too)",
    )
    status: list[RerunStatus] = Field(
        default_factory=list,
        max_length=6,
        description="run again the instants whose run ended in one of these; empty: only those that never ran"
        " (MISSED, SKIPPED) and those with no run",
    )


class RerunsRequest(BackfillRequest):
    status: list[RerunStatus] = Field(min_length=1, max_length=6, description="which ended runs to run again")


class RerunRequest(_Request):
    force: bool = Field(default=False, description="also a run that SUCCEEDED")
    downstream: bool = Field(
        default=False,
        description="when the rerun finishes, rerun the runs of the same instant of the jobs after it; with "
        "tasks: also every task that depends on them",
    )
    from_failure: bool = Field(
        default=False,
        description="DAG runs: keep the tasks that succeeded (and their outputs); run the others and what depends "
        "on them",
    )
    tasks: list[Annotated[str, Field(max_length=63)]] | None = Field(
        default=None, max_length=100, description="DAG runs: run these tasks again (with downstream: and theirs)"
    )


class DecisionRequest(_Request):
    comment: str = Field(default="", max_length=1000, description="why: kept with the decision and in the history")


MAX_RESULT_TEXT = 10_000


class CompleteRequest(_Request):
    """What an external worker reports. Runs' statuses are upper case everywhere, so either case is taken; the output
    may be text or JSON (checks read it as JSON either way)."""

    status: Annotated[
        Literal["succeeded", "failed"],
        # A pattern, not an enum: generated clients make one enum member per value, and these differ only in case.
        WithJsonSchema({"type": "string", "pattern": "^(succeeded|failed|SUCCEEDED|FAILED)$"}),
    ]
    output: Annotated[
        str | None,
        WithJsonSchema({"description": f"text, or any JSON value (kept as its text, at most {MAX_RESULT_TEXT})"}),
    ] = Field(default=None, max_length=MAX_RESULT_TEXT)
    error: str | None = Field(default=None, max_length=MAX_RESULT_TEXT)

    @field_validator("status", mode="before")
    @classmethod
    def _either_case(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("output", mode="before")
    @classmethod
    def _json_as_text(cls, value: Any) -> Any:
        """A JSON value is kept as its compact text, within the same bound as text."""
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"))


class HeartbeatRequest(_Request):
    """What a long attempt reports with its heartbeat: all optional (an empty body only says it is alive)."""

    progress: float | None = Field(default=None, ge=0, le=100, description="percent done")
    message: str | None = Field(default=None, max_length=MAX_PROGRESS_MESSAGE, description="what it is doing")
    checkpoint: JsonValue = Field(
        default=None,
        description=f"where the run's next attempt resumes (JSON, at most {MAX_CHECKPOINT_BYTES} bytes): a retry "
        "receives it as JOBSCHED_CHECKPOINT",
    )

    @field_validator("checkpoint")
    @classmethod
    def _small(cls, value: JsonValue) -> JsonValue:
        if value is not None and len(checkpoint_text(value).encode()) > MAX_CHECKPOINT_BYTES:
            raise PydanticCustomError(
                "checkpoint_too_large",
                "the checkpoint is over {limit} bytes as JSON: keep a key or an offset, and the data in your own store",
                {"limit": MAX_CHECKPOINT_BYTES},
            )
        return value

    def report(self) -> ProgressReport:
        checkpoint = checkpoint_text(self.checkpoint) if self.checkpoint is not None else None
        return ProgressReport(percent=self.progress, message=self.message, checkpoint=checkpoint)


def checkpoint_text(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


MAX_TEAM_LIMIT = 1_000_000  # a typo like 10**9 is refused rather than stored


# On the number itself, not the optional field: the schema's integer then carries the bounds.
TeamLimit = Annotated[int, Field(ge=1, le=MAX_TEAM_LIMIT), WHOLE_NUMBER]


class TeamLimitsRequest(_Request):
    """Limits to set for one team; a limit given as null goes back to the platform's default; one not
    given is left as it is."""

    # Whole numbers only: true is not 1 and "5" is not 5 here.
    max_running: TeamLimit | None = None
    max_jobs: TeamLimit | None = None
    max_backfills: TeamLimit | None = None
    requests_per_minute: TeamLimit | None = None


class RollbackRequest(_Request):
    to_version: int = Field(ge=1, description="the version whose spec is applied again, as a new version")
