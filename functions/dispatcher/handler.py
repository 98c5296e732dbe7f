"""Dispatcher: fired by EventBridge every minute, once per part of the tick (CDK context ``dispatchers``:
each rule target carries ``{"part": i, "parts": n}``). Parse, call the domain, report."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobsched.core.names import MAX_DISPATCHERS
from jobsched.watch.observability import make_logger, make_tracer
from jobsched.watch.signals import emit
from jobsched.wiring import default_dispatcher, utc_now

logger = make_logger("dispatcher")


class TickEvent(BaseModel):
    """The rule target's constant input (absent: the whole tick in one invocation)."""

    model_config = ConfigDict(extra="ignore")  # a plain scheduled event carries EventBridge's own fields
    part: int = Field(default=0, ge=0)
    parts: int = Field(default=1, ge=1, le=MAX_DISPATCHERS)

    @model_validator(mode="after")
    def _part_in_range(self) -> TickEvent:
        if self.part >= self.parts:
            raise ValueError(f"part {self.part} of {self.parts}: need part < parts")
        return self


tracer = make_tracer("dispatcher")


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    now = utc_now()
    tick = TickEvent.model_validate(event)
    report = default_dispatcher().tick(now, part=tick.part, parts=tick.parts)
    for name, value in report.metrics().items():
        emit(name, value)
    summary = {"tick": now.isoformat(), "part": f"{tick.part + 1}/{tick.parts}", **report.summary()}
    for job, team, run_ids in report.sent:
        # One line per job visited, not per run: `jobsched logs` finds a run's first line here.
        logger.info("instants sent", extra={"job": job, "team": team, "run_ids": run_ids})
    logger.info("tick", extra=summary)
    return summary
