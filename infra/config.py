"""What a stage is deployed with: CDK context read once, checked at synth (a bad value fails the synth)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constructs import Construct

from jobsched.core.limits import TeamLimits
from jobsched.core.names import (
    DUE_SHARDS,
    LOCAL_STAGE,
    MAX_DISPATCHERS,
    MAX_DUE_SHARDS,
    MAX_WORK_QUEUES,
    PRIORITIES,
    WORK_QUEUES,
)
from jobsched.core.slo import SloTiers
from jobsched.core.spec import NAME as TEAM_NAME
from jobsched.registry.policy import OrgPolicy

# Where the alarm runbook is read: the platform sets its published docs site's page (CDK context runbook_url).
RUNBOOK_URL = "docs/operate/alarms.md"


@dataclass(frozen=True)
class TableCapacity:
    """Provisioned DynamoDB capacity for a big deployment (CDK context ``dynamodb_capacity``), per table and
    per index, scaled between ``min`` and ``max`` units to keep ``target_utilization`` percent busy. On demand
    (no context) costs about twice as much per run at steady load and needs no sizing; provisioned needs the
    peak minute's write units (``jobsched capacity`` is the sizing tool #15 asks for)."""

    read_min: int = 5
    read_max: int = 4000
    write_min: int = 5
    write_max: int = 4000
    target_utilization: int = 70

    @classmethod
    def from_context(cls, value: Any) -> TableCapacity | None:
        """-c dynamodb_capacity='{"write": {"min": 50, "max": 20000}, "target_utilization": 70}'; refused at
        synth when malformed."""
        if value is None:
            return None
        raw = json.loads(value) if isinstance(value, str) else dict(value)
        unknown = set(raw) - {"read", "write", "target_utilization"}
        if unknown:
            raise ValueError(
                f"dynamodb_capacity: unknown keys {sorted(unknown)} (allowed: read, write, target_utilization)"
            )
        read, write = dict(raw.get("read") or {}), dict(raw.get("write") or {})
        capacity = cls(
            read_min=int(read.get("min", cls.read_min)),
            read_max=int(read.get("max", cls.read_max)),
            write_min=int(write.get("min", cls.write_min)),
            write_max=int(write.get("max", cls.write_max)),
            target_utilization=int(raw.get("target_utilization", cls.target_utilization)),
        )
        if not (1 <= capacity.read_min <= capacity.read_max and 1 <= capacity.write_min <= capacity.write_max):
            raise ValueError("dynamodb_capacity: need 1 <= min <= max for read and write")
        if not 20 <= capacity.target_utilization <= 90:
            raise ValueError("dynamodb_capacity: target_utilization is a percentage between 20 and 90")
        return capacity


