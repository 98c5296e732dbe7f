"""A model of the deployed pipeline at scale: how late runs start when many are due at once.

Nothing here calls AWS. The pipeline's own costs come from a ``Calibration`` — CPU time and store calls
per dispatched job and per run, measured by ``scripts/bench_scale.py`` running the real dispatcher and
worker on the in-memory adapters — and AWS's behaviour from ``AwsLimits``: published quotas, scaling rates
and latencies, each with its source in docs/scale-model.md. A ``Deployment`` is what the CDK context sets.

Time advances in steps of ``STEP`` seconds. The dispatch side is computed per dispatcher part and tick;
the work side is a queue of visible messages drained by worker invocations whose number the event source
scaling, the event source's maximum concurrency, the account's concurrency and DynamoDB's write
throughput bound. Each step records which of those held messages back, so a result names the limit that
held runs back for the longest time.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import defaultdict
from dataclasses import dataclass, field

STEP = 0.05  # seconds
FULL_VCPU_MB = 1769  # Lambda gives one full vCPU at 1,769 MB, proportionally less below
BATCH = 10  # SQS messages per worker invocation


@dataclass(frozen=True)
class AwsLimits:
    """AWS numbers the model leans on (sources: docs/scale-model.md)."""

    esm_initial_concurrency: int = 5  # batches an SQS event source starts with when messages appear
    esm_scale_per_minute: int = 300  # more concurrent batches per minute while messages remain
    esm_max_batches: int = 1000  # per event source (also the MaximumConcurrency ceiling)
    function_scale_per_10s: int = 1000  # execution environments a function may add every 10 seconds
    account_concurrency: int = 1000  # default Lambda concurrency per account and Region
    ddb_call_ms: float = 5.0  # one single-item DynamoDB call, typical in-Region latency
    sqs_call_ms: float = 12.0  # one SendMessageBatch
    lambda_invoke_ms: float = 20.0  # a synchronous Lambda target's invoke overhead (its own work apart)
    sandbox_start_s: float = 0.25  # a new execution environment before the init code runs
    ddb_on_demand_instant_wcu: int = 4000  # what a new on-demand table (no warm throughput) writes at once
    ddb_table_quota_wcu: int = 40000  # per-table on-demand maximum (default quota)
    ddb_partition_wcu: int = 1000  # one partition (one item's key) per second
    sqs_delay_granularity_s: float = 1.0
    tick_budget_s: float = 40.0  # the dispatcher stops planning at TICK_BUDGET (its timeout is 60 s)


@dataclass(frozen=True)
class Calibration:
    """The pipeline's own cost, measured on this machine (scripts/bench_scale.py prints a fresh one)."""

    # Defaults: the figures bench_scale printed on 2026-12-01 (2,000 jobs, this 2-core machine).
    dispatch_cpu_per_job_s: float = 0.0015  # plan + audit + bookkeeping of one due job (memory adapters)
    dispatch_calls_per_job: float = 3.0  # DynamoDB calls (cursor write; reads amortised over batches)
    dispatch_sqs_per_job: float = 0.1  # SendMessageBatch calls per job (ten messages each)
    # The cursor write (the table) with its due-index move (two index writes), by store as the worker's below.
    dispatch_wcu_by_store: tuple[tuple[str, float], ...] = (("jobs", 1.0), ("jobs/due", 2.0))
    worker_cpu_per_run_s: float = 0.00064  # the worker's own code for one run (memory adapters)
    worker_calls_per_run: float = 10.0  # DynamoDB calls per run (reads and writes)
    # The worker's write units a run by what serves them: a table, or one of its indexes (``<table>/<index>``).
    # Each has its own partitions and throughput (warm throughput and the per-table quota apply to a table and to
    # each of its indexes apart), so a burst is held back by the busiest of them, not by their sum.
    # Measured 2026-12-08 (#51), a nightly job's run as deployed: on the jobs table its slot 1.0, its team's slot
    # 1.0 (a burst interleaves teams: a batch's runs are of ten teams), its usage and SLO item 1.0, its baseline 0.25
    # (one night in four), the day's team set 0.10 (a shard's write once a team a day); on the runs table its claim
    # and end. No index.
    worker_wcu_by_store: tuple[tuple[str, float], ...] = (("jobs", 3.35), ("runs", 2.0))
    sdk_cpu_per_call_s: float = 0.0027  # boto3 signing, HTTP and parsing per call, this machine
    init_cpu_s: float = 1.08  # importing the worker handler (a cold start's init), this machine

    def dispatch_cpu(self) -> float:
        return self.dispatch_cpu_per_job_s + (self.dispatch_calls_per_job + self.dispatch_sqs_per_job) * (
            self.sdk_cpu_per_call_s
        )

    @property
    def worker_wcu_per_run(self) -> float:
        """All of a run's write units (what it is billed)."""
        return sum(units for _, units in self.worker_wcu_by_store)

    def worker_cpu(self) -> float:
        # + the target's Invoke call
        return self.worker_cpu_per_run_s + (self.worker_calls_per_run + 1) * self.sdk_cpu_per_call_s


