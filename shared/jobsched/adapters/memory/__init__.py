"""In-memory adapters of ``jobsched.ports``: the scale model (``scripts/bench_scale.py``) runs the real
dispatcher and worker on them, and the contract suite proves they behave as the AWS adapters do."""

from jobsched.adapters.memory.jobs import MemoryJobs
from jobsched.adapters.memory.queues import MemoryEscalations, MemoryWorkQueues, QueuedMessage
from jobsched.adapters.memory.runs import MemoryRuns
from jobsched.adapters.memory.table import Capacity, ConditionFailed, MemoryTable

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
