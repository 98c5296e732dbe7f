"""What the pipeline needs from the outside world, as typing.Protocol ports.

The dispatcher, the worker and the heartbeat checker are written against these; two adapters
implement each: ``jobsched.adapters.aws`` (DynamoDB, SQS, the real targets) and
``jobsched.adapters.memory`` (dicts with DynamoDB's conditional-write semantics, a virtual-time queue).
One contract suite (``tests/contract``) runs the same cases against both, so the memory adapters
the scale model runs on are proven, not assumed.

Every store method is one conditional write or one read in DynamoDB terms: a method that cannot do its
write because the stored item changed answers False/None or raises the domain conflict (``StaleAttempt``,
``VersionConflict``, ``JobExists``) — never half a change.
"""

from __future__ import annotations

from jobsched.ports.jobs import (
    CompanyPort as CompanyPort,
)
from jobsched.ports.jobs import (
    ContainersPort as ContainersPort,
)
from jobsched.ports.jobs import (
    DataChecksPort as DataChecksPort,
)
from jobsched.ports.jobs import (
    EscalationStorePort as EscalationStorePort,
)
from jobsched.ports.jobs import (
    EventBatchesPort as EventBatchesPort,
)
from jobsched.ports.jobs import (
    EventIntakeStorePort as EventIntakeStorePort,
)
from jobsched.ports.jobs import (
    HealthPort as HealthPort,
)
from jobsched.ports.jobs import (
    IncidentsPort as IncidentsPort,
)
from jobsched.ports.jobs import (
    JobsPort as JobsPort,
)
from jobsched.ports.jobs import (
    RegistryPort as RegistryPort,
)
from jobsched.ports.jobs import (
    TriggerRulesPort as TriggerRulesPort,
)
from jobsched.ports.jobs import (
    TriggerStorePort as TriggerStorePort,
)
from jobsched.ports.jobs import (
    WaitersPort as WaitersPort,
)
from jobsched.ports.operations import (
    BudgetsPort as BudgetsPort,
)
from jobsched.ports.operations import (
    DeadLetter as DeadLetter,
)
from jobsched.ports.operations import (
    DeadLettersPort as DeadLettersPort,
)
from jobsched.ports.operations import (
    DrillsPort as DrillsPort,
)
from jobsched.ports.operations import (
    ExpiredItemsPort as ExpiredItemsPort,
)
from jobsched.ports.operations import (
    ExpiredPage as ExpiredPage,
)
from jobsched.ports.operations import (
    SloLedgerPort as SloLedgerPort,
)
from jobsched.ports.operations import (
    StopsPort as StopsPort,
)
from jobsched.ports.operations import (
    SweepState as SweepState,
)
from jobsched.ports.operations import (
    UsageDay as UsageDay,
)
from jobsched.ports.operations import (
    UsagePort as UsagePort,
)
from jobsched.ports.runs import (
    ContainerLogsPort as ContainerLogsPort,
)
from jobsched.ports.runs import (
    DagDeploymentPort as DagDeploymentPort,
)
from jobsched.ports.runs import (
    EscalationsPort as EscalationsPort,
)
from jobsched.ports.runs import (
    NotifierPort as NotifierPort,
)
from jobsched.ports.runs import (
    PageQueuePort as PageQueuePort,
)
from jobsched.ports.runs import (
    QueueBacklogPort as QueueBacklogPort,
)
from jobsched.ports.runs import (
    RunLogsPort as RunLogsPort,
)
from jobsched.ports.runs import (
    RunsPort as RunsPort,
)
from jobsched.ports.runs import (
    TargetsPort as TargetsPort,
)
from jobsched.ports.runs import (
    TaskRunsPort as TaskRunsPort,
)
from jobsched.ports.runs import (
    WorkflowsPort as WorkflowsPort,
)
from jobsched.ports.runs import (
    WorkQueuesPort as WorkQueuesPort,
)
from jobsched.ports.runs import (
    delay_seconds as delay_seconds,
)

__all__ = [
    "BudgetsPort",
    "CompanyPort",
    "ContainerLogsPort",
    "ContainersPort",
    "DagDeploymentPort",
    "DataChecksPort",
    "DeadLetter",
    "DeadLettersPort",
    "DrillsPort",
    "EscalationStorePort",
    "EscalationsPort",
    "EventBatchesPort",
    "EventIntakeStorePort",
    "HealthPort",
    "IncidentsPort",
    "JobsPort",
    "NotifierPort",
    "PageQueuePort",
    "QueueBacklogPort",
    "RegistryPort",
    "RunLogsPort",
    "RunsPort",
    "SloLedgerPort",
    "StopsPort",
    "TargetsPort",
    "TaskRunsPort",
    "TriggerRulesPort",
    "TriggerStorePort",
    "UsageDay",
    "UsagePort",
    "WaitersPort",
    "WorkQueuesPort",
    "WorkflowsPort",
    "delay_seconds",
]