AWS_LIMITS = AwsLimits()
RECORDED_CALIBRATION = Calibration()


@dataclass(frozen=True)
class Deployment:
    """The settings a platform team chooses (CDK context; docs/operate/upgrade-and-cost.md, "Sizing for a burst")."""

    dispatchers: int = 1
    due_shards: int = 8
    dispatcher_memory_mb: int = 512
    worker_memory_mb: int = 256
    worker_max_concurrency: int = 50  # per priority class (all the burst's runs are one class here)
    warm_wcu: int | None = None  # DynamoDB warm throughput; None: on demand from cold
    account_concurrency: int | None = None  # None: AWS's default
    target_ms: float = 100.0  # what each run's target takes
    dispatch_ahead_s: float = 600.0  # sparse jobs are dispatched this early (DISPATCH_AHEAD)
    io_concurrency: int = 16  # the dispatcher's concurrent writes and sends (IO_CONCURRENCY)
    # Work queues per priority class (CDK ``work_queues``), each with its own event source: they scale side by
    # side, and ``worker_max_concurrency`` applies to each.
    queues_per_class: int = 1

    @staticmethod
    def vcpu(memory_mb: int) -> float:
        return min(1.0, memory_mb / FULL_VCPU_MB)  # Python runs one thread at a time: more vCPUs do not help


@dataclass
class BurstResult:
    runs: int
    lateness: list[float]  # seconds, one per run
    dispatcher_seconds_per_tick: float
    dispatch_ticks: int
    late_sends: int  # messages the dispatchers sent after their instant
    peak_concurrency: int
    peak_wcu_per_second: float
    held_back: dict[str, float] = field(default_factory=dict)  # limit -> seconds it held messages back

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.lateness)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]

    @property
    def binding(self) -> str:
        return max(self.held_back, key=lambda limit: self.held_back[limit]) if self.held_back else "none"


def store_wcu(deployment: Deployment, limits: AwsLimits) -> float:
    """The write units a second each store (a table, an index) serves at once: its warm throughput (CDK warms the
    tables and their indexes alike), or a new on-demand table's, at most the per-table quota."""
    return min(deployment.warm_wcu or limits.ddb_on_demand_instant_wcu, limits.ddb_table_quota_wcu)


