"""One trace per run, in W3C Trace Context (``traceparent``, ``tracestate``): derived, never stored, so the
dispatcher, the worker, a retry, a DAG task and the console all name the same trace without passing it along.

- The trace id is the run's: 8 hex digits of its scheduled instant (epoch seconds) and 24 of a digest of job and
  run id. That is also an AWS X-Ray trace id (``1-{8}-{24}``: X-Ray reads W3C ids this way), so the run view links
  to the trace in X-Ray's console, and a team's own X-Ray or OpenTelemetry spans under the ``traceparent`` join it.
- The run is the root span; each attempt is a child span of the run; a DAG task's attempt is a child of the run too
  (its task name in its id), so a DAG run's tasks nest under their run.
- Sampling (the flag a target sees): every critical-tier run, every retry (an attempt after a failure), and a
  stable tenth of the others by run. Whatever the flag, the console draws every run's trace from its records.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from jobsched.core.runs import parse_instant

SAMPLED_SHARE = 10  # one run in this many is sampled besides the critical ones and the retries
TRACESTATE_KEY = "jobsched"


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(str(part) for part in parts).encode()).hexdigest()


def trace_id(job: str, run_id: str, scheduled_at: str) -> str:
    """The run's trace id: 32 lower-case hex digits, its first 8 the scheduled instant's epoch seconds."""
    try:
        seconds = int(parse_instant(scheduled_at).timestamp()) & 0xFFFFFFFF
    except ValueError:  # not an instant (never from the pipeline): the digest alone still names the run
        seconds = int(_digest(scheduled_at)[:8], 16)
    return f"{seconds:08x}{_digest(job, run_id)[:24]}"


def run_span_id(job: str, run_id: str) -> str:
    return _digest(job, run_id, "run")[:16]


def attempt_span_id(job: str, run_id: str, attempt: int, task: str | None = None) -> str:
    return _digest(job, run_id, task or "", attempt)[:16]


def xray_trace_id(trace: str) -> str:
    """The same trace as X-Ray names it."""
    return f"1-{trace[:8]}-{trace[8:]}"


def sampled(run_id: str, attempt: int, *, critical: bool) -> bool:
    return critical or attempt > 1 or int(_digest(run_id)[:8], 16) % SAMPLED_SHARE == 0


@dataclass(frozen=True)
class TraceContext:
    trace: str
    span: str  # the attempt's span: the parent of whatever the target does
    sampled: bool
    state: str

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace}-{self.span}-{'01' if self.sampled else '00'}"

    @property
    def tracestate(self) -> str:
        return f"{TRACESTATE_KEY}={self.state}"


def attempt_trace(
    job: str, run_id: str, scheduled_at: str, attempt: int, *, task: str | None = None, critical: bool = False
) -> TraceContext:
    """The trace context an attempt passes to its target."""
    state = f"{run_id}:{attempt}" + (f":{task}" if task else "")
    return TraceContext(
        trace=trace_id(job, run_id, scheduled_at),
        span=attempt_span_id(job, run_id, attempt, task),
        sampled=sampled(run_id, attempt, critical=critical),
        state="".join(ch for ch in state if 0x20 < ord(ch) < 0x7F and ch not in ",=")[:240],
    )


@dataclass(frozen=True)
class Span:
    """One span of a run's trace, as the console's waterfall draws it."""

    name: str
    span_id: str
    parent_id: str | None
    start: datetime
    end: datetime | None  # None: still going
    status: str
