"""In-memory adapters of ``jobsched.ports``: the scale model (``scripts/bench_scale.py``) runs the real
dispatcher and worker on them, and the contract suite proves they behave as the AWS adapters do."""

from jobsched.memory.jobs import MemoryJobs
from jobsched.memory.queues import MemoryEscalations, MemoryWorkQueues, QueuedMessage
from jobsched.memory.runs import MemoryRuns
from jobsched.memory.table import Capacity, ConditionFailed, MemoryTable

__all__ = [
    "Capacity",
    "ConditionFailed",
    "MemoryEscalations",
    "MemoryJobs",
    "MemoryRuns",
    "MemoryTable",
    "MemoryWorkQueues",
    "QueuedMessage",
]