def dispatch_times(
    due_at: list[float], deployment: Deployment, calibration: Calibration, limits: AwsLimits
) -> tuple[list[float], float, int, float, str]:
    """When each job's message is sent (seconds; ``due_at`` sorted), the busiest part's seconds per tick,
    the number of ticks used, the dispatchers' peak write units per second on their busiest store, and what
    paces a part (its CPU and calls, or that store's write throughput shared by every part). Sparse jobs are
    due ``dispatch_ahead_s`` before their instant; each part of the tick plans its shards' due jobs for at
    most the tick budget, the rest waits for the next tick."""
    vcpu = Deployment.vcpu(deployment.dispatcher_memory_mb)
    parts = deployment.dispatchers
    work = max(
        calibration.dispatch_cpu() / vcpu,
        (
            calibration.dispatch_calls_per_job * limits.ddb_call_ms
            + calibration.dispatch_sqs_per_job * limits.sqs_call_ms
        )
        / 1000
        / deployment.io_concurrency,
    )
    store, units = max(calibration.dispatch_wcu_by_store, key=lambda entry: entry[1], default=("", 0.0))
    writes = parts * units / store_wcu(deployment, limits)  # every part writing at once
    per_job = max(work, writes)
    pace = f"dispatcher tick budget (DynamoDB write throughput, {store})" if writes > work else "dispatcher tick budget"
    per_tick = max(1, int(limits.tick_budget_s / per_job))
    sent: list[float] = [0.0] * len(due_at)
    # Jobs spread over parts by shard (crc32 of the key: uniform); each part takes its jobs in due order.
    queues: list[list[int]] = [[] for _ in range(parts)]
    for index in range(len(due_at)):
        queues[(index * 2654435761) % deployment.due_shards % parts].append(index)
    busiest, ticks = 0.0, 0
    for queue in queues:
        position = 0
        tick = math.floor((due_at[queue[0]] - deployment.dispatch_ahead_s) / 60) * 60.0 if queue else 0.0
        while position < len(queue):
            ready = [
                i for i in queue[position : position + per_tick] if due_at[i] - deployment.dispatch_ahead_s <= tick
            ]
            if not ready:
                tick += 60
                continue
            for offset, index in enumerate(ready):
                sent[index] = tick + 1.0 + (offset + 1) * per_job  # a warm dispatcher starts within a second
            busiest = max(busiest, len(ready) * per_job)
            ticks += 1
            position += len(ready)
            tick += 60
    peak_wcu = min(parts, len(due_at)) * units / per_job if due_at else 0.0
    return sent, busiest, ticks, peak_wcu, pace


def simulate(
    fire_at: list[float],
    deployment: Deployment,
    calibration: Calibration,
    limits: AwsLimits = AWS_LIMITS,
    *,
    warm_concurrency: int = 0,
    dispatched: bool = True,
) -> BurstResult:
    """Runs due at ``fire_at`` (seconds, any order): dispatched (sparse jobs, early) then worked off.
    ``warm_concurrency``: event-source batches and environments already running (a steady load's level).
    ``dispatched=False``: messages are already on the queue (minutely jobs, sent by earlier ticks)."""
    fire_at = sorted(fire_at)
    if dispatched:
        sent, busiest, ticks, dispatch_wcu, pace = dispatch_times(fire_at, deployment, calibration, limits)
    else:
        sent, busiest, ticks, dispatch_wcu = [f - deployment.dispatch_ahead_s for f in fire_at], 0.0, 0, 0.0
        pace = "dispatcher tick budget"
    granularity = limits.sqs_delay_granularity_s
    visible = sorted(max(f, math.ceil(s / granularity) * granularity) for f, s in zip(fire_at, sent, strict=True))
    # Lateness is counted per message in visibility order; the k-th message out belongs to the k-th run due.
    late_sends = sum(1 for f, s in zip(fire_at, sent, strict=True) if s > f)
    pool = _WorkerPool.for_deployment(deployment, calibration, limits, warm_concurrency)
    lateness = pool.work_off(visible, fire_at)
    held = pool.held
    if late_sends:
        held[pace] += max(s - f for f, s in zip(fire_at, sent, strict=True))
    return BurstResult(
        runs=len(fire_at),
        lateness=lateness,
        dispatcher_seconds_per_tick=busiest,
        dispatch_ticks=ticks,
        late_sends=late_sends,
        peak_concurrency=pool.peak,
        peak_wcu_per_second=max(float(max(pool.wcu_used.values(), default=0)), dispatch_wcu),  # the busiest store's
        held_back=dict(held),
    )


