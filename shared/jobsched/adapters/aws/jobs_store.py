"""The Jobs table: job specs, their dispatch state, concurrency slots, audit records.

Per job, one partition holds:
- SPEC: the spec (JSON), version, lifecycle state. Every write is conditional on the version.
- STATE: small and hot: the next visit (stored as next_fire_at) + due_shard (the sparse ``due`` index), the
  dispatch cursor, the spec version the cursor belongs to, ``audited_to`` (every instant up to it has a run
  record: the lost-message audit) and ``slots`` (run -> lease) for max_running.
- AUDIT#...: who changed what, written in the same transaction as the change.

Conditional failures become domain exceptions; nothing here decides policy.

One store per aggregate (``adapters/aws/jobs/``); ``JobsStore`` is all of them over one table.
"""

from __future__ import annotations

from typing import Any

from jobsched.adapters.aws.jobs.batches import BatchesStore
from jobsched.adapters.aws.jobs.breakers import BreakersStore
from jobsched.adapters.aws.jobs.budgets import BudgetsStore
from jobsched.adapters.aws.jobs.company import CompanyStore
from jobsched.adapters.aws.jobs.dispatch_state import DispatchStateStore
from jobsched.adapters.aws.jobs.downstreams import DownstreamsStore
from jobsched.adapters.aws.jobs.drills import DrillsStore
from jobsched.adapters.aws.jobs.health import HealthStore
from jobsched.adapters.aws.jobs.incidents import IncidentsStore
from jobsched.adapters.aws.jobs.requests import RequestsStore
from jobsched.adapters.aws.jobs.slo import SloLedgerStore
from jobsched.adapters.aws.jobs.slots import SlotsStore
from jobsched.adapters.aws.jobs.specs import SpecsStore
from jobsched.adapters.aws.jobs.stops import StopsStore
from jobsched.adapters.aws.jobs.usage import UsageStore
from jobsched.adapters.aws.jobs.waiters import WaitersStore
from jobsched.core.limits import TeamLimits
from jobsched.tenancy.quotas import CachedLimits


class JobsStore(
    SpecsStore,
    DispatchStateStore,
    IncidentsStore,
    BreakersStore,
    SlotsStore,
    RequestsStore,
    BatchesStore,
    DownstreamsStore,
    WaitersStore,
    SloLedgerStore,
    DrillsStore,
    HealthStore,
    StopsStore,
    CompanyStore,
    UsageStore,
    BudgetsStore,
):
    """The Jobs table: every aggregate's store over one table and one client."""

    def __init__(
        self, table_name: str, dynamodb: Any | None = None, *, team_defaults: TeamLimits | None = None
    ) -> None:
        self.table = table_name
        self._client = dynamodb
        self.team_defaults = team_defaults or TeamLimits()
        self._limits = CachedLimits(self.team_defaults, self.team_overrides)