@dataclass(frozen=True)
class BurstConfig:
    """What a deployment sized for bursts sets (docs/operate/upgrade-and-cost.md, "Sizing for a burst";
    ``jobsched capacity`` suggests the values for a directory of job files):

    - ``dispatchers``: parallel dispatcher invocations per tick, each reading ``due_shards / dispatchers``
      shards of the due index;
    - ``due_shards``: the due index's shard count; may only grow (see ``names.due_shard_count``);
    - ``warm_throughput``: DynamoDB warm throughput for both tables (reads and writes per second the tables
      serve at once, instead of on demand's doubling from the previous peak);
    - ``worker_concurrency``: the event sources' maximum concurrency per priority class (2-1000 each);
    - ``work_queues``: work queues per priority class (1-16), each with its own event source: a burst scales
      that many event sources side by side (``worker_concurrency`` then applies to each);
    - ``dispatcher_memory`` / ``worker_memory``: MB (128-10240). Lambda gives CPU in proportion, one full
      vCPU at 1,769 MB; the defaults (512 / 256) suit a small deployment, a burst wants the full vCPU.
    """

    dispatchers: int = 1
    due_shards: int = DUE_SHARDS
    warm_reads: int | None = None
    warm_writes: int | None = None
    worker_concurrency: tuple[tuple[str, int], ...] = ()
    dispatcher_memory: int = 512
    worker_memory: int = 256
    work_queues: int = 1

    @classmethod
    def from_context(cls, node: Any) -> BurstConfig:
        """-c dispatchers=8 -c due_shards=64 -c warm_throughput='{"reads": 12000, "writes": 40000}'
        -c worker_concurrency='{"normal": 500}'; refused at synth when out of range."""
        dispatchers = int(node.try_get_context("dispatchers") or 1)
        due_shards = int(node.try_get_context("due_shards") or DUE_SHARDS)
        if not 1 <= dispatchers <= MAX_DISPATCHERS:
            raise ValueError(f"dispatchers: 1 to {MAX_DISPATCHERS}")
        if not DUE_SHARDS <= due_shards <= MAX_DUE_SHARDS or due_shards < dispatchers:
            raise ValueError(f"due_shards: {DUE_SHARDS} to {MAX_DUE_SHARDS}, and at least dispatchers")
        warm = _json_context(node.try_get_context("warm_throughput"))
        if set(warm) - {"reads", "writes"}:
            raise ValueError("warm_throughput: keys reads and writes (units per second)")
        concurrency = {str(k): int(v) for k, v in _json_context(node.try_get_context("worker_concurrency")).items()}
        if set(concurrency) - set(PRIORITIES) or any(not 2 <= v <= 1000 for v in concurrency.values()):
            raise ValueError(f"worker_concurrency: per class of {list(PRIORITIES)}, 2 to 1000 each")
        memory = {
            name: int(node.try_get_context(name) or default)
            for name, default in (("dispatcher_memory", cls.dispatcher_memory), ("worker_memory", cls.worker_memory))
        }
        for name, value in memory.items():
            if not 128 <= value <= 10240:
                raise ValueError(f"{name}: 128 to 10240 MB")
        work_queues = int(node.try_get_context("work_queues") or 1)
        if not 1 <= work_queues <= MAX_WORK_QUEUES:
            raise ValueError(f"work_queues: 1 to {MAX_WORK_QUEUES} per priority class")
        return cls(
            **memory,
            work_queues=work_queues,
            dispatchers=dispatchers,
            due_shards=due_shards,
            warm_reads=int(warm["reads"]) if "reads" in warm else None,
            warm_writes=int(warm["writes"]) if "writes" in warm else None,
            worker_concurrency=tuple(sorted(concurrency.items())),
        )

    def max_concurrency(self, priority: str) -> int:
        return dict(self.worker_concurrency).get(priority, WORK_QUEUES[priority].max_concurrency)


@dataclass(frozen=True)
class StageConfig:
    stage: str
    prod: bool
    examples: bool
    asset_dir: str | None  # built by scripts/build_asset.py; None: stub code (tests, offline synth)
    membership: dict[str, Any] = field(default_factory=dict)
    api_rate_limit: int = 100
    api_burst_limit: int = 200
    lateness_p99_threshold_seconds: float = 5.0
    egress_allow: tuple[str, ...] = ()  # hosts or CIDRs outbound HTTP may reach despite the deny-list
    api_reserved_concurrency: int = 20  # a burst of API calls cannot take the concurrency runs need
    waf: bool = False  # a web ACL on the API (rate per source IP, body size); on by default in prod
    waf_rate_per_5_minutes: int = 3000
    team_limits: TeamLimits = field(default_factory=TeamLimits)  # every team's defaults (jobsched.tenancy.quotas)
    slo_tiers: SloTiers = field(default_factory=SloTiers)  # each tier's objectives (jobsched.core.slo)
    org_policy: OrgPolicy = field(default_factory=OrgPolicy)  # enforced at PUT, served at GET /policy
    runbook_url: str = RUNBOOK_URL  # the alarm runbook each alarm's description links (the published docs' page)
    capacity: TableCapacity | None = None  # None: on demand; else provisioned with auto scaling
    # DynamoDB's TTL on the hot tables' ``expires_at``, deleting expired items for free (#51): off by default, as a
    # table with multi-Region strong consistency has none; a stage that stays in one region may turn it on. The
    # sweeper runs either way (nothing relies on TTL): with it, its weekly passes find little left to delete.
    table_ttl: bool = False
    # The tables of the layout before #51, kept (and read by the functions) until `jobsched tables move` has moved
    # the stage onto the global tables; `-c previous_tables=false` once it has (a prod table is retained, not deleted).
    previous_tables: bool = True
    # What an idle non-prod stage need not pay for (scripts/idle_cost.py): on by default in prod and locally.
    dashboards: bool = True  # three dashboards, $3 each a month
    zero_metrics: bool = True  # publish zero counts each tick (13 custom metrics, $0.30 each a month idle)
    tracing: bool = True  # X-Ray on every function and the API
    burst: BurstConfig = field(default_factory=BurstConfig)
    console_teams: tuple[str, ...] = ()  # teams whose console buttons act (an alias of the actions function each)
    console_trail: bool = True  # a trail of the console's invocations (who pressed); off if one already logs them

    @classmethod
    def from_context(cls, scope: Construct) -> StageConfig:
        node = scope.node
        stage = str(node.try_get_context("stage") or "dev")
        prod = stage == "prod"
        examples = node.try_get_context("examples")
        return cls(
            stage=stage,
            prod=prod,
            examples=(not prod) if examples is None else str(examples).lower() == "true",
            asset_dir=node.try_get_context("asset_dir"),
            membership=_membership_context(node.try_get_context("membership")),
            egress_allow=_list_context(node.try_get_context("egress_allow")),
            api_reserved_concurrency=int(node.try_get_context("api_reserved_concurrency") or 20),
            waf=prod if node.try_get_context("waf") is None else str(node.try_get_context("waf")).lower() == "true",
            team_limits=_team_limits_context(node.try_get_context("team_limits")),
            slo_tiers=_slo_tiers_context(node.try_get_context("slo_tiers")),
            org_policy=_org_policy_context(node.try_get_context("org_policy")),
            runbook_url=str(node.try_get_context("runbook_url") or RUNBOOK_URL),
            capacity=TableCapacity.from_context(node.try_get_context("dynamodb_capacity")),
            table_ttl=_flag(node, "table_ttl", default=False),
            previous_tables=_flag(node, "previous_tables", default=True),
            dashboards=_flag(node, "dashboards", default=prod or stage == LOCAL_STAGE),
            zero_metrics=_flag(node, "zero_metrics", default=prod or stage == LOCAL_STAGE),
            tracing=_flag(node, "tracing", default=prod or stage == LOCAL_STAGE),
            burst=BurstConfig.from_context(node),
            console_teams=_console_teams(node.try_get_context("console_teams")),
            console_trail=_flag(node, "console_trail", default=True),
        )


