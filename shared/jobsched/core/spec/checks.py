"""Checks on what a target returned."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from jobsched.core.checks import MAX_CHECKS, check_schema
from jobsched.core.output_paths import MAX_EXPECT_CHARS, CheckDefinitionError, parse_assertion
from jobsched.core.spec.base import Name, StrictModel, _fail

# ------------------------------------------------------------------------------------------ checks

OUTPUT_TARGETS = ("lambda", "http", "callback", "approval")  # targets that hand back what they produced (an
# approval: its decision, who made it and their comment)


class OutputCheck(StrictModel):
    """A quality gate on what the target returned (core.checks): an assertion or a JSON Schema."""

    name: Name | None = Field(default=None, description="shown in the run view and pages; default: the check itself")
    expect: str | None = Field(
        default=None,
        max_length=MAX_EXPECT_CHARS,
        description="PATH OP VALUE on the output as JSON, e.g. output.rows > 0 or len(output.files) >= 1",
    )
    json_schema: dict[str, JsonValue] | None = Field(
        default=None, description="a JSON Schema the output must match (linear-cost keywords only)"
    )
    severity: Literal["error", "warn"] = Field(
        default="error", description="error: the attempt fails (not retried); warn: recorded and paged as a warning"
    )

    @field_validator("expect")
    @classmethod
    def _assertion(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_assertion(value)
            except CheckDefinitionError as error:
                raise _fail("invalid_check", "{message}", message=str(error)) from None
        return value

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        if value is not None:
            try:
                check_schema(value)
            except CheckDefinitionError as error:
                raise _fail("invalid_check_schema", "{message}", message=str(error)) from None
        return value

    @model_validator(mode="after")
    def _one_form(self) -> OutputCheck:
        if (self.expect is None) == (self.json_schema is None):
            raise _fail("check_form", "give exactly one of expect (an assertion) or json_schema")
        return self

    @property
    def label(self) -> str:
        return self.name or (self.expect if self.expect is not None else "json_schema")


Checks = Annotated[list[OutputCheck], Field(max_length=MAX_CHECKS)]


def _check_checks_target(checks: list[OutputCheck], info: ValidationInfo) -> list[OutputCheck]:
    target = info.data.get("target")  # absent when the target itself was invalid: its own error says so
    if checks and target is not None and target.type not in OUTPUT_TARGETS:
        raise _fail(
            "checks_need_output",
            "checks test what a target returns: {allowed} targets return output, {type} does not",
            allowed=", ".join(OUTPUT_TARGETS),
            type=target.type,
        )
    return checks