@dataclass
class _WorkerPool:
    """The worker side of a burst: event-source and function scaling, cold starts, account concurrency
    and the table's write throughput, stepped in STEP seconds; ``held`` names what held runs back."""

    run_cpu: float  # seconds of one run's CPU at the worker's vCPU share
    claim_io: float  # until the run has started: job read, slot, run record
    run_io: float
    init: float  # a cold start
    target_s: float
    account: int
    queues: int
    esm_cap: int
    wcu_capacity: float  # each store's (a table, an index)
    wcu_per_batch: dict[str, float]
    esm_scale_per_minute: int
    function_scale_per_10s: int
    esm: float
    function_cap: float
    environments: int  # warm execution environments
    held: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    busy: list[float] = field(default_factory=list)  # finish times of running invocations
    wcu_used: defaultdict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    peak: int = 0

    @classmethod
    def for_deployment(
        cls, deployment: Deployment, calibration: Calibration, limits: AwsLimits, warm_concurrency: int
    ) -> _WorkerPool:
        worker_vcpu = Deployment.vcpu(deployment.worker_memory_mb)
        queues = deployment.queues_per_class
        return cls(
            run_cpu=calibration.worker_cpu() / worker_vcpu,
            claim_io=3 * limits.ddb_call_ms / 1000,
            run_io=calibration.worker_calls_per_run * limits.ddb_call_ms / 1000 + limits.lambda_invoke_ms / 1000,
            init=limits.sandbox_start_s + calibration.init_cpu_s / worker_vcpu,
            target_s=deployment.target_ms / 1000,
            account=deployment.account_concurrency or limits.account_concurrency,
            queues=queues,
            esm_cap=queues * min(deployment.worker_max_concurrency, limits.esm_max_batches),
            wcu_capacity=store_wcu(deployment, limits),
            wcu_per_batch={store: BATCH * units for store, units in calibration.worker_wcu_by_store},
            esm_scale_per_minute=limits.esm_scale_per_minute,
            function_scale_per_10s=limits.function_scale_per_10s,
            esm=float(max(queues * limits.esm_initial_concurrency, warm_concurrency)),
            function_cap=float(max(limits.function_scale_per_10s, warm_concurrency)),
            environments=warm_concurrency,
        )

    def work_off(self, visible: list[float], fire_at: list[float]) -> list[float]:
        """Start every visible message's run; the lateness of each, in visibility order."""
        lateness: list[float] = []
        now = visible[0] if visible else 0.0
        while len(lateness) < len(visible):
            while self.busy and self.busy[0] <= now:
                heapq.heappop(self.busy)
            waiting = bisect.bisect_right(visible, now) - len(lateness)
            if waiting > 0:
                self._scale()
            allowed = min(int(self.esm), int(self.function_cap), self.account)
            waiting = self._start(now, waiting, allowed, fire_at, lateness)
            self.peak = max(self.peak, len(self.busy))
            if waiting > 0:
                if len(self.busy) >= allowed:
                    self.held[self._binding_limit()] += STEP
                now += STEP
            else:
                taken = len(lateness)
                following = visible[taken] if taken < len(visible) else now + STEP
                now = max(now + STEP, min(following, self.busy[0] if self.busy else following))
        return lateness

    def _scale(self) -> None:
        self.esm = min(self.esm_cap, self.esm + self.queues * self.esm_scale_per_minute / 60 * STEP)
        self.function_cap = min(float(self.account), self.function_cap + self.function_scale_per_10s / 10 * STEP)

    def _start(self, now: float, waiting: int, allowed: int, fire_at: list[float], lateness: list[float]) -> int:
        """Start batches while invocations are allowed and the table takes their writes; returns what waits."""
        while waiting > 0 and len(self.busy) < allowed:
            second = int(now)
            full = [
                s for s, units in self.wcu_per_batch.items() if self.wcu_used[s, second] + units > self.wcu_capacity
            ]
            if full:
                self.held[f"DynamoDB write throughput ({full[0]})"] += STEP
                break
            for store, units in self.wcu_per_batch.items():
                self.wcu_used[store, second] += units
            batch = min(BATCH, waiting)
            cold = self.init if len(self.busy) >= self.environments else 0.0
            self.environments = max(self.environments, len(self.busy) + 1)
            taken = len(lateness)
            for k in range(batch):
                start = now + cold + (k + 1) * self.run_cpu / 2 + self.claim_io
                lateness.append(max(0.0, start - fire_at[taken + k]))
            heapq.heappush(self.busy, now + cold + batch * self.run_cpu + self.run_io + self.target_s)
            waiting -= batch
        return waiting

    def _binding_limit(self) -> str:
        return min(
            (self.esm_cap, f"event-source maximum concurrency ({self.esm_cap})"),
            (self.account, f"account concurrency ({self.account})"),
            (int(self.esm), f"event-source scaling (+{self.esm_scale_per_minute} a minute per queue)"),
            (int(self.function_cap), f"function scaling (+{self.function_scale_per_10s} per 10 s)"),
        )[1]