MAX_CONSOLE_TEAMS = 100  # two aliases each (widget, actions): well inside a template's 500 resources


def _console_teams(value: Any) -> tuple[str, ...]:
    """-c console_teams=payments,search (or a JSON list in cdk.json): refused at synth when not team names."""
    teams = tuple(sorted(set(_list_context(value))))
    wrong = [team for team in teams if not TEAM_NAME.match(team)]
    if wrong:
        raise ValueError(f"console_teams: not team names: {wrong}")
    if len(teams) > MAX_CONSOLE_TEAMS:
        raise ValueError(f"console_teams: at most {MAX_CONSOLE_TEAMS} teams")
    return teams


def _membership_context(value: Any) -> dict[str, Any]:
    """-c membership='{"admins": [...], ...}' at first deploy; afterwards admins edit the parameter."""
    if value is None:
        return {"admins": [], "teams": {}, "team_patterns": []}
    return json.loads(value) if isinstance(value, str) else dict(value)


def _flag(node: Any, name: str, *, default: bool) -> bool:
    """-c dashboards=true|false; absent: the stage's default."""
    value = node.try_get_context(name)
    return default if value is None else str(value).lower() == "true"


def _slo_tiers_context(value: Any) -> SloTiers:
    """-c slo_tiers='{"critical": {"success": 0.9995}}' (or an object in cdk.json): refused at synth when malformed."""
    if value is None:
        return SloTiers()
    return SloTiers().with_overrides(json.loads(value) if isinstance(value, str) else dict(value))


def _org_policy_context(value: Any) -> OrgPolicy:
    """-c org_policy=policy.yaml (a path, relative to the app), its YAML or JSON text, or an object in cdk.json: the
    same file ``jobsched lint --policy`` reads. Refused at synth when malformed."""
    if value is None:
        return OrgPolicy()
    if isinstance(value, dict):
        return OrgPolicy.model_validate(value)
    text = str(value)
    path = Path(text)
    if "\n" not in text and len(text) < 1024 and path.suffix in (".yaml", ".yml", ".json") and path.is_file():
        return OrgPolicy.load(path)
    return OrgPolicy.parse(text)


def _team_limits_context(value: Any) -> TeamLimits:
    """-c team_limits='{"max_running": 50}' (or an object in cdk.json): refused at synth when malformed."""
    if value is None:
        return TeamLimits()
    return TeamLimits().with_overrides(json.loads(value) if isinstance(value, str) else dict(value))


def _json_context(value: Any) -> dict[str, Any]:
    """A JSON object given on the command line (a string) or in cdk.json (an object); absent: empty."""
    if value is None:
        return {}
    return dict(json.loads(value) if isinstance(value, str) else value)


def _list_context(value: Any) -> tuple[str, ...]:
    """-c egress_allow='10.1.0.0/16,partner.internal' (or a JSON list in cdk.json)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(item).strip() for item in items if str(item).strip())
