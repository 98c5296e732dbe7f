"""Schedule expressions and fire-time computation (pure: ``now`` and ``after`` are arguments)."""

from jobsched.schedule.engine import (
    DEFAULT_HORIZON,
    LATE_GRACE,
    CompiledSchedule,
    DuePlan,
    Occurrence,
    compile_schedule,
    plan_due,
)
from jobsched.schedule.expressions import ExpressionError, parse_expression

__all__ = [
    "DEFAULT_HORIZON",
    "LATE_GRACE",
    "CompiledSchedule",
    "DuePlan",
    "ExpressionError",
    "Occurrence",
    "compile_schedule",
    "parse_expression",
    "plan_due",
]
